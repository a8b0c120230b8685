"""Is a process still there? Used to clean what a killed process left (worktrees, temporary files)."""

from __future__ import annotations

import os

__all__ = ["alive"]


def alive(pid: int) -> bool:
    """True while a process ``pid`` exists (also another user's); False once it is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
