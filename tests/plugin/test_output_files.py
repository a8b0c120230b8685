"""The session's outputs (issue 23, items 1 and 5): ``--gpuperf-html`` replaces only a report of ours, refused before
measuring; a SIGKILLed writer's temporary file is removed by the next session; a SIGTERM or Ctrl-C during the
end-of-session save exits 2 (interrupted) with one line, no traceback, and loses nothing: the first lets the save
complete, a second abandons it with every file left as it was.

The signal tests run real pytest processes and send real signals. The save is slowed where it cannot be missed:
the inner conftest makes each ``os.fsync`` (one per atomic write) touch a flag file and sleep (only in the writes of
the file a test names, where it names one), and the signal is sent once the flag is there, so it lands inside the
write on any machine, however loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TEST = "def test_m(gpuperf):\n    gpuperf.measure(lambda: None)\n"
FAST = (
    "--gpuperf-device=cpu",
    "--gpuperf-min-time=0.005",
    "--gpuperf-max-time=0.05",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-quiet-wait=0",
    "-p",
    "no:randomly",
)
SLOW_WRITES = """\
import os
import time
from pathlib import Path

FLAG = os.environ.get("GPUPERF_TEST_WRITING")
if FLAG:
    _fsync = os.fsync

    def slow_fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        with open(FLAG, "a") as flag:  # which file is being written
            flag.write(path + "\\n")
        if os.environ.get("GPUPERF_TEST_SLOW_FILE", "") in os.path.basename(path):
            time.sleep(float(os.environ["GPUPERF_TEST_WRITE_SECONDS"]))
        _fsync(fd)

    os.fsync = slow_fsync
"""


def test_html_never_replaces_a_file_that_is_not_our_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_m=TEST)
    ini = "[pytest]\naddopts = -q\n"
    (pytester.path / "pytest.ini").write_text(ini)
    result = pytester.runpytest(*FAST, "--gpuperf-html=pytest.ini")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --gpuperf-html=pytest.ini: that file exists and is not an HTML report written by pytest-gpuperf*"]
    )
    result.stdout.no_fnmatch_line("*passed*")  # refused before measuring
    assert (pytester.path / "pytest.ini").read_text() == ini
    before = (pytester.path / "test_m.py").read_bytes()
    assert pytester.runpytest(*FAST, "--gpuperf-html=test_m.py").ret == pytest.ExitCode.USAGE_ERROR
    assert (pytester.path / "test_m.py").read_bytes() == before
    assert pytester.runpytest(*FAST, "--gpuperf-html=page.html").ret == pytest.ExitCode.OK
    assert pytester.runpytest(*FAST, "--gpuperf-html=page.html").ret == pytest.ExitCode.OK  # ours: replaced


def session(project: Path, *args: str, slow: float | None = None, only: str = "") -> subprocess.Popen[str]:
    """A pytest session in ``project``; with ``slow``, each atomic write of a file whose name holds ``only`` (every
    file by default) is slowed by that many seconds."""
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    if slow is not None:
        env["GPUPERF_TEST_WRITING"] = str(project / "writing")
        env["GPUPERF_TEST_WRITE_SECONDS"] = str(slow)
        env["GPUPERF_TEST_SLOW_FILE"] = only
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *FAST, *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_interruptible,
    )


def _interruptible() -> None:
    """Ctrl-C as a terminal sends it: a process started in the background by a shell without job control (CI's
    ``cmd &``) inherits SIGINT ignored, and Python then installs no handler for it: the session ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def when_writing(project: Path, proc: subprocess.Popen[str], name: str = "") -> None:
    """Wait until the session is inside an atomic write at its end, of a file whose name holds ``name`` (the flag of
    SLOW_WRITES)."""
    deadline = time.monotonic() + 300
    flag = project / "writing"
    while not (flag.exists() and name in flag.read_text()):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "the session never started its save"
        time.sleep(0.02)


def litter(project: Path) -> list[str]:
    return sorted(p.name for p in project.rglob("*") if p.name.endswith((".tmp", ".lock")))


@pytest.fixture(scope="module")
def saved_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose baseline 'base' holds one run, with SLOW_WRITES in its conftest: saved once (a pytest process
    of its own), for every test here to copy."""
    path = tmp_path_factory.mktemp("project")
    (path / "test_m.py").write_text(TEST)
    (path / "conftest.py").write_text(SLOW_WRITES)
    first = session(path, "--gpuperf-save=base")
    out = first.communicate(timeout=300)[0]
    assert first.returncode == 0, out
    return path


@pytest.fixture
def project(pytester: pytest.Pytester, saved_once: Path) -> Path:
    """A copy of ``saved_once``'s project, the test's own."""
    shutil.copytree(saved_once, pytester.path, dirs_exist_ok=True)
    return pytester.path


def runs_in(project: Path) -> int:
    return len(json.loads((project / ".gpuperf" / "baselines" / "base.json").read_text())["runs"])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_save_lets_it_complete_then_exits_interrupted(project: Path, signum: int) -> None:
    proc = session(project, "--gpuperf-save=base", slow=1.0)
    when_writing(project, proc, "/runs/")  # the save's first file (a trace's copy is written as the test runs)
    proc.send_signal(signum)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out
    name = signal.Signals(signum).name
    assert f"gpuperf: {name} while saving the results; finishing it first (send it again to abandon it)" in out
    assert f"gpuperf: {name} received while saving: the save was completed first, then the session stopped" in out
    assert runs_in(project) == 2  # the update was kept
    assert litter(project) == []


def test_a_second_signal_abandons_the_save_leaving_every_file_as_it_was(project: Path) -> None:
    baseline = project / ".gpuperf" / "baselines" / "base.json"
    before = baseline.read_bytes()
    runs_before = sorted((project / ".gpuperf" / "runs").iterdir())
    proc = session(project, "--gpuperf-save=base", slow=3.0)
    when_writing(project, proc, "/runs/")
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "Traceback" not in out
    assert "gpuperf: interrupted twice while saving: the save was abandoned; each file being written was left" in out
    assert baseline.read_bytes() == before
    assert sorted((project / ".gpuperf" / "runs").iterdir()) == runs_before  # the run file was being written
    assert litter(project) == []


@pytest.mark.parametrize("then", ["session", "read"])
def test_a_killed_writers_temporary_file_is_removed_by_the_next_session_or_read(project: Path, then: str) -> None:
    """A SIGKILL inside the ``--gpuperf-json`` write leaves its temporary file; the next session removes it at its
    start, and so does the next read of that file (its writer is dead), never another program's."""
    foreign = project / ".x.12345.y.tmp"
    foreign.write_text("another program's")
    done = session(project, "--gpuperf-json=out.json")
    out = done.communicate(timeout=300)[0]
    assert done.returncode == 0, out
    # Only the JSON's write is slowed (the run file's, before it, is not): the process is killed inside it.
    proc = session(project, "--gpuperf-json=out.json", slow=30.0, only=".out.json.")
    when_writing(project, proc, ".out.json.")
    proc.kill()
    proc.communicate(timeout=60)
    left = [p for p in project.iterdir() if p.name.startswith(".out.json.")]
    assert len(left) == 1
    (project / "writing").unlink()
    if then == "session":
        proc = session(project, "--gpuperf-json=out.json", "--collect-only")
    else:
        command = [sys.executable, "-m", "pytest_gpuperf", "export", "out.json", "--format", "bencher"]
        proc = subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, out
    assert not left[0].exists() and foreign.exists()
