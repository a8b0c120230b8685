"""Git, as the history and A/B commands need it: run a command, find the repository, check a commit out aside.

A commit is measured from a detached ``git worktree`` in a temporary directory, so the
user's checkout (its branch, index and uncommitted changes) is never touched; the
worktree is removed when the block ends, also on an error or Ctrl-C.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["GitError", "git", "repo_root", "resolve", "toplevel", "worktree"]


class GitError(Exception):
    """A git command that failed; the message names the command, the repository and git's own words."""


def git(repo: Path, *args: str, timeout: float = 120.0) -> str:
    """``git args`` run in ``repo``; its stdout without the trailing newline."""
    try:
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=timeout, check=False)
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}; install git") from None
    if done.returncode != 0:
        raise GitError(f"git {' '.join(args)} in {repo} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def toplevel(path: Path) -> Path:
    """The work tree that contains ``path`` (a linked worktree is its own)."""
    return Path(git(path, "rev-parse", "--show-toplevel"))


def repo_root(path: Path) -> Path:
    """The main work tree of the repository at ``path`` (not a linked worktree of it)."""
    common = Path(git(path, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    return common.parent if common.name == ".git" else toplevel(path)


def resolve(repo: Path, name: str) -> str:
    """The full hash of the commit ``name`` (a branch, tag, hash, ``HEAD~2`` ...)."""
    return git(repo, "rev-parse", "--verify", f"{name}^{{commit}}")


@contextmanager
def worktree(repo: Path, commit: str, *, prefix: str = "gpuperf-") -> Iterator[Path]:
    """A detached worktree of ``commit`` in a new temporary directory, removed (with the directory) at the end."""
    scratch = Path(tempfile.mkdtemp(prefix=f"{prefix}{commit[:8]}-"))
    tree = scratch / "tree"
    try:
        git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        yield tree
    finally:
        removed = subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
        if removed.returncode != 0:
            # The directory is gone now; drop git's record of it (only worktrees whose directory is missing).
            subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True)
