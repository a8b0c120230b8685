"""pytest-benchmark's hooks in a suite's conftest, under pytest-gpuperf's ``benchmark`` fixture (``-p no:benchmark``).

Before pytest-gpuperf registered their specifications, any ``pytest_benchmark_*`` hook in a conftest stopped the
run: ``INTERNALERROR ... PluginValidationError: unknown hook 'pytest_benchmark_update_machine_info'``, exit 3.
"""

from __future__ import annotations

import json

import pytest

from tests.plugin.test_benchmark_fixture import FAST

#: As NVIDIA/Fuser's benchmarks/python/conftest.py and others write them: the GPU's facts added to the machine
#: info, behind a try/except import; a commit message added; the JSON, table and grouping hooks a suite also keeps.
CONFTEST = """
import pytest

try:
    import torch

    DEVICE_PROPERTIES = {
        "gpu_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no gpu",
        "cuda_version": torch.version.cuda or "none",
        "torch": torch.__version__.split("+")[0],
    }
except ImportError:
    DEVICE_PROPERTIES = {}


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info.update(DEVICE_PROPERTIES)
    machine_info["user"] = "ci"


def pytest_benchmark_update_commit_info(config, commit_info):
    commit_info["message"] = "a commit message"


def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["suite"] = "kernels"


@pytest.hookimpl(wrapper=True)
def pytest_benchmark_generate_json(config, benchmarks, include_data, machine_info, commit_info):
    output_json = yield
    output_json["wrapped"] = True
    return output_json


def pytest_benchmark_group_stats(config, benchmarks, group_by):
    return None


def pytest_benchmark_scale_unit(config, unit, benchmarks, best, worst, sort):
    return "", 1.0


def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    pass
"""

SUITE = """
def test_sum(benchmark):
    assert benchmark(sum, range(100)) == 4950
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_conftest_with_pytest_benchmark_hooks_runs(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*FAST)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1)
    assert "unknown hook" not in result.stdout.str() + result.stderr.str()


def test_the_machine_and_commit_info_hooks_reach_the_run_and_the_export(suite: pytest.Pytester) -> None:
    from pytest_gpuperf.cli import main

    result = suite.runpytest(*FAST, "--gpuperf-json=run.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    fingerprint = json.loads((suite.path / "run.json").read_text())["fingerprint"]
    machine = fingerprint["machine_info"]
    assert machine["user"] == "ci" and machine["gpu_name"] == "no gpu" and "torch" in machine
    assert machine["cpu"]["count"] == fingerprint["cpu_count"]  # the hook added to the derived machine info
    assert fingerprint["commit_info"]["message"] == "a commit message"
    assert main(["export", "--format", "pytest-benchmark", str(suite.path / "run.json"), "-o", "pb.json"]) == 0
    exported = json.loads((suite.path / "pb.json").read_text())
    assert exported["machine_info"]["user"] == "ci" and exported["machine_info"]["gpu_name"] == "no gpu"
    assert exported["commit_info"]["message"] == "a commit message"


def test_benchmark_json_is_written_through_the_json_hooks(suite: pytest.Pytester) -> None:
    """``--benchmark-json`` as a github-action-benchmark workflow gives it: the suite's update_json field, its
    generate_json wrapper's and its machine info are in the file."""
    result = suite.runpytest(*FAST, "--benchmark-json", "output.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["gpuperf: wrote 1 benchmarks to output.json (pytest-benchmark's JSON)"])
    data = json.loads((suite.path / "output.json").read_text())
    assert data["suite"] == "kernels" and data["wrapped"] is True
    assert data["machine_info"]["user"] == "ci" and data["commit_info"]["message"] == "a commit message"
    (bench,) = data["benchmarks"]
    assert bench["fullname"] == "test_suite.py::test_sum" and len(bench["stats"]["data"]) == bench["stats"]["rounds"]
    # Written again over its own file; another file at that path is refused before anything is measured.
    assert suite.runpytest(*FAST, "--benchmark-json=output.json").ret == pytest.ExitCode.OK
    (suite.path / "notes.json").write_text('{"mine": 1}\n')
    refused = suite.runpytest(*FAST, "--benchmark-json=notes.json")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: --benchmark-json=notes.json: *"])
    assert (suite.path / "notes.json").read_text() == '{"mine": 1}\n'


def test_a_generate_json_wrapper_may_keep_benchmarks_with_errors(pytester: pytest.Pytester) -> None:
    """pytest-benchmark's documented wrapper clears ``has_error`` on each benchmark, and reads its names."""
    pytester.makeconftest(
        "import pytest\n"
        "@pytest.hookimpl(wrapper=True)\n"
        "def pytest_benchmark_generate_json(config, benchmarks, include_data, machine_info, commit_info):\n"
        "    for bench in benchmarks:\n"
        "        bench.has_error = False\n"
        "        bench.extra_info['seen'] = bench.name\n"
        "    return (yield)\n"
    )
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(*FAST, "--benchmark-json=out.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    (bench,) = json.loads((pytester.path / "out.json").read_text())["benchmarks"]
    assert bench["extra_info"]["seen"] == "test_sum"


def test_generate_machine_info_replaces_it(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "def pytest_benchmark_generate_machine_info(config):\n    return {'box': 'rack 4'}\n"
        "def pytest_benchmark_update_machine_info(config, machine_info):\n    machine_info['slot'] = 2\n"
    )
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(*FAST, "--gpuperf-json=run.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    fingerprint = json.loads((pytester.path / "run.json").read_text())["fingerprint"]
    assert fingerprint["machine_info"] == {"box": "rack 4", "slot": 2}
    assert "commit_info" not in fingerprint  # no commit hook: nothing added


def test_a_suite_without_the_hooks_keeps_its_fingerprint(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(*FAST, "--gpuperf-json=run.json")
    assert result.ret == pytest.ExitCode.OK
    fingerprint = json.loads((pytester.path / "run.json").read_text())["fingerprint"]
    assert "machine_info" not in fingerprint and "commit_info" not in fingerprint


def test_with_pytest_benchmark_active_its_own_specifications_serve(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # pytest-benchmark turns itself off in an xdist worker
    result = suite.runpytest_subprocess("-p", "no:randomly", "--benchmark-max-time=0.01", "--benchmark-json=pb.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    data = json.loads((suite.path / "pb.json").read_text())
    assert data["suite"] == "kernels" and data["wrapped"] and data["machine_info"]["user"] == "ci"
