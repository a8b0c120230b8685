"""The plugin as a user runs it: pytester inner runs, asserting exit codes and output lines."""

from __future__ import annotations

import json

import pytest
import torch

# No wait for a quiet machine where a test saves a baseline (auto: up to 10 s per test on a busy machine).
FAST = (
    "--gpuperf-min-time=0.01",
    "--gpuperf-max-time=0.3",
    "--gpuperf-warmup-time=0.05",
    "--gpuperf-memory=off",
    "--gpuperf-quiet-wait=0",
)

MATMUL_TEST = """
import torch

def test_mm(gpuperf, gpuperf_device):
    a = torch.randn(64, 64, device=gpuperf_device)
    m = gpuperf.measure(lambda: a @ a, flops=2 * 64**3)
    m.assert_throughput(at_least="{bound}")
"""


@pytest.fixture
def matmul(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_mm=MATMUL_TEST.format(bound="1 FLOP/s"))
    return pytester


# ---------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--gpuperf-device=gpu"],
            "ERROR: --gpuperf-device=gpu: 'gpu' is not a device (for an NVIDIA GPU write cuda or cuda:N); "
            "use cpu, cuda, cuda:N, mps, auto, all or a comma list such as cpu,cuda",
        ),
        (["--gpuperf-device=cuda:x"], "ERROR: --gpuperf-device=cuda:x: 'cuda:x' is not a device (the index after*"),
        (["--gpuperf-device=cpu,"], "ERROR: --gpuperf-device=cpu,: 'cpu,' has an empty item*"),
        (["--gpuperf-max-time=-1"], "ERROR: --gpuperf-max-time=-1: must be a positive time, such as 0.5*"),
        (["--gpuperf-min-time=0"], "ERROR: --gpuperf-min-time=0: must be a positive time*"),
        (["--gpuperf-warmup-time=0 ms"], "ERROR: --gpuperf-warmup-time=0 ms: must be a positive time*"),
        (
            ["--gpuperf-max-time=fast"],
            "ERROR: --gpuperf-max-time=fast: cannot parse 'fast' as a quantity*; write a time such as 0.5*",
        ),
        (["--gpuperf-max-time=3 GB"], "ERROR: --gpuperf-max-time=3 GB: '3 GB' is not a time*"),
        (["--gpuperf-target=abc"], "ERROR: --gpuperf-target=abc: is not a number; write a fraction such as 0.01*"),
        (["--gpuperf-target=150%"], "ERROR: --gpuperf-target=150%: must be between 0 and 1*"),
        (["--gpuperf-min-samples=0"], "ERROR: --gpuperf-min-samples=0: must be at least 1"),
        (
            ["--gpuperf-threads=two"],
            "ERROR: --gpuperf-threads=two: is not a whole number; write a thread count such as 1, auto*",
        ),
        (["--gpuperf-inconclusive=maybe"], "ERROR: --gpuperf-inconclusive=maybe: must be one of: warn, fail"),
        (["--gpuperf-size=huge"], "ERROR: --gpuperf-size=huge: must be one of: auto, small, medium, large"),
        (["--gpuperf-mode=hot"], "ERROR: --gpuperf-mode=hot: must be one of: warm, cold, graph"),
        (["--gpuperf-profile=some"], "ERROR: --gpuperf-profile=some: must be one of: full, counts, off"),
        (
            ["--gpuperf-throttle-threshold=1.5"],
            "ERROR: --gpuperf-throttle-threshold=1.5: must be between 0 and 1 (exclusive)*",
        ),
        (
            ["--gpuperf-throttle-threshold=hot"],
            "ERROR: --gpuperf-throttle-threshold=hot: is not a number; write a fraction such as 0.01*",
        ),
        (
            ["--gpuperf-results-dir="],
            "ERROR: --gpuperf-results-dir=: is empty; give a directory such as .gpuperf, or leave the option out",
        ),
        (["--gpuperf-save="], "ERROR: --gpuperf-save=: is empty; give a baseline name such as main, or leave*"),
        (["--gpuperf-compare= "], "ERROR: --gpuperf-compare= : is empty; give a baseline name or a results file*"),
        (["--gpuperf-json="], "ERROR: --gpuperf-json=: is empty; give a file path such as results.json, or*"),
        (
            ["--gpuperf-replace"],
            "ERROR: --gpuperf-replace only changes what --gpuperf-save=NAME does: add --gpuperf-save=NAME, or leave*",
        ),
        (
            ["--gpuperf-device=CPU"],
            "ERROR: --gpuperf-device=CPU: 'CPU' is not a device (device names are lowercase: write cpu)*",
        ),
        (
            ["--gpuperf-min-time=10", "--gpuperf-max-time=1"],
            "ERROR: options: min_time 10 s is above max_time 1 s; raise --gpuperf-max-time or lower*",
        ),
    ],
)
def test_bad_options_are_usage_errors(matmul: pytest.Pytester, args: list[str], message: str) -> None:
    result = matmul.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_bad_ini_value_names_the_ini_key(matmul: pytest.Pytester) -> None:
    matmul.makeini("[pytest]\ngpuperf_max_time = soon\n")
    result = matmul.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini gpuperf_max_time = soon: cannot parse 'soon' as a quantity*"])


