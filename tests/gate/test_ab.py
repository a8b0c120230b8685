"""``python -m pytest_gpuperf ab``: base and head of tiny git repositories measured side by side.

The timing is exact, whatever the machine is doing (``tests/exact_timing.py``): each step
returns its nominal duration, so a planted 3x slowdown is exactly 3x; real 2 ms sleeps left
it inconclusive on a busy machine. Everything else (worktrees, imports per side, paired
rounds, the table, exit statuses) is real. The documented workloads run real matmuls: that
test asserts no verdict that noise could change.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gpuperf import _suites
from pytest_gpuperf.cli import main
from pytest_gpuperf.results import save_run
from tests.exact_timing import INSTALL, install
from tests.history.repo import commit, git
from tests.synthetic import make_record, make_run

# Exact times converge after the first ten rounds: the cap only stops a hang, never a run.
FAST = ("--max-time", "30", "--device", "cpu", "--workloads", "perf/workloads.py")
WORKLOADS = """\
from pytest_gpuperf.measuring import Step, Workload

from .delays import DELAY, OTHER  # relative: each side must get its own delays


def sleeper(seconds, items=1.0):
    def build(device, size):
        return Step(lambda: seconds, work={"items": items})  # its duration, for the exact timer

    return build


WORKLOADS = {
    "sleepy": Workload("sleepy", sleeper(DELAY)),
    "steady": Workload("steady", sleeper(OTHER)),
}
"""


def delays(delay: float, other: float = 0.002, comment: str = "") -> str:
    return f"{comment}DELAY = {delay}\nOTHER = {other}\n"


@pytest.fixture
def real_timing_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A repository whose first commit (tag ``base``) has two 2 ms workloads; cwd is the repository."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    files = {"perf/__init__.py": "", "perf/workloads.py": WORKLOADS, "perf/delays.py": delays(0.002)}
    commit(root, files, "base")
    git(root, "tag", "base")
    monkeypatch.chdir(root)
    # Worktrees go to a directory of this test's own, so that the test can see them removed.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    yield root
    assert not list(scratch.iterdir()), "every temporary worktree was removed"
    assert len(git(root, "worktree", "list").splitlines()) == 1, "git forgot every temporary worktree"


@pytest.fixture
def repo(real_timing_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``real_timing_repo``, its steps timed exactly in this process (``exact_time_block``)."""
    install(monkeypatch)
    return real_timing_repo


def test_the_documented_workloads_module_runs_as_shown(
    real_timing_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/examples/workloads.py, copied into a repository as a pip user would: A/A is unchanged, fp16 skipped."""
    example = (Path(__file__).parents[2] / "docs" / "examples" / "workloads.py").read_text()
    commit(real_timing_repo, {"perf/workloads.py": example}, "the documented workloads")
    # Real matmuls, timed for real: a short cap, as they may run to it.
    assert main(["ab", "--base", "HEAD", *FAST, "--max-time", "0.3", "--tolerance", "50%"]) == 0
    out = capsys.readouterr().out
    # A real matmul on a shared machine: A/A is never slower, but under heavy load it may be inconclusive.
    row = rows(out)["linear_fp32"]
    assert (" unchanged " in row or " inconclusive " in row) and "SLOWER" not in row and " faster " not in row
    assert "skipped linear_fp16: head's build unsupported on cpu: fp16 matmul on a CPU" in out


def rows(out: str) -> dict[str, str]:
    """Table rows by workload name (the lines under the dashes)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("test "))
    table = []
    for line in lines[start + 2 :]:
        if not line or line.startswith(("gpuperf ab:", "skipped ", "trace of ")):
            break
        table.append(line)
    return {line.split()[0]: line for line in table}


# ---------------------------------------------------------------- verdicts and exit status


