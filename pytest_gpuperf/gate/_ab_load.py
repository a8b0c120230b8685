"""``ab``'s two trees: base (and head) checked out aside, and each side's workloads module imported on its own.

The base revision is checked out in a temporary ``git worktree`` (always removed); head
is the working tree, or ``--head REV`` in a second worktree. The workloads module (a
file such as ``perf/workloads.py``, or a package such as ``suites/workloads``) is
imported from each tree under a package name of its own (``_gpuperf_ab_base``,
``_gpuperf_ab_head``), so that its relative imports (``from .models import mlp``)
resolve within that copy; the installed pytest_gpuperf serves both. Code that a
workloads module reaches by an absolute import from either tree would be one copy
shared by both sides, blind to the change, so that is refused.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from .._git import GitError, git_state, resolve, toplevel, worktree
from ..results import GitState

__all__ = [
    "ALIASES",
    "AbError",
    "Tree",
    "forget",
    "load_installed",
    "load_workloads",
    "module_file",
    "repository",
    "resolve_commit",
    "trees",
]

#: The package names the two copies of the workloads module are imported under.
ALIASES: Final = {"base": "_gpuperf_ab_base", "head": "_gpuperf_ab_head"}


class AbError(Exception):
    """Bad input (not a repository, unknown revision, no workloads module ...); the message says the fix."""


@dataclass(frozen=True)
class Tree:
    """One side: what the user named, the commit, where its files are."""

    side: str  # "base" or "head"
    rev: str  # as given, or "the working tree"
    commit: str
    path: Path
    dirty: bool = False

    def describe(self) -> str:
        short = self.commit[:8] or "no commit"
        if self.rev == "the working tree":
            return f"the working tree ({short}{' + uncommitted changes' if self.dirty else ''})"
        return f"{self.rev} ({short})"


def repository(path: Path) -> Path:
    try:
        return toplevel(path.resolve())
    except GitError:
        raise AbError(
            f"{path.resolve()} is not inside a git repository; run the ab command in your project's checkout "
            "or pass --repo with its path"
        ) from None


def resolve_commit(repo: Path, rev: str, flag: str = "--base") -> str:
    try:
        return resolve(repo, rev)
    except GitError:
        raise AbError(
            f"{flag} {rev!r} is not a commit of {repo}; name a branch, tag or commit (git log --oneline lists them; "
            "in a shallow CI clone fetch it first, for example git fetch origin main)"
        ) from None


@contextmanager
def trees(repo: Path, base: str, head: str | None) -> Iterator[tuple[Tree, Tree]]:
    """Base (and head, when it is a revision) checked out in temporary worktrees, removed at the end."""
    base_commit = resolve_commit(repo, base, "--base")
    head_commit = resolve_commit(repo, head, "--head") if head is not None else None
    with ExitStack() as stack:
        base_tree = Tree("base", base, base_commit, stack.enter_context(worktree(repo, base_commit, prefix="ab-")))
        if head is not None and head_commit is not None:
            path = stack.enter_context(worktree(repo, head_commit, prefix="ab-"))
            yield base_tree, Tree("head", head, head_commit, path)
        else:
            state = GitState.from_dict(git_state(repo))
            yield base_tree, Tree("head", "the working tree", state.commit or "", repo, bool(state.dirty))


def forget(alias: str) -> None:
    for name in [n for n in sys.modules if n == alias or n.startswith(alias + ".")]:
        del sys.modules[name]


def _package_top(path: Path, root: Path) -> Path:
    """The outermost package directory above ``path`` inside ``root`` (its own directory if none)."""
    top = path.parent
    while top != root and (top / "__init__.py").is_file() and (top.parent / "__init__.py").is_file():
        top = top.parent
    return top


def module_file(root: Path, relative: Path) -> Path | None:
    """The file that imports the module ``relative`` names in ``root``, or None when there is none.

    ``perf/workloads``, ``perf/workloads.py`` and ``perf/workloads/__init__.py`` name one module, as
    they do to Python: the package ``perf/workloads/`` when it exists (Python's own choice when both
    do), else the file ``perf/workloads.py``. So a path written for either layout finds the other, and
    a revision from before a module became a package is still measured against one after.
    """
    if not relative.name:  # the repository root itself
        return None
    stem = relative.parent if relative.name == "__init__.py" else relative.with_suffix("")
    for candidate in (stem / "__init__.py", stem.with_name(stem.name + ".py")):
        if (root / candidate).is_file():
            return root / candidate
    return None


def _import_aliased(path: Path, root: Path, alias: str) -> ModuleType:
    """Import the module at ``path`` with its package renamed to ``alias`` (relative imports stay inside)."""
    top = _package_top(path, root)
    init = top / "__init__.py"
    spec = (
        importlib.util.spec_from_file_location(alias, init, submodule_search_locations=[str(top)])
        if init.is_file()
        else importlib.machinery.ModuleSpec(alias, None, is_package=True)
    )
    if spec is None:  # pragma: no cover - a .py file always has a spec
        raise ImportError(f"no import spec for {init}")
    spec.submodule_search_locations = [str(top)]
    package = importlib.util.module_from_spec(spec)
    sys.modules[alias] = package
    if spec.loader is not None:
        spec.loader.exec_module(package)
    parts = path.relative_to(top).with_suffix("").parts
    if parts[-1] == "__init__":  # a package: the module is the directory
        parts = parts[:-1]
    return importlib.import_module(".".join((alias, *parts))) if parts else package


def _outside_environment(path: Path) -> bool:
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return not any(path.is_relative_to(prefix) for prefix in prefixes)


def _shared(new: Iterable[str], roots: Sequence[Path]) -> list[tuple[str, Path]]:
    """Modules imported by absolute name from one of the trees (not the aliases, not pytest_gpuperf)."""
    out = []
    for name in sorted(new):
        if name.split(".")[0] in (*ALIASES.values(), "pytest_gpuperf"):
            continue
        file = getattr(sys.modules.get(name), "__file__", None)
        if not file:
            continue
        path = Path(file).resolve()
        if _outside_environment(path) and any(path.is_relative_to(root) for root in roots):
            out.append((name, path))
    return out


def load_workloads(tree: Tree, relative: Path, roots: Sequence[Path]) -> dict[str, Any]:
    """``WORKLOADS`` of the workloads module in ``tree``, imported under that side's own package name."""
    path = module_file(tree.path, relative)
    where = f"{relative} in {tree.side} {tree.describe()}"
    if path is None:
        raise AbError(
            f"{relative} does not exist in {tree.side} {tree.describe()}; pass --workloads with the path of the "
            "workloads module (relative to the repository root) that both revisions have"
        )
    alias = ALIASES[tree.side]
    forget(alias)
    before = set(sys.modules)
    try:
        module = _import_aliased(path, tree.path, alias)
    except SystemExit as exc:  # its own exit code would read as a verdict (1: slower)
        raise AbError(
            f"importing {where} called sys.exit({exc.code!r}); a workloads module must not exit when imported: "
            "move that code under if __name__ == '__main__':"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any error in the user's module is bad input, reported with its cause
        raise AbError(f"importing {where} failed: {type(exc).__name__}: {exc}; fix the module") from None
    shared = _shared(set(sys.modules) - before, roots)
    if shared:
        names = ", ".join(name for name, _ in shared[:4]) + (", ..." if len(shared) > 4 else "")
        raise AbError(
            f"{where} imported {names} by their absolute names from {shared[0][1].parent}, so base and head would "
            "share one copy of them and the comparison could not see a change there; import them relatively "
            "(from .models import ...) from inside the workloads package"
        )
    return _workloads_of(module, where)


def load_installed(name: str) -> dict[str, Any]:
    """``WORKLOADS`` of the installed module ``name`` (the suites' ``pytest_gpuperf.suites.workloads``), imported
    once under its own name: both sides run this one copy."""
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - a broken installation is bad input, reported with its cause
        raise AbError(f"importing the installed {name} failed: {type(exc).__name__}: {exc}; reinstall it") from None
    return _workloads_of(module, f"the installed {name}")


def _workloads_of(module: ModuleType, where: str) -> dict[str, Any]:
    workloads = getattr(module, "WORKLOADS", None)
    if not isinstance(workloads, Mapping) or not all(callable(getattr(w, "build", None)) for w in workloads.values()):
        raise AbError(
            f"{where} has no WORKLOADS dict of name -> pytest_gpuperf.Workload; define one "
            "(docs/writing-tests.md, section 'A workloads module for ab', has a complete one to copy)"
        )
    return {str(name): workload for name, workload in workloads.items()}