def test_a_misspelt_marker_keyword_errors_that_test_only(pytester: pytest.Pytester) -> None:
    """Issue 23 item 10: a misspelt keyword stopped the collection of the whole module (exit 2, nothing ran)."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.gpuperf(max_tme=1)
        def test_x(gpuperf):
            pass

        @pytest.mark.gpuperf(max_tme=1)
        def test_on_each_device(gpuperf_device):
            pass

        def test_unrelated():
            pass

        @pytest.mark.gpuperf(max_time=1)
        def test_spelt_right(gpuperf_device):
            pass
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_x*",
            "*::test_x*: @pytest.mark.gpuperf got an unknown keyword 'max_tme' (did you mean max_time?); "
            "it accepts: *max_time*target*",
        ]
    )
    result.stdout.no_fnmatch_line("*ERROR collecting*")


def test_a_bad_marker_value_errors_that_test_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.gpuperf(max_time="forever")
        def test_x(gpuperf):
            pass

        def test_unrelated():
            pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.gpuperf(max_time='forever'): cannot parse 'forever'*"])
    # Once in the ERRORS section: no chained traceback repeats it. The short summary line ("ERROR ...") is
    # left out because pytest cuts it to the terminal's width except when the CI variable is set.
    errors = [line for line in result.stdout.lines if not line.startswith("ERROR ")]
    assert sum("cannot parse 'forever'" in line for line in errors) == 1
    result.stdout.no_fnmatch_line("*During handling of the above exception*")


def test_a_bad_requires_marker_errors_that_test_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.gpuperf_requires("gpu")
        def test_x(gpuperf_device):
            pass

        @pytest.mark.gpuperf_requires("cuda", cuont=2)
        def test_y(gpuperf_device):
            pass

        def test_unrelated():
            pass
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*gpuperf_requires('gpu',): name device kinds among cpu, cuda, mps*"])
    result.stdout.fnmatch_lines(["*@pytest.mark.gpuperf_requires: only count=<whole number >= 1> is accepted*"])


# ---------------------------------------------------------------- devices


def test_device_parametrization_ids(matmul: pytest.Pytester) -> None:
    result = matmul.runpytest("--collect-only", "-q", "--gpuperf-device=cpu,cuda:1,mps")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["test_mm.py::test_mm[[]cpu[]]", "test_mm.py::test_mm[[]cuda:1[]]", "test_mm.py::test_mm[[]mps[]]"]
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_absent_device_skips_with_what_was_asked_and_what_exists(matmul: pytest.Pytester) -> None:
    result = matmul.runpytest("--gpuperf-device=cuda", "-rs")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        # A CPU build says "was built without CUDA"; a CUDA build on a machine without a GPU (torch 2.3.1+cu121
        # here) "finds no CUDA device or driver".
        ["SKIPPED [[]1[]] *: gpuperf: cuda was requested but torch * CUDA*; devices here: cpu"]
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_absent_device_is_an_error_when_asked(matmul: pytest.Pytester) -> None:
    result = matmul.runpytest("--gpuperf-device=cpu,cuda", "--gpuperf-missing-device=error")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --gpuperf-missing-device=error: cuda was requested but torch * CUDA*; "
            "devices here: cpu. Run on a machine with that device, or pass --gpuperf-missing-device=skip*"
        ]
    )


def test_requires_marker_skips_other_kinds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.gpuperf_requires("cuda", count=2)
        def test_dp(gpuperf_device):
            raise AssertionError("must not run on cpu")
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu", "-rs")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["SKIPPED*gpuperf: needs a cuda device; this run is on cpu"])


def test_requires_count_is_the_gpus_used_on_cuda_and_a_cpu_run_is_one_device(pytester: pytest.Pytester) -> None:
    """test_ddp_spawned's marker: a world of 2 gloo processes on the CPU, every GPU on CUDA (so 2 or more)."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.gpuperf_requires("cpu", "cuda", count=2)
        def test_world(gpuperf_device):
            pass
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu")
    result.assert_outcomes(passed=1)