def test_a_planted_slowdown_fails_with_the_table(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit(repo, {"perf/delays.py": delays(0.006)}, "three times the sleep")
    assert main(["ab", "--base", "base", "--tolerance", "25%", *FAST]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == (
        "gpuperf ab: checking out base in a temporary git worktree, then importing perf/workloads.py from both sides"
    )
    assert lines[1].startswith("gpuperf ab: base base (") and "head the working tree (" in lines[1]
    assert re.fullmatch(r"  sleepy 1/2: [0-9.]+ \[[0-9.]+, [0-9.]+\], slower \([0-9]+ rounds, [0-9.]+ s\)", lines[3])
    assert lines[4].startswith("  steady 2/2: ")
    table = rows(out)
    assert "SLOWER" in table["sleepy"] and "significant and over the 25% tolerance" in table["sleepy"]
    assert "SLOWER" not in table["steady"]
    assert out.splitlines()[-1].startswith("gpuperf ab: FAILED: 1 slower; ") and out.rstrip().endswith(": sleepy [cpu]")


def test_an_auto_tolerance_judges_each_workload_at_what_its_rounds_can_see(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38 item 2: ``--tolerance auto:3%``: each row's tolerance is what its rounds can see, at least 3%,
    stated in its reason and its JSON row; a threefold sleep is still slower."""
    commit(repo, {"perf/delays.py": delays(0.006)}, "three times the sleep")
    out_json = tmp_path / "ab.json"
    assert main(["ab", "--base", "base", "--tolerance", "auto:3%", *FAST, "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    assert "tolerance auto:3%, up to" in out.splitlines()[2]
    assert re.search(r"significant and over the [0-9.]+% tolerance \(auto\)", rows(out)["sleepy"])
    data = json.loads(out_json.read_text())
    assert data["tolerance"] == "auto:3%"
    for row in data["results"]:
        seen = row["ratio"]["detectable"]
        assert row["tolerance"] == max(0.03, seen if seen is not None else 0.0)
    with pytest.raises(SystemExit) as info:
        main(["ab", "--base", "base", "--tolerance", "auto:fast"])
    assert info.value.code == 2 and "the floor after auto: is not a number" in capsys.readouterr().err


def test_quiet_prints_only_the_table_and_the_verdict(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ab", "--base", "HEAD", "--tolerance", "50%", "-q", *FAST, "-k", "steady"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("test ") and lines[1].startswith("-----") and lines[2].startswith("steady ")
    assert len(lines) == 5 and lines[3].startswith("gpuperf ab: false alarms: ")  # how they are bounded
    assert lines[4].startswith("gpuperf ab: passed (1 ")  # unchanged, or inconclusive under load


def test_a_comment_only_change_passes(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit(repo, {"perf/delays.py": delays(0.002, comment="# the same delays, documented\n")}, "comment")
    assert main(["ab", "--base", "HEAD~1", "--tolerance", "25%", *FAST]) == 0
    out = capsys.readouterr().out
    assert set(rows(out)) == {"sleepy", "steady"}
    assert "SLOWER" not in out and "gpuperf ab: passed (" in out.splitlines()[-1]


def test_python_dash_m_with_head_revision_and_json(repo: Path, tmp_path: Path) -> None:
    slow = commit(repo, {"perf/delays.py": delays(0.006)}, "three times the sleep")
    git(repo, "checkout", "-q", "base")  # the working tree is not what is measured with --head
    out = tmp_path / "ab.json"
    command = [sys.executable, "-m", "pytest_gpuperf", "ab", "--base", "base", "--head", slow, "--tolerance", "25%"]
    site = tmp_path / "site"  # Python imports a sitecustomize module on its path at startup: the exact timer
    site.mkdir()
    (site / "sitecustomize.py").write_text(INSTALL)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    # TMPDIR: the fixture's scratch directory
    env = {**os.environ, "TMPDIR": tempfile.gettempdir(), "PYTHONPATH": path}
    done = subprocess.run([*command, *FAST, "--json", str(out)], capture_output=True, text=True, env=env, check=False)
    assert "sitecustomize" not in done.stderr, done.stderr  # "Error in sitecustomize": the timing would be real
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"head {slow} ({slow[:8]})" in done.stdout
    data = json.loads(out.read_text())
    assert data["schema"] == "pytest-gpuperf/ab" and data["version"] == 1 and data["head"]["commit"] == slow
    sleepy = next(r for r in data["results"] if r["name"] == "sleepy")
    assert sleepy["verdict"] == "slower" and len(sleepy["base"]) == len(sleepy["head"]) == sleepy["rounds"] >= 6
    assert sleepy["ratio"]["low"] > 1.5 and sleepy["base_work"] == {"items": 1.0}
    # the smallest change its rounds could see (tests/gate/test_rule.py): any, as the fake clock's rounds agree
    assert sleepy["ratio"]["power"] == 0.8 and sleepy["ratio"]["low"] == sleepy["ratio"]["high"]
    assert sleepy["ratio"]["detectable"] == 0.0


def test_new_missing_and_incomparable_workloads(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changed = WORKLOADS.replace('"steady": Workload("steady", sleeper(OTHER)),', "").replace(
        "sleeper(DELAY)),\n", 'sleeper(DELAY, items=2.0)),\n    "fresh": Workload("fresh", sleeper(OTHER)),\n'
    )
    commit(repo, {"perf/workloads.py": changed}, "sleepy does twice the work, fresh replaces steady")
    assert main(["ab", "--base", "base", *FAST]) == 1  # nothing compared: no gate passes on that
    out = capsys.readouterr().out
    assert "gpuperf ab: FAILED: nothing compared (1 incomparable, 1 new, 1 missing): no row could be " in out
    table = rows(out)
    assert (
        "incomparable" in table["sleepy"]
        and "work per call differs (items 1 -> 2): another workload" in table["sleepy"]
    )
    assert "new" in table["fresh"] and "not in base" in table["fresh"]
    assert "missing" in table["steady"] and "not in head" in table["steady"]
    assert main(["ab", "--base", "base", "--fail-on", "missing,incomparable", *FAST]) == 1


def test_more_work_counted_for_the_same_items_is_compared(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same items with more FLOP counted (a step grown costlier) is judged, with the difference shown."""
    costlier = WORKLOADS.replace(
        'work={"items": items}', 'work={"items": items, "FLOP": 1e6 if seconds > 0.003 else 1e5}'
    )
    counted = WORKLOADS.replace('work={"items": items}', 'work={"items": items, "FLOP": 1e5}')
    commit(repo, {"perf/workloads.py": counted}, "count FLOP")
    git(repo, "tag", "counted")
    commit(repo, {"perf/workloads.py": costlier, "perf/delays.py": delays(0.006)}, "three times the sleep, more FLOP")
    assert main(["ab", "--base", "counted", "--tolerance", "25%", *FAST]) == 1
    table = rows(capsys.readouterr().out)
    assert (
        "SLOWER" in table["sleepy"]
        and "work per call differs (FLOP 1e+05 -> 1e+06); compared per items" in table["sleepy"]
    )
    assert "unchanged" in table["steady"] and "differs" not in table["steady"]


def test_a_build_that_fails_on_one_side_and_unsupported_workloads(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = WORKLOADS.replace(
        "        return Step(",
        "        if seconds > 0.003:\n            raise RuntimeError('broken')\n        return Step(",
    ).replace(
        '"steady": Workload("steady", sleeper(OTHER)),',
        '"steady": Workload("steady", sleeper(OTHER)),\n    "gpu_only": Workload("gpu_only", sleeper(OTHER), '
        'unsupported=lambda device: "needs a GPU"),',
    )
    commit(repo, {"perf/workloads.py": broken, "perf/delays.py": delays(0.006)}, "a build that raises")
    assert main(["ab", "--base", "base", "--tolerance", "25%", *FAST]) == 0
    out = capsys.readouterr().out
    assert "head's build failed: RuntimeError: broken" in rows(out)["sleepy"]
    assert "skipped gpu_only: head's build unsupported on cpu: needs a GPU" in out


def test_k_selects_workloads(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ab", "--base", "base", "-k", "stead", "--tolerance", "25%", *FAST]) == 0
    assert set(rows(capsys.readouterr().out)) == {"steady"}
    assert main(["ab", "--base", "base", "-k", "s*y", "-k", "nothing", "--tolerance", "25%", *FAST]) == 0
    assert set(rows(capsys.readouterr().out)) == {"sleepy", "steady"}


def test_nested_package_relative_imports_resolve_per_side(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nested = WORKLOADS.replace("from .delays import", "from ..delays import")
    commit(repo, {"perf/inner/__init__.py": "", "perf/inner/workloads.py": nested}, "nested")
    git(repo, "tag", "nested")
    commit(repo, {"perf/delays.py": delays(0.006)}, "three times the sleep")
    args = ["ab", "--base", "nested", "--tolerance", "25%", *FAST, "--workloads", "perf/inner/workloads.py"]
    assert main(args) == 1
    assert "SLOWER" in rows(capsys.readouterr().out)["sleepy"]


#: The workloads as a package: the registry in ``__init__.py``, a helper in a module beside it.
PACKAGE = """\
from pytest_gpuperf.measuring import Workload

from ..delays import DELAY, OTHER
from .sleeping import sleeper

WORKLOADS = {
    "sleepy": Workload("sleepy", sleeper(DELAY)),
    "steady": Workload("steady", sleeper(OTHER)),
}
"""
SLEEPING = """\
from pytest_gpuperf.measuring import Step


def sleeper(seconds, items=1.0):
    def build(device, size):
        return Step(lambda: seconds, work={"items": items})  # its duration, for the exact timer

    return build
"""


def test_a_module_that_became_a_package_is_compared_by_either_path(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Base has the module perf/workloads.py, head the package perf/workloads/: both paths name that one module."""
    (repo / "perf" / "workloads.py").unlink()
    files = {"perf/workloads/__init__.py": PACKAGE, "perf/workloads/sleeping.py": SLEEPING}
    commit(repo, {**files, "perf/delays.py": delays(0.006)}, "a package, and three times the sleep")
    for path in ("perf/workloads", "perf/workloads.py"):
        assert main(["ab", "--base", "base", "--tolerance", "25%", *FAST, "--workloads", path]) == 1
        out = capsys.readouterr().out
        assert f"then importing {path} from both sides" in out
        assert "SLOWER" in rows(out)["sleepy"] and "SLOWER" not in rows(out)["steady"]


def test_the_default_workloads_are_the_suites_package(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = {
        "suites/__init__.py": "",
        "suites/workloads/__init__.py": PACKAGE,
        "suites/workloads/sleeping.py": SLEEPING,
    }
    commit(repo, {**files, "suites/delays.py": delays(0.002)}, "the suites' workloads")
    assert main(["ab", "--base", "HEAD", "--tolerance", "50%", "--max-time", "0.3", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gpuperf ab: checking out HEAD in a temporary git worktree, then importing suites/workloads ")
    assert set(rows(out)) == {"sleepy", "steady"}


#: A stand-in for the suites installed with the package (``pytest_gpuperf.suites`` in a wheel): sleepers.
INSTALLED = {
    "installed_suites/__init__.py": "",
    "installed_suites/delays.py": delays(0.002),
    "installed_suites/workloads/__init__.py": PACKAGE,
    "installed_suites/workloads/sleeping.py": SLEEPING,
}


@pytest.fixture
def installed_suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``INSTALLED`` on sys.path, under the name that ``_suites`` looks for; its modules forgotten afterwards."""
    site = tmp_path / "site"
    for name, text in INSTALLED.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(_suites, "PACKAGE", "installed_suites")
    yield site / "installed_suites"
    for name in [n for n in sys.modules if n.split(".")[0] == "installed_suites"]:
        del sys.modules[name]


def test_a_repository_without_suites_workloads_runs_the_installed_ones_on_both_sides(
    repo: Path, installed_suites: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No clone of this project (no suites/workloads): the default is the suites' workloads installed with the
    package, one copy run by both sides. Head's three times slower sleep is in the repository, which that copy
    never reads: the run is an A/A run of the machine, and it says so."""
    commit(repo, {"perf/delays.py": delays(0.006)}, "three times the sleep, where the installed workloads do not look")
    assert main(["ab", "--base", "base", "--max-time", "30", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(
        f"gpuperf ab: checking out base in a temporary git worktree; {repo} has no suites/workloads, so both sides "
        f"run the suites' workloads installed with pytest-gpuperf ({installed_suites}/workloads), one copy: an A/A "
        "run\n"
    )
    assert set(rows(captured.out)) == {"sleepy", "steady"} and "SLOWER" not in captured.out
    assert captured.err.startswith(
        "warning: the repository has no suites/workloads, so both sides ran the installed suites' workloads "
        f"({installed_suites}/workloads), one copy: this was an A/A run of the machine, not a comparison of the "
        "revisions; pass --workloads with your repository's workloads module to gate it"
    )


# ---------------------------------------------------------------- bad input: exit 2, the input and the fix


def bad(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["ab", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and "gpuperf ab: passed" not in captured.out
    return captured.err


def test_not_a_git_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    err = bad(capsys, "--base", "main", *FAST)
    assert f"{tmp_path} is not inside a git repository; run the ab command in your project's checkout" in err


def test_no_suites_workloads_and_none_installed(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_suites, "PACKAGE", "no_such_suites")
    err = bad(capsys, "--base", "base", "--max-time", "30", "--device", "cpu")
    assert f"{repo} has no suites/workloads, and this pytest-gpuperf was installed without its suites; pass " in err


def test_unknown_revisions(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(capsys, "--base", "mian", *FAST)
    assert f"--base 'mian' is not a commit of {repo}; name a branch, tag or commit" in err
    assert "--head 'nope' is not a commit" in bad(capsys, "--base", "base", "--head", "nope", *FAST)


def test_missing_workloads_module(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(capsys, "--base", "base", *FAST, "--workloads", "suites/workloads.py")
    assert "suites/workloads.py does not exist in base base (" in err
    assert "pass --workloads with the path of the workloads module" in err
    commit(repo, {"bench/workloads.py": WORKLOADS}, "a second module, only in head")
    assert "bench/workloads.py does not exist in base base (" in bad(
        capsys, "--base", "base", *FAST, "--workloads", "bench/workloads.py"
    )
    err = bad(capsys, "--base", "base", *FAST, "--workloads", "../elsewhere/workloads.py")
    assert "--workloads ../elsewhere/workloads.py is outside the repository" in err


def test_no_workloads_dict(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit(repo, {"perf/workloads.py": "WORKLOADS = ['sleepy']\n"}, "not a dict")
    err = bad(capsys, "--base", "base", *FAST)
    assert "perf/workloads.py in head the working tree (" in err
    assert "has no WORKLOADS dict of name -> pytest_gpuperf.Workload; define one" in err


def test_a_module_that_does_not_import(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit(repo, {"perf/workloads.py": "from .nowhere import DELAY\n"}, "broken import")
    err = bad(capsys, "--base", "base", *FAST)
    assert "importing perf/workloads.py in head the working tree (" in err
    assert "failed: ModuleNotFoundError: No module named '_gpuperf_ab_head.nowhere'; fix the module" in err


def test_a_module_that_exits_at_import_is_bad_input_not_a_verdict(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit(repo, {"perf/workloads.py": "import sys\nsys.exit(1)\n"}, "exits at import")
    err = bad(capsys, "--base", "base", *FAST)
    assert "called sys.exit(1); a workloads module must not exit when imported" in err


def test_an_absolute_import_from_the_tree_is_refused(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(repo))
    commit(repo, {"perf/workloads.py": WORKLOADS.replace("from .delays import", "from perf.delays import")}, "abs")
    err = bad(capsys, "--base", "base", *FAST)
    assert "imported perf, perf.delays by their absolute names from" in err
    assert "so base and head would share one copy of them" in err
    for name in [n for n in sys.modules if n == "perf" or n.startswith("perf.")]:
        del sys.modules[name]


def test_bad_device_json_and_options(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # On a CUDA machine the second device reads cuda:0 (found on an H100).
    assert re.search(
        r"--device cpu,cuda: 'cpu,cuda' names 2 devices \(cpu, cuda(:0)?\); name one",
        bad(capsys, "--base", "base", *FAST, "--device", "cpu,cuda"),
    )
    (tmp_path / "afile").write_text("")
    err = bad(capsys, "--base", "base", *FAST, "--json", str(tmp_path / "afile" / "ab.json"))
    assert f"{tmp_path / 'afile'} is a file, not a directory; choose another location" in err
    err = bad(capsys, "--base", "base", *FAST, "--json", str(tmp_path))
    assert f"--json {tmp_path}: that is a directory; give a file path such as {tmp_path / 'ab.json'}" in err
    assert "matched none of the workloads (sleepy, steady)" in bad(capsys, "--base", "base", *FAST, "-k", "zzz")
    for args, message in (
        (["--max-time", "soon"], "write a time such as 0.5"),
        (["--threads", "0"], "must be at least 1, or auto"),
        (["--fail-on", "worse"], "'worse' is not a verdict"),
    ):
        with pytest.raises(SystemExit) as info:
            main(["ab", "--base", "base", *args])
        assert info.value.code == 2 and message in capsys.readouterr().err


def test_json_never_replaces_a_file_that_is_not_an_ab_result(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23, item 1: ``--json`` overwrote the workloads module, pytest.ini, a test file and a baseline, exit 0."""
    save_run(repo / "run.json", make_run(make_record(1e-3)))
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / "test_x.py").write_text("def test_x():\n    pass\n")
    for name in ("perf/workloads.py", "pytest.ini", "test_x.py", "run.json"):
        before = (repo / name).read_bytes()
        err = bad(capsys, "--base", "base", *FAST, "--json", name)
        assert err.startswith(f"error: --json {name}: that file exists and is ") and err.count("\n") == 1
        assert "so writing the ab result there would destroy it" in err
        assert (repo / name).read_bytes() == before


# ---------------------------------------------------------------- counts that noise cannot move (issue 22, item 2)

MATMULS = """\
import torch

from pytest_gpuperf.measuring import Step, Workload

from .extra import EXTRA  # relative: each side gets its own


def build(device, size):
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(32, 32, generator=generator).to(device)
    b = torch.randn(32, 32, generator=generator).to(device)

    def step():
        c = a @ b
        for _ in range(EXTRA):
            c = c @ b  # the planted extra matmul
        return c

    return Step(step, work={"items": 1.0})


WORKLOADS = {"mm": Workload("mm", build)}
"""


@pytest.fixture
def matmul_repo(real_timing_repo: Path, whole_profile: None) -> Path:
    """``real_timing_repo`` with a real matmul workload (tag ``matmul``), timed for real; its tests check what the
    profiles read, so a busy machine's slow reading must not reduce them (``whole_profile``)."""
    commit(real_timing_repo, {"perf/workloads.py": MATMULS, "perf/extra.py": "EXTRA = 0\n"}, "a matmul")
    git(real_timing_repo, "tag", "matmul")
    return real_timing_repo


def test_a_planted_extra_matmul_is_more_ops_and_flops_and_fails_where_they_are_named_whatever_the_clock_says(
    matmul_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On main this run's exit status was the clock's alone: 0 whenever the timing was unchanged or inconclusive.
    Real timing: named, the categories fail whatever it says (by default, where it does not clear them)."""
    commit(matmul_repo, {"perf/extra.py": "EXTRA = 1\n"}, "one more matmul")
    out_json = tmp_path / "ab.json"
    named = ("--fail-on", "ops,flops,allocated")
    assert main(["ab", "--base", "matmul", *FAST, "--max-time", "0.3", *named, "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "mm [cpu]: counts more (ops more, flops more, allocated more; failing on ops,flops,allocated)" in lines
    assert {"  aten::mm 1 -> 2/call (+1)", "  flops 6.55e+04 -> 1.31e+05/call (+100.0%)"} <= set(lines)
    assert "  allocated cpu: 4 KiB -> 8 KiB/call (+100.0%)" in lines  # the second product, 32 x 32 floats
    (row,) = json.loads(out_json.read_text())["results"]
    assert row["work"]["verdict"] == "more" and row["work"]["failing"] == ["ops", "flops", "allocated"]
    assert {"key": "op:aten::mm", "category": "ops", "base": 1.0, "head": 2.0} in row["work"]["changes"]
    assert row["work"]["varying"] == []
    # No work category among the verdicts that fail: the change is still printed, and the timing alone decides.
    assert main(["ab", "--base", "matmul", *FAST, "--max-time", "0.3", "--fail-on", "none"]) == 0
    assert "mm [cpu]: counts more (ops more, flops more, allocated more)" in capsys.readouterr().out.splitlines()


EXTRA_OPS = """\
import torch

from pytest_gpuperf.measuring import Step, Workload

from .delays import DELAY, OTHER  # relative: each side gets its own


def build(device, size):
    a = torch.ones(8, 8)

    def step():
        for _ in range(int(OTHER)):
            a.mul_(a)  # the change's extra op, in place: no memory
        return DELAY  # its duration, for the exact timer

    return Step(step, work={"items": 1.0})


WORKLOADS = {"emb": Workload("emb", build)}
"""


def test_more_ops_for_a_faster_step_pass_unless_ops_are_named(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 3 (sparse embedding gradients): one more op a call for a step 25% faster failed on "more ops"
    every time (``FAILED (1 faster; ...)``); the clock clears it by default, ``--fail-on ops`` fails it."""
    commit(repo, {"perf/workloads.py": EXTRA_OPS, "perf/delays.py": delays(0.002, 0)}, "one op")
    git(repo, "tag", "emb")
    commit(repo, {"perf/delays.py": delays(0.0015, 1)}, "one more op, faster")
    out_json = tmp_path / "ab.json"
    assert main(["ab", "--base", "emb", *FAST, "--json", str(out_json)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (table_row,) = [line for line in lines if line.split()[:2] == ["emb", "cpu"]]
    assert "emb [cpu]: counts more (ops more)" in lines and " faster " in table_row
    assert (
        "gpuperf ab: more work passed where the timing cleared it (measured unchanged or faster): emb [cpu] "
        "(faster, more ops); to fail on it, name ops in the fail-on list"
    ) in lines
    data = json.loads(out_json.read_text())
    assert data["fail_on"] == ["more-work", "slower", "unattributed"]
    (row,) = data["results"]
    assert row["verdict"] == "faster" and row["failing"] == [] and row["work"]["failing"] == []
    assert main(["ab", "--base", "emb", *FAST, "--fail-on", "slower,ops", "--json", str(out_json)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "MORE WORK (timing faster)" in rows("\n".join(lines))["emb"]  # the failing row's trace ends the table
    assert "emb [cpu]: counts more (ops more; failing on ops)" in lines
    assert lines[-2] == "gpuperf ab: FAILED: 1 more work (ops); failing on slower + more ops: emb [cpu]"
    (row,) = json.loads(out_json.read_text())["results"]
    assert row["verdict"] == "faster" and row["failing"] == ["ops"] and row["work"]["failing"] == ["ops"]


def test_an_a_a_ab_does_the_same_work(matmul_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "ab.json"
    counts = "ops,kernels,runtime,syncs,flops,allocated,copied,compiles,memory"
    assert main(["ab", "--base", "HEAD", *FAST, "--max-time", "0.3", "--fail-on", counts, "--json", str(out_json)]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("mm [cpu]:")]
    (row,) = json.loads(out_json.read_text())["results"]
    assert row["work"] == {"verdict": "same", "failing": [], "changes": [], "varying": []}
    assert row["memory"]["change"] == "same" and row["memory"]["kind"] == "cpu allocator peak above the call's start"


# ---------------------------------------------------------------- confirmation in fresh builds (issue 38, item 6)

BIASED = """\
import os
from pathlib import Path

from pytest_gpuperf.measuring import Step, Workload

# Each import of this side's module is one build of it: which one, counted in a file of the test's own.
_COUNTER = Path(os.environ["AB_BUILD_COUNTER"]) / __name__.split(".")[0]
BUILD = int(_COUNTER.read_text()) if _COUNTER.exists() else 0
_COUNTER.write_text(str(BUILD + 1))
BIAS = {bias}  # the factor each build's step lands at, the last for every build after


def build(device, size):
    seconds = {delay} * BIAS[min(BUILD, len(BIAS) - 1)]
    return Step(lambda: seconds, work={{"items": 1.0}})


def steady(device, size):
    return Step(lambda: 0.002, work={{"items": 1.0}})


WORKLOADS = {{"biased": Workload("biased", build), "other": Workload("other", steady)}}
"""


def biased(bias: list[float], delay: float = 0.002) -> dict[str, str]:
    return {"perf/workloads.py": BIASED.format(bias=bias, delay=delay)}


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "builds"
    folder.mkdir()
    monkeypatch.setenv("AB_BUILD_COUNTER", str(folder))
    return folder


def test_a_bias_of_the_first_build_alone_is_not_confirmed(
    repo: Path, counter: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Identical code whose first build of head lands 30% slow (planted): the first pass calls it slower; three
    fresh builds do not, and the run passes, saying how its false alarms are bounded. Without confirmation it
    fails."""
    commit(repo, biased([1.0]), "base: every build alike")
    git(repo, "tag", "-f", "base")
    commit(repo, biased([1.3, 1.0]), "head: identical step, its first build slow")
    out_json = tmp_path / "ab.json"
    assert main(["ab", "--base", "base", *FAST, "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  biased 1/2: 1\.300 \[1\.300, 1\.300\], slower ", out, re.M)
    assert "gpuperf ab: confirming 1 suspect in 3 fresh builds each, at 95.0% (the run's 5% shared" in out
    assert re.search(r"^  biased build 3/3: 1\.000 \[1\.000, 1\.000\] \([0-9]+ rounds, ", out, re.M)
    row = rows(out)["biased"]
    assert " unchanged " in row and "3 of 4/3 of 4" in row and "(first pass 1.300 [1.300, 1.300])" in row
    assert (
        "gpuperf ab: false alarms: 1 suspect of 2 rows confirmed in 3 fresh builds each at 95.0%, so at most 5% of "
        "runs of unchanged code raise one where builds are independent"
    ) in out
    data = json.loads(out_json.read_text())
    assert data["confirm"] == {"builds": 3, "suspects": 1, "confidence": 0.95, "run_false_alarms": 0.05}
    entry = next(r for r in data["results"] if r["name"] == "biased")
    assert entry["verdict"] == "unchanged" and entry["first_pass"]["ratio"] == pytest.approx(1.3)
    assert entry["ratio"]["ratio"] == pytest.approx(1.0) and entry["rounds"] >= 18
    assert next(r for r in data["results"] if r["name"] == "other")["first_pass"] is None

    for side in counter.iterdir():  # the next run's builds start again at the first
        side.unlink()
    assert main(["ab", "--base", "base", *FAST, "--confirm", "0"]) == 1
    out = capsys.readouterr().out
    assert "SLOWER" in rows(out)["biased"] and "confirming" not in out
    assert "gpuperf ab: false alarms: not confirmed (--confirm 0): each of 2 rows judged alone at 95%" in out


def test_builds_that_disagree_leave_a_row_inconclusive_by_their_spread(
    repo: Path, counter: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Builds of identical code at 1.3, 1.3, 1.0 and 0.77 (planted): the spread between the fresh ones is the
    row's noise (t with 2 degrees of freedom), not the rounds' exact agreement within each."""
    commit(repo, biased([1.0]), "base")
    git(repo, "tag", "-f", "base")
    commit(repo, biased([1.3, 1.3, 1.0, 1 / 1.3]), "head: builds in a slow or fast state")
    assert main(["ab", "--base", "base", *FAST]) == 0
    row = rows(capsys.readouterr().out)["biased"]
    assert " inconclusive " in row and "spread between builds 26.2%, 3 fresh builds" in row


def test_a_real_slowdown_is_confirmed_in_every_build(
    repo: Path, counter: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit(repo, biased([1.0]), "base")
    git(repo, "tag", "-f", "base")
    commit(repo, biased([1.0], delay=0.006), "head: three times the sleep")
    assert main(["ab", "--base", "base", *FAST, "--confirm", "2"]) == 1
    out = capsys.readouterr().out
    row = rows(out)["biased"]
    assert "SLOWER" in row and "judged at 95.0% on fresh builds (first pass 3.000 [3.000, 3.000])" in row
    assert "2 of 3/2 of 3" in row and out.splitlines()[-1].startswith("gpuperf ab: FAILED: 1 slower; ")


VARYING = """\
import os
from pathlib import Path

import torch

from pytest_gpuperf.measuring import Step, Workload

# Each import of this side's module is one build of it: which one, counted in a file of the test's own.
_COUNTER = Path(os.environ["AB_BUILD_COUNTER"]) / __name__.split(".")[0]
BUILD = int(_COUNTER.read_text()) if _COUNTER.exists() else 0
_COUNTER.write_text(str(BUILD + 1))
EXTRA = {extra}  # the in-place ops each build's step makes, the last for every build after


def build(device, size):
    a = torch.ones(8, 8)
    extra = EXTRA[min(BUILD, len(EXTRA) - 1)]

    def step():
        for _ in range(extra):
            a.mul_(a)  # in place: no memory
        return 0.002  # its duration, for the exact timer

    return Step(step, work={{"items": 1.0}})


WORKLOADS = {{"varying": Workload("varying", build)}}
"""


def test_a_count_that_differs_only_in_the_first_build_is_varying_not_more_work(
    repo: Path, counter: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: A/A runs of the suites failed by a count (a DataLoader's workers allocate a varying amount from
    process to process). Planted: head's first build makes one more op, its fresh builds none, one, none; the first
    pass fails it on ``ops``, and the counts of every build call the op varying, not a change. Without
    confirmation it fails; where every build makes the op, it fails confirmed."""
    commit(repo, {"perf/workloads.py": VARYING.format(extra=[0])}, "base: no extra op")
    git(repo, "tag", "-f", "base")
    commit(repo, {"perf/workloads.py": VARYING.format(extra=[1, 0, 1, 0])}, "head: an op in some builds")
    named = ("--fail-on", "slower,ops")
    out_json = tmp_path / "ab.json"
    assert main(["ab", "--base", "base", *FAST, *named, "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "gpuperf ab: confirming 1 suspect in 3 fresh builds each" in out
    assert " unchanged " in rows(out)["varying"] and "varying [cpu]: counts" not in out
    (row,) = json.loads(out_json.read_text())["results"]
    assert row["work"]["verdict"] == "same" and "op:aten::mul_" in row["work"]["varying"]

    for side in counter.iterdir():
        side.unlink()
    assert main(["ab", "--base", "base", *FAST, *named, "--confirm", "0"]) == 1
    assert "varying [cpu]: counts more (ops more; failing on ops)" in capsys.readouterr().out.splitlines()

    for side in counter.iterdir():
        side.unlink()
    commit(repo, {"perf/workloads.py": VARYING.format(extra=[1])}, "head: the op in every build")
    assert main(["ab", "--base", "base", *FAST, *named]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "varying [cpu]: counts more (ops more; failing on ops)" in lines and "  aten::mul_ 0 -> 1/call (+1)" in lines


@pytest.mark.parametrize(
    ("given", "message"),
    [("1", "gives no spread between builds to judge by; give 0 (no confirmation) or 2 or more"), ("-1", "0 or more")],
)
def test_a_confirmation_of_fewer_than_two_builds_is_a_usage_error(
    given: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["ab", "--base", "HEAD", "--confirm", given])
    assert info.value.code == 2 and message in capsys.readouterr().err


# ---------------------------------------------------------------- sampling to a detection goal (issue 38, item 3)

NOISY = """\
import random

from pytest_gpuperf.measuring import Step, Workload


def build(device, size):  # +-50% a call, exactly timed; one generator for both sides, so that they differ
    return Step(lambda: 0.002 * (0.5 + random.random()), work={"items": 1.0})


WORKLOADS = {"noisy": Workload("noisy", build)}
"""


def test_rounds_short_of_a_detection_goal_say_what_they_saw_and_the_time_it_would_need(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit(repo, {"perf/workloads.py": NOISY}, "base: a noisy step")
    git(repo, "tag", "-f", "base")
    out_json = tmp_path / "ab.json"
    args = ["ab", "--base", "base", *FAST, "--max-time", "0.3", "--detect", "0.1%", "--json", str(out_json)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "up to 0.3 s of rounds per workload, until each can see 0.1%" in out.splitlines()[2]
    assert re.search(r"can see >= [0-9.]+%, short of the 0\.1% goal: about [0-9.e+]+ s of rounds would reach it", out)
    assert json.loads(out_json.read_text())["detect"] == 0.001


def test_a_goal_the_rounds_reach_stops_them_early(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit(repo, {"perf/workloads.py": NOISY}, "base: a noisy step")
    git(repo, "tag", "-f", "base")
    assert main(["ab", "--base", "base", *FAST, "--detect", "20%", "--confirm", "0"]) == 0
    row = rows(capsys.readouterr().out)["noisy"]
    assert "short of the" not in row and re.search(r">= ([0-9.]+)%", row)
    seen = float(re.search(r">= ([0-9.]+)%", row).group(1))  # type: ignore[union-attr]
    assert seen <= 20.0


def test_a_detection_goal_must_be_a_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["ab", "--base", "HEAD", "--detect", "0"])
    assert info.value.code == 2 and "--detect" in capsys.readouterr().err
