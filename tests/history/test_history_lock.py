"""Two history commands on one output folder: the second is refused at once, naming the first; never both at once.

The first holder is a real second process (flock locks belong to it); the refused command is
the CLI in this process. Nothing is measured: the refusal comes before any commit is touched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from tests.full_disk import full_tmpfs

_HOLD = """
import sys, time
from pathlib import Path
from pytest_gpuperf.history._record import Layout, exclusive
with exclusive(Layout(Path(sys.argv[1]), Path(sys.argv[2]), "box"), "record"):
    Path(sys.argv[3]).write_text("held")
    time.sleep(120)
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return path


@pytest.fixture
def holder(repo: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process that holds ``tmp_path/out`` as a running ``history record`` would."""
    ready = tmp_path / "ready"
    child = subprocess.Popen([sys.executable, "-c", _HOLD, str(repo), str(tmp_path / "out"), str(ready)])
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert child.poll() is None and time.monotonic() < deadline, "the holder did not start"
        time.sleep(0.05)
    yield child
    child.kill()
    child.wait()


def _history(*args: str) -> int:
    return main(["history", *args, "--machine", "box"])


@pytest.mark.parametrize("command", [["record", "--last", "1"], ["publish"]])
def test_a_second_history_command_on_one_folder_is_refused_naming_the_first(
    holder: subprocess.Popen[bytes],
    repo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
) -> None:
    out = tmp_path / "out"
    assert _history(*command, "--repo", str(repo), "--out", str(out)) == 2
    captured = capsys.readouterr()
    assert f"{out} is in use by another history command (pid {holder.pid} on " in captured.err
    assert "pytest-gpuperf history record, since " in captured.err and "give this one another --out" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (out / "logs").exists() and not (out / "results").exists()  # nothing measured, nothing published


def test_the_lock_goes_with_its_holder(holder: subprocess.Popen[bytes], repo: Path, tmp_path: Path) -> None:
    from pytest_gpuperf.history._record import Layout, exclusive

    holder.kill()
    holder.wait()
    with exclusive(Layout(repo, tmp_path / "out", "box"), "record"):
        assert "history record" in (tmp_path / "out" / "history.lock").read_text()
    assert not (tmp_path / "out" / "history.lock").exists()


def test_a_link_planted_as_the_lock_is_refused_not_followed(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, target = tmp_path / "out", tmp_path / "elsewhere.txt"
    out.mkdir()
    (out / "history.lock").symlink_to(target)
    assert _history("publish", "--repo", str(repo), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "history.lock is a symbolic link, and a lock file of ours never is, so it was not followed" in err
    assert not target.exists()


def _no_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in for a full disk: writing the lock's holder line raises ENOSPC, as on a full tmpfs."""
    write = os.write

    def full(fd: int, data: bytes) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("history.lock"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write(fd, data)

    monkeypatch.setattr(os, "write", full)


@pytest.mark.parametrize("disk", ["tmpfs", "stand-in"])
def test_a_full_disk_while_taking_the_lock_is_one_line_and_leaves_no_lock(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, disk: str
) -> None:
    """Issue 36: ``history record`` on a full disk gave a raw traceback (ENOSPC writing ``history.lock``) and left
    an empty lock behind."""
    with contextlib.ExitStack() as stack:
        if disk == "tmpfs":
            out = stack.enter_context(full_tmpfs(tmp_path / "disk")) / "out"
        else:
            out = tmp_path / "out"
            _no_room(monkeypatch)
        assert _history("record", "--last", "1", "--repo", str(repo), "--out", str(out)) == 2
        captured = capsys.readouterr()
        assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
        assert f"cannot write {out / 'history.lock'}: No space left on device; free some space" in captured.err
        assert not (out / "history.lock").exists()