# ---------------------------------------------------------------- settings precedence


PRECEDENCE_TEST = """
import pytest

def test_session_level(gpuperf):
    print("SESSION", gpuperf.settings.measure.max_time)

@pytest.mark.gpuperf(max_time="7 s")
def test_marker(gpuperf):
    print("MARKER", gpuperf.settings.measure.max_time)
"""


@pytest.mark.parametrize(
    ("ini", "cli", "session", "marker"),
    [
        (None, None, "5.0", "7.0"),  # defaults, marker
        ("2", None, "2.0", "7.0"),  # ini beats default
        ("2", "3 s", "3.0", "7.0"),  # command line beats ini; the marker beats both
    ],
)
def test_precedence_marker_cli_ini_default(
    pytester: pytest.Pytester, ini: str | None, cli: str | None, session: str, marker: str
) -> None:
    pytester.makepyfile(test_p=PRECEDENCE_TEST)
    if ini:
        pytester.makeini(f"[pytest]\ngpuperf_max_time = {ini}\n")
    args = ["-s", "--gpuperf-device=cpu", *FAST[:1], "--gpuperf-memory=off"]
    if cli:
        args.append(f"--gpuperf-max-time={cli}")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"*SESSION {session}*", f"*MARKER {marker}*"])


# ---------------------------------------------------------------- measuring and asserting


def test_passing_throughput_assertion_and_table(matmul: pytest.Pytester) -> None:
    result = matmul.runpytest("--gpuperf-device=cpu", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*= gpuperf results =*",
            "test*device*median*95% CI*throughput*peak mem*samples*flags",
            "test_mm*cpu*s*+-*FLOP/s*-*x*",
        ]
    )


def test_failing_throughput_assertion_shows_the_evidence(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mm=MATMUL_TEST.format(bound="1 PFLOP/s"))
    result = pytester.runpytest("--gpuperf-device=cpu", *FAST)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "E   *GpuperfAssertionError: test_mm.py::test_mm[[]cpu[]]: throughput at least 1 PFLOP/s expected, "
            "but median *FLOP/s, 95% CI [[]*FLOP/s, *FLOP/s[]] from * samples x * calls on cpu (*); "
            "the whole interval is on the wrong side",
        ]
    )
    result.stdout.fnmatch_lines(["*test_mm*cpu*throughput fail*"])


LATENCY_AT_MEDIAN = """
def test_lat(gpuperf):
    total = 0
    def step():
        nonlocal total
        for i in range(2000):
            total += i
    m = gpuperf.measure(step)
    # A bound at the median: the interval straddles it, so no verdict can honestly be given.
    m.assert_latency(at_most=m.median)
"""


def test_straddling_interval_warns_inconclusive_by_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_lat=LATENCY_AT_MEDIAN)
    result = pytester.runpytest("--gpuperf-device=cpu", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*InconclusiveWarning: test_lat.py::test_lat[[]cpu[]]: latency at most * is inconclusive: "
            "the interval straddles the bound; median *",
            "*test_lat*cpu*latency inconclusive*",
        ]
    )


