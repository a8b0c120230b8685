"""How the step's calls run, in the samples and outside them: torch's threads set, Python's collector paused."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["YOUNG", "gc_paused", "torch_threads"]


@contextmanager
def torch_threads(count: int | None) -> Iterator[int]:
    """torch's intra-op threads set to ``count`` (None: leave them) inside the block; yields the count in effect."""
    import torch

    before = torch.get_num_threads()
    if count is not None and count != before:
        torch.set_num_threads(count)
    try:
        yield torch.get_num_threads()
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


#: The generations a pause collects by default: the young ones, where the garbage of the test's setup and of the
#: step's calls lies. A full collection walks every object the process holds (with torch and a suite loaded,
#: 172,796 objects: 0.05 to 0.13 s on the development machine, more than a fast step's whole sampling).
YOUNG: Final = 1


@contextmanager
def gc_paused(*, full: bool = False) -> Iterator[None]:
    """Collect the young generations (every one with ``full``), then keep Python's garbage collector off inside the
    block (and restore it)."""
    # A collection in the middle of a sample is noise that belongs to no iteration.
    was_enabled = gc.isenabled()
    gc.collect(2 if full else YOUNG)
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
