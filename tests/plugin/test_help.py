"""``pytest --help`` for the plugin's group is kept as a snapshot (docs/options.md: ``tests/test_docs.py``)."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import pytest

SNAPSHOT = Path(__file__).parent / "snapshots" / "help.txt"


def gpuperf_help(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    result = pytester.runpytest("--help")
    assert result.ret == pytest.ExitCode.OK
    lines = result.stdout.lines
    start = lines.index("pytest-gpuperf: deep-learning performance tests:")
    end = lines.index("", start)
    # An ini entry is its "  gpuperf_x (string):" line and the deeper-indented help lines under it.
    ini: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("  gpuperf_"):
            ini.append(line)
            ini.extend(itertools.takewhile(lambda more: more.startswith("    "), lines[i + 1 :]))
    return "\n".join([*lines[start:end], "", *ini]) + "\n"


def words(text: str) -> str:
    """The help's words, whatever the line wrapping (Python versions break lines, and hyphenated words, apart)."""
    return re.sub(r"-\s+", "-", " ".join(text.split()))


def test_help_matches_snapshot(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    text = gpuperf_help(pytester, monkeypatch)
    if os.environ.get("GPUPERF_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text(text)
    assert words(text) == words(SNAPSHOT.read_text()), (
        "pytest --help changed; review it and rerun with GPUPERF_UPDATE_SNAPSHOT=1 to accept:\n" + text
    )