def test_straddling_interval_fails_when_configured(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_lat=LATENCY_AT_MEDIAN)
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-inconclusive=fail", *FAST)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["E   *GpuperfAssertionError: *latency at most * is inconclusive*"])


ONE_SLOW_SAMPLE = """
import time

def test_slow(gpuperf):
    m = gpuperf.measure(lambda: time.sleep(0.06))
    assert len(m.samples) == 1
    m.assert_latency(at_most="10 s")
"""
# One call outlasts the time cap: sampling stops after the first sample.
ONE_SAMPLE = (
    "--gpuperf-min-samples=1",
    "--gpuperf-min-time=0.01",
    "--gpuperf-max-time=0.05",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-memory=off",
)


def test_a_single_sample_is_inconclusive_and_claims_no_interval(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow=ONE_SLOW_SAMPLE)
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-json=run.json", *ONE_SAMPLE)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*InconclusiveWarning: test_slow.py::test_slow[[]cpu[]]: latency at most 10 s is inconclusive: "
            "only 1 sample, and a distribution-free 95% interval of the median needs at least 6; "
            "one sample is a point, not an interval: * from 1 sample x 1 calls on cpu (*), "
            "on the right side of the bound;*",
            "*test_slow*cpu*- (1 sample)*latency inconclusive*",
        ]
    )
    assert "95% CI [" not in result.stdout.str() and "+-0.0%" not in result.stdout.str()
    (record,) = json.loads((pytester.path / "run.json").read_text())["records"]
    stats = record["measurement"]["stats"]
    assert stats["ci_confidence"] == 0.0 and stats["ci_low"] == stats["ci_high"] == stats["median"]
    assert [c["outcome"] for c in record["checks"]] == ["inconclusive"]


def test_a_single_sample_fails_when_inconclusive_checks_fail(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow=ONE_SLOW_SAMPLE)
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-inconclusive=fail", *ONE_SAMPLE)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E   *GpuperfAssertionError: *latency at most 10 s is inconclusive: only 1 sample*"])


def test_a_bound_that_is_not_positive_is_a_clear_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_bad(gpuperf):
            gpuperf.measure(lambda: None).assert_latency(at_most="-3 ms")
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu", *FAST)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "E *ValueError: assert_latency(at_most='-3 ms'): the bound must be a positive, finite time, "
            "such as at_most='3.2 ms'"
        ]
    )
    assert "_measurement.py" not in result.stdout.str()  # the plugin's frames are hidden


