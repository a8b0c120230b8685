"""Git: the one runner of git commands, and what the fingerprint, ``ab``, asv and the history need of it.

A commit is measured from a detached ``git worktree`` in a temporary directory, so the
user's checkout (its branch, index and uncommitted changes) is never touched; the
worktree is removed when the block ends, also on an error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from ._process import alive

__all__ = [
    "OWNER_FILE",
    "GitError",
    "NotARepository",
    "commit_time",
    "git",
    "git_state",
    "repo_root",
    "resolve",
    "toplevel",
    "worktree",
]

#: Seconds any git command may take; a worktree of a large repository takes the longest.
TIMEOUT: Final = 120.0


class GitError(Exception):
    """A git command that failed; the message names the command, the repository and git's own words."""


class NotARepository(GitError):
    """A path in no git repository: no ``.git`` in it or in a folder above it (git's own words are not shown)."""


def git(repo: Path, *args: str) -> str:
    """``git args`` run in ``repo``; its stdout without the trailing newline. GitError when it fails."""
    try:
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}; install git") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} in {repo} did not finish in {TIMEOUT:g} s") from None
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)} in {repo} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def toplevel(path: Path) -> Path:
    """The work tree that contains ``path`` (a linked worktree is its own)."""
    return Path(git(path, "rev-parse", "--show-toplevel"))


def repo_root(path: Path) -> Path:
    """The main work tree of the repository at ``path`` (not a linked worktree of it); NotARepository when
    ``path`` is in none."""
    try:
        common = Path(git(path, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    except GitError:
        # A .git above that git still refuses (a ceiling, an owner it does not trust): git's words say why.
        if path.is_dir() and not any((folder / ".git").exists() for folder in (path, *path.parents)):
            raise NotARepository(f"{path} is not in a git repository (no .git in it or above it)") from None
        raise
    return common.parent if common.name == ".git" else toplevel(path)


def resolve(repo: Path, name: str) -> str:
    """The full hash of the commit ``name`` (a branch, tag, hash, ``HEAD~2`` ...)."""
    return git(repo, "rev-parse", "--verify", f"{name}^{{commit}}")


def commit_time(repo: Path, commit: str) -> int:
    """The committer time of ``commit``, in seconds since the epoch."""
    return int(git(repo, "show", "-s", "--format=%ct", commit))


def git_state(root: Path) -> dict[str, Any]:
    """Commit, branch, whether the tree was dirty and a hash of the uncommitted diff; empty outside git."""
    try:
        commit = git(root, "rev-parse", "HEAD")
        status = git(root, "status", "--porcelain", "--untracked-files=no")
        state: dict[str, Any] = {
            "commit": commit,
            "branch": git(root, "rev-parse", "--abbrev-ref", "HEAD"),
            "dirty": bool(status),
        }
        if state["dirty"]:
            # Two dirty runs are the same code only if their diffs are: baselines use this to group rounds.
            diff = git(root, "diff", "HEAD")
            state["diff_sha"] = hashlib.sha1(diff.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    except GitError:
        return {}
    return state


#: In each scratch directory of ``worktree``: the pid of the process that made it.
OWNER_FILE = "owner.pid"


def prune_stale_worktrees(repo: Path, prefix: str) -> list[Path]:
    """Remove the scratch directories of ``worktree`` (``prefix``) whose owner process is gone, and git's records
    of worktrees whose directory is missing; returns the directories removed."""
    removed = []
    for scratch in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        owner = scratch / OWNER_FILE
        try:
            pid = int(owner.read_text().strip())
        except (OSError, ValueError):
            continue  # not ours, or being made right now
        if pid != os.getpid() and not alive(pid):
            shutil.rmtree(scratch, ignore_errors=True)
            removed.append(scratch)
    if removed:
        with contextlib.suppress(GitError):
            git(repo, "worktree", "prune")
    return removed


@contextmanager
def worktree(repo: Path, commit: str, *, prefix: str = "gpuperf-") -> Iterator[Path]:
    """A detached worktree of ``commit`` in a new temporary directory, removed (with the directory) at the end.

    A process killed outright (SIGKILL) cannot remove its worktree: each scratch directory
    records its owner's pid, and the next call removes those whose owner is gone.
    """
    prune_stale_worktrees(repo, prefix)
    scratch = Path(tempfile.mkdtemp(prefix=f"{prefix}{commit[:8]}-"))
    (scratch / OWNER_FILE).write_text(str(os.getpid()))
    tree = scratch / "tree"
    try:
        git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        yield tree
    finally:
        try:
            git(repo, "worktree", "remove", "--force", str(tree))
        except GitError:
            shutil.rmtree(scratch, ignore_errors=True)
            # The directory is gone now; drop git's record of it (only worktrees whose directory is missing).
            with contextlib.suppress(GitError):
                git(repo, "worktree", "prune")
        shutil.rmtree(scratch, ignore_errors=True)
