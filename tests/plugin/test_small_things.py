"""Issue 24 item 6, the small things users hit in the plugin: an output file that a session which measured nothing
leaves as it was (``--co``, a ``-k`` selecting no measuring test), one record per test under pytest-rerunfailures,
and torch's own import warnings kept out of a ``-W error`` session's collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TEST = "def test_m(gpuperf):\n    gpuperf.measure(lambda: None)\n\n\ndef test_plain():\n    pass\n"
FAST = (
    "--gpuperf-device=cpu",
    "--gpuperf-min-time=0.005",
    "--gpuperf-max-time=0.05",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-quiet-wait=0",
    "-p",
    "no:randomly",
)


# ---------------------------------------------------------------- c: nothing measured, nothing replaced


@pytest.mark.parametrize("selection", [("--co",), ("-k", "test_plain")])
def test_a_session_that_measured_nothing_leaves_the_results_and_report_as_they_were(
    pytester: pytest.Pytester, selection: tuple[str, ...]
) -> None:
    """On main, ``--co`` replaced out.json with a results file of 0 records and the report with an empty one."""
    pytester.makepyfile(test_m=TEST)
    result = pytester.runpytest(*FAST, "--gpuperf-json=out.json", "--gpuperf-html=report.html")
    assert result.ret == pytest.ExitCode.OK
    before = {name: (pytester.path / name).read_bytes() for name in ("out.json", "report.html")}
    assert len(json.loads(before["out.json"])["records"]) == 1

    result = pytester.runpytest(*FAST, "--gpuperf-json=out.json", "--gpuperf-html=report.html", *selection)
    assert result.ret == pytest.ExitCode.OK
    assert {name: (pytester.path / name).read_bytes() for name in before} == before
    result.stdout.fnmatch_lines(
        [
            "gpuperf: nothing was measured, so out.json was left as it was",
            "gpuperf: nothing was measured, so the HTML report report.html was left as it was",
        ],
        consecutive=False,
    )


def test_a_session_that_measured_nothing_writes_no_new_results_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_m=TEST)
    result = pytester.runpytest(*FAST, "--gpuperf-json=out.json", "--gpuperf-html=report.html", "--co")
    assert result.ret == pytest.ExitCode.OK
    assert not (pytester.path / "out.json").exists() and not (pytester.path / "report.html").exists()