def test_measuring_twice_needs_names(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_twice(gpuperf):
            gpuperf.measure(lambda: None)
            gpuperf.measure(lambda: None)

        def test_named(gpuperf):
            gpuperf.measure(lambda: None, name="a")
            gpuperf.measure(lambda: None, name="b")
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu", *FAST)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["E *ValueError: *test_twice[[]cpu[]] measures more than once: give each*name=*"])


# ---------------------------------------------------------------- JSON and hooks


def test_json_has_raw_samples_fingerprint_and_threads(matmul: pytest.Pytester) -> None:
    result = matmul.runpytest("--gpuperf-device=cpu", "--gpuperf-json=out/run.json", "--gpuperf-threads=1", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["gpuperf: wrote 1 records to out/run.json"])
    data = json.loads((matmul.path / "out" / "run.json").read_text())
    assert data["schema"] == "pytest-gpuperf/results" and data["version"] == 2

    assert data["fingerprint"]["torch"] == torch.__version__
    (record,) = data["records"]
    assert record["test"] == "test_mm.py::test_mm[cpu]" and record["device"] == "cpu"
    m = record["measurement"]
    assert m["threads"] == 1
    assert m["device_name"]
    assert len(m["samples"]) >= 10 and all(s > 0 for s in m["samples"])
    assert m["stats"]["ci_low"] <= m["stats"]["median"] <= m["stats"]["ci_high"]
    assert m["work"] == {"FLOP": 2 * 64**3}
    assert record["checks"][0]["outcome"] == "pass"
    assert not list((matmul.path / "out").glob("*.tmp")), "no temporary file is left behind"


def test_json_path_that_cannot_be_written_is_refused_before_measuring(matmul: pytest.Pytester) -> None:
    (matmul.path / "afile").write_text("not a directory")
    result = matmul.runpytest("--gpuperf-device=cpu", "--gpuperf-json=afile/run.json", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --gpuperf-json=afile/run.json: */afile is a file, not a directory*"])
    assert (matmul.path / "afile").read_text() == "not a directory"


def test_json_never_overwrites_a_file_that_is_not_our_results(matmul: pytest.Pytester) -> None:
    ini = "[pytest]\naddopts = -q\n"
    (matmul.path / "pytest.ini").write_text(ini)
    result = matmul.runpytest("--gpuperf-device=cpu", "--gpuperf-json=pytest.ini", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --gpuperf-json=pytest.ini: that file exists and is not a results file written by pytest-gpuperf, so*"]
    )
    assert (matmul.path / "pytest.ini").read_text() == ini
    (matmul.path / "pytest.ini").unlink()
    saved = matmul.runpytest("--gpuperf-device=cpu", "--gpuperf-save=base", *FAST)
    assert saved.ret == pytest.ExitCode.OK
    baseline = matmul.path / ".gpuperf" / "baselines" / "base.json"
    before = baseline.read_bytes()
    onto = matmul.runpytest("--gpuperf-device=cpu", f"--gpuperf-json={baseline}", *FAST)
    assert onto.ret == pytest.ExitCode.USAGE_ERROR
    onto.stderr.fnmatch_lines(["*that file exists and is a pytest-gpuperf baseline, so writing*"])
    assert baseline.read_bytes() == before
    out = matmul.path / "out.json"
    assert matmul.runpytest("--gpuperf-device=cpu", f"--gpuperf-json={out}", *FAST).ret == pytest.ExitCode.OK
    assert matmul.runpytest("--gpuperf-device=cpu", f"--gpuperf-json={out}", *FAST).ret == pytest.ExitCode.OK


def test_a_read_only_baseline_is_refused_before_measuring(matmul: pytest.Pytester) -> None:
    assert matmul.runpytest("--gpuperf-device=cpu", "--gpuperf-save=base", *FAST).ret == pytest.ExitCode.OK
    baseline = matmul.path / ".gpuperf" / "baselines" / "base.json"
    before = baseline.read_bytes()
    baseline.chmod(0o444)
    result = matmul.runpytest("--gpuperf-device=cpu", "--gpuperf-save=base", *FAST)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --gpuperf-save=base: baseline */base.json is read-only, so *nothing was measured*"]
    )
    assert baseline.read_bytes() == before


def test_hooks_add_metadata_and_observe(matmul: pytest.Pytester) -> None:
    matmul.makeconftest(
        """
        def pytest_gpuperf_record_metadata(item, measurement):
            return {"batch": 7, "name": measurement.name}

        def pytest_gpuperf_measured(item, record):
            print("OBSERVED", record.key, record.metadata["batch"])

        def pytest_gpuperf_fingerprint(fingerprint):
            fingerprint["rack"] = "B7"
        """
    )
    result = matmul.runpytest("--gpuperf-device=cpu", "-s", "--gpuperf-json=run.json", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*OBSERVED test_mm.py::test_mm[[]cpu[]] 7*"])
    data = json.loads((matmul.path / "run.json").read_text())
    assert data["records"][0]["metadata"] == {"batch": 7, "name": "test_mm.py::test_mm[cpu]"}
    assert data["fingerprint"]["rack"] == "B7"


def test_measured_fires_once_per_record_kept_and_rounds_land_in_its_evidence(matmul: pytest.Pytester) -> None:
    matmul.makeconftest(
        """
        def pytest_gpuperf_measured(item, record):
            print("OBSERVED", record.key)
        """
    )
    result = matmul.runpytest("--gpuperf-device=cpu", "-s", "--gpuperf-json=run.json", "--gpuperf-rounds=3", *FAST)
    assert result.ret == pytest.ExitCode.OK
    assert result.stdout.str().count("OBSERVED test_mm.py::test_mm[cpu]") == 1
    (record,) = json.loads((matmul.path / "run.json").read_text())["records"]
    assert len(record["gate"]["rounds"]) == 2 and all(r["samples"] for r in record["gate"]["rounds"])


def test_a_test_that_fails_in_a_later_round_fails_the_session_and_keeps_nothing_of_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        calls = []

        def test_flaky(gpuperf):
            calls.append(1)
            gpuperf.measure(lambda: None)
            assert len(calls) == 1, "broken from the second round"
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-json=run.json", "--gpuperf-rounds=3", *FAST)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["FAILED *::test_flaky[[]cpu[]] [[]gpuperf round 2[]]*"])
    (record,) = json.loads((pytester.path / "run.json").read_text())["records"]
    assert not record["gate"].get("rounds"), "the failed rounds' samples are not kept"
    progress = next(line for line in result.stdout.lines if line.startswith("test_"))
    assert progress.split()[1] == ".", "a failed round puts no F of its own on the progress line"


@pytest.mark.parametrize(
    ("test", "registered"),
    [
        ("def test_plain():\n    pass\n", False),
        ("def test_measured(gpuperf):\n    gpuperf.measure(lambda: None)\n", True),
        ("import pytest\n\n@pytest.mark.gpuperf(target=0.5)\ndef test_marked():\n    pass\n", True),
        (
            "import pytest\n\npytestmark = pytest.mark.gpuperf_requires('cpu')\n\n"
            "def test_module_marked():\n    pass\n",
            True,
        ),
        (
            "import pytest\n\n@pytest.mark.gpuperf(target=0.5)\nclass TestMarked:\n"
            "    def test_in_class(self):\n        pass\n",
            True,
        ),
        ("def test_named_like_us():\n    pass\n\ndef gpuperf_helper():\n    pass\n", False),
    ],
)
def test_the_per_test_hooks_are_registered_only_where_a_test_measures_or_is_marked(
    pytester: pytest.Pytester, test: str, registered: bool
) -> None:
    """Issue 37: setup, call, report and teardown hooks cost every test of a session (500 plain tests: about 9M
    instructions each), so a session whose tests neither measure nor carry our markers has none of them."""
    pytester.makeconftest(
        """
        def pytest_runtest_call(item):
            print("per-test hooks:", item.config.pluginmanager.has_plugin("gpuperf-test-hooks"))
        """
    )
    pytester.makepyfile(test)
    result = pytester.runpytest("-s", "--gpuperf-device=cpu", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"*per-test hooks: {registered}"])


@pytest.mark.parametrize(("options", "registered"), [((), False), (("--gpuperf-rounds=2",), True)])
def test_the_status_of_special_reports_is_asked_only_where_a_session_can_make_them(
    pytester: pytest.Pytester, options: tuple[str, ...], registered: bool
) -> None:
    """Issue 37: the hook is asked three times a test, so a session that makes no gate report and no rounds has it
    not registered (``plugin/_gate.py`` ``ReportStatus``)."""
    pytester.makeconftest(
        """
        def pytest_sessionstart(session):
            print("status plugin:", session.config.pluginmanager.has_plugin("gpuperf-report-status"))
        """
    )
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest("-s", *options)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"status plugin: {registered}"])


