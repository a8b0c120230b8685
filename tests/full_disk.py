"""A full disk for the tests of a write that finds no room: a 64 KiB tmpfs, mounted and filled (as root, where
``mount`` works; the test is skipped elsewhere), and unmounted at the end. Each such test has a stand-in beside it
that needs no mount (an ENOSPC raised, or an outside writer that writes a file cut short)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["full_tmpfs"]


@contextlib.contextmanager
def full_tmpfs(where: Path) -> Iterator[Path]:
    """``where``, a new folder, as a full file system: its files can be created, but not one byte written."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a full disk is a tmpfs mounted here, which needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        with contextlib.suppress(OSError), open(where / "filler", "wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 4096)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
