"""A real browser for the tests that open a page: Debian's headless Chromium, and a tiny PNG reader for its screenshots.

CI (``.ci/run``) installs chromium and sets ``GPUPERF_REQUIRE_BROWSER=1``: there a missing browser
fails the run instead of skipping the test quietly (``skip_unless``). ``GPUPERF_SCREENSHOT`` keeps each
browser test's screenshot for people to look at (``keep_screenshot``): in that directory under the test's
name (``history.png``, ``report.png``), or, given a file path ``shot.png``, as ``shot-history.png`` beside it.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

CHROMIUM: Final = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
NO_CHROMIUM: Final = "needs Debian's chromium for a real browser: apt-get install chromium (.ci/run does)"


def skip_unless(missing: list[str], what: str) -> pytest.MarkDecorator:
    """Skip with the reasons in ``missing``; under ``GPUPERF_REQUIRE_BROWSER=1`` (CI) refuse to run instead."""
    if missing and os.environ.get("GPUPERF_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"GPUPERF_REQUIRE_BROWSER=1, but {what} " + "; ".join(missing))
    return pytest.mark.skipif(bool(missing), reason="; ".join(missing))


def chromium(tmp_path: Path, *args: str, window: str = "1280,900") -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a fresh profile (no cached pages) and nothing of its own on the network."""
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=30000",
            f"--window-size={window}",
            "--hide-scrollbars",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def keep_screenshot(path: Path, name: str) -> Path | None:
    """Copy the screenshot ``path`` where ``GPUPERF_SCREENSHOT`` says, as ``name``; where it went, or None."""
    keep = os.environ.get("GPUPERF_SCREENSHOT")
    if not keep:
        return None
    target = Path(keep)
    target = target / name if target.is_dir() else target.with_name(f"{target.stem}-{name}")
    shutil.copyfile(path, target)
    return target


@dataclass(frozen=True)
class Image:
    """A decoded 8-bit RGB(A) PNG: its size and its pixels as (r, g, b) rows."""

    width: int
    height: int
    rows: list[list[tuple[int, int, int]]]

    def count(self, keep: Callable[[tuple[int, int, int]], bool]) -> int:
        """How many pixels ``keep`` keeps."""
        return sum(1 for row in self.rows for pixel in row if keep(pixel))


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def read_png(path: Path) -> Image:
    """The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), decoded with zlib alone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unsupported PNG: depth {depth}, colour {colour}"
    bpp = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    previous, rows = bytearray(stride), []
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = previous[i], previous[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + (0, a, b, (a + b) // 2, _paeth(a, b, c))[kind]) & 0xFF
        rows.append([(line[i], line[i + 1], line[i + 2]) for i in range(0, stride, bpp)])
        previous = line
    return Image(width, height, rows)