def test_a_tolerance_given_to_measure_travels_with_its_record(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_lenient(gpuperf):
            gpuperf.measure(lambda: None, tolerance="20%", noise_floor=0.03, name="own")
            gpuperf.measure(lambda: None, name="session")
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-json=run.json", *FAST)
    assert result.ret == pytest.ExitCode.OK
    own, session = json.loads((pytester.path / "run.json").read_text())["records"]
    assert own["gate"]["tolerance"] == 0.2 and own["gate"]["noise_floor"] == 0.03
    assert "tolerance" not in session["gate"] and "noise_floor" not in session["gate"]


def test_runs_that_never_measure_never_import_torch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys

        def test_plain():
            assert "torch" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)


def test_workload_run_uses_the_size_preset(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from pytest_gpuperf.measuring import Step, Workload

        checked = []

        def build(device, size):
            n = {"small": 10, "medium": 20, "large": 30}[size]
            return Step(lambda: sum(range(n)), work={"items": n}, params={"n": n}, check=lambda: checked.append(n))

        def test_w(gpuperf):
            m = gpuperf.run(Workload("count", build))
            assert checked == [20]
            assert m.work == {"items": 20.0}
            assert gpuperf.records[0].params == {"size": "medium", "n": "20"}
        """
    )
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-size=medium", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)


# ---------------------------------------------------------------- timing modes


def test_cold_mode_is_recorded_and_shown(matmul: pytest.Pytester) -> None:
    out = matmul.path / "out.json"
    result = matmul.runpytest("--gpuperf-device=cpu", "--gpuperf-mode=cold", f"--gpuperf-json={out}", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*test_mm*cpu*cold*"])
    record = json.loads(out.read_text())["records"][0]
    assert record["measurement"]["mode"] == "cold"


def test_graph_mode_on_the_cpu_is_refused_with_the_reason(matmul: pytest.Pytester) -> None:
    result = matmul.runpytest("--gpuperf-device=cpu", "--gpuperf-mode=graph", "-rs", *FAST)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["SKIPPED*graph mode needs a CUDA device: CUDA graphs replay GPU work; use warm on cpu"]
    )


# ---------------------------------------------------------------- interrupted and failed writes

INTERRUPTED = """
import shutil
from pathlib import Path


def test_a(gpuperf):
    gpuperf.measure(lambda: sum(range(100)))


def test_b(gpuperf):
    gpuperf.measure(lambda: sum(range(100)))
    if Path("break-the-json-dir").exists():
        shutil.rmtree("out")
        Path("out").write_text("now a file")
    else:
        raise KeyboardInterrupt
"""


def test_an_interrupted_session_says_so_in_its_json(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_i=INTERRUPTED)
    (pytester.path / "out").mkdir()
    # In a subprocess: an inner KeyboardInterrupt would stop this session too.
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--gpuperf-device=cpu", "--gpuperf-json=out/run.json", *FAST
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    data = json.loads((pytester.path / "out" / "run.json").read_text())
    assert data["interrupted"] is True and len(data["records"]) == 2


def test_a_json_that_could_not_be_written_is_not_reported_as_written(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_i=INTERRUPTED)
    (pytester.path / "out").mkdir()
    (pytester.path / "break-the-json-dir").write_text("")
    result = pytester.runpytest("-p", "no:randomly", "--gpuperf-device=cpu", "--gpuperf-json=out/run.json", *FAST)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    result.stdout.fnmatch_lines(["gpuperf: ERROR: cannot write out/run.json*"])
    result.stdout.no_fnmatch_line("*wrote * records to*")


SIGTERMED = """
import time
from pathlib import Path


def test_a(gpuperf):
    gpuperf.measure(lambda: sum(range(100)))


def test_b(gpuperf):
    Path("started-b").write_text("")
    time.sleep(60)
"""


def test_sigterm_is_handled_like_ctrl_c_and_the_run_is_saved(pytester: pytest.Pytester) -> None:
    """CI timeouts and cancels send SIGTERM: the records measured so far are saved, marked interrupted."""
    import signal
    import subprocess
    import sys
    import time

    pytester.makepyfile(test_t=SIGTERMED)
    command = [sys.executable, "-m", "pytest", "-p", "no:randomly", "--gpuperf-device=cpu", *FAST]
    session = subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Until test_b runs (a fresh pytest imports torch first, slowly on a busy machine); the deadline only stops a
    # hang, and a session that ended without reaching test_b fails the assertions below.
    deadline = time.monotonic() + 600
    while not (pytester.path / "started-b").exists() and session.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    session.send_signal(signal.SIGTERM)
    out, _ = session.communicate(timeout=60)
    assert session.returncode == pytest.ExitCode.INTERRUPTED, out
    runs = list((pytester.path / ".gpuperf" / "runs").glob("*.json"))
    assert len(runs) == 1, out
    data = json.loads(runs[0].read_text())
    assert data["interrupted"] is True and len(data["records"]) == 1
    assert "SIGTERM" in out
