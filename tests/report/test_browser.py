"""A real browser opens the HTML report from disk and draws its plots.

Headless Chromium loads the file (``file://``: the page needs nothing else) twice: ``--dump-dom``
shows the DOM it built, where every sample is one ``<circle>``; a screenshot shows that they
were painted: the page has many more coloured pixels than the same page with its plots taken
out. ``GPUPERF_SCREENSHOT`` keeps the screenshot as ``report.png`` (``tests/browser.py``).
"""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path

import pytest

from pytest_gpuperf.report import compare, render, write
from pytest_gpuperf.results import Baseline, Record
from tests.browser import CHROMIUM, NO_CHROMIUM, Image, chromium, keep_screenshot, read_png, skip_unless
from tests.synthetic import BUSY, make_measurement, make_record, make_run, samples_around

pytestmark = [
    skip_unless([NO_CHROMIUM] if CHROMIUM is None else [], "the HTML report's browser test"),
    pytest.mark.e2e,
]

WINDOW = "1200,1500"


def _page(tmp_path: Path) -> tuple[Path, int, int]:
    """A report of three records against a baseline of two runs; its path, records and dots drawn."""
    tests = ("t.py::test_matmul[cpu]", "t.py::test_conv<3x3>[cpu]", "t.py::test_mlp[cpu]")
    spread = {"t.py::test_matmul[cpu]": 0.3, "t.py::test_conv<3x3>[cpu]": 0.1, "t.py::test_mlp[cpu]": 0.05}

    def record(test: str, median: float) -> Record:
        samples = list(samples_around(median, 41, spread[test]))  # spread out, so that the dots do not pile up
        random.Random(test).shuffle(samples)  # in no order, as real samples come (no drift)
        return dataclasses.replace(make_record(median, test=test), measurement=make_measurement(test, samples))

    base_run = make_run(*(record(t, m) for t, m in zip(tests, (10e-3, 2e-3, 40e-6), strict=True)))
    run = make_run(*(record(t, m) for t, m in zip(tests, (12e-3, 2e-3, 38e-6), strict=True)))
    comparison = compare(Baseline(tmp_path / "main.json", [base_run, base_run], "main"), run)
    path = tmp_path / "report.html"
    write(path, render(run, comparison, source="synthetic run"))
    # One dot per sample: each record's 41, and its baseline's two runs of 41 (too few to be thinned to a shape).
    return path, len(run.records), len(run.records) * (41 + 2 * 41)


def _coloured(image: Image) -> int:
    """Pixels of a clear hue (the dots; text and grid lines are grey, the interval bands faint)."""
    return image.count(lambda p: max(p) - min(p) > 60)


def test_the_report_draws_every_sample_in_a_browser(tmp_path: Path) -> None:
    path, records, dots = _page(tmp_path)
    done = chromium(tmp_path, "--dump-dom", path.as_uri(), window=WINDOW)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert len(re.findall(r"<svg\b", dom)) == records
    assert len(re.findall(r"<circle\b", dom)) == dots == 3 * (41 + 2 * 41)
    assert "test_conv&lt;3x3&gt;" in dom

    shot = tmp_path / "report.png"
    taken = chromium(tmp_path, f"--screenshot={shot}", path.as_uri(), window=WINDOW)
    assert taken.returncode == 0, taken.stderr[-2000:]
    image = read_png(shot)
    assert (image.width, image.height) == (1200, 1500)
    blank = image.count(lambda p: min(p) >= 250)
    assert 0.5 < blank / (image.width * image.height) < 0.98  # a page with things on it, mostly white

    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r"<svg\b.*?</svg>", "", path.read_text(encoding="utf-8"), flags=re.S), encoding="utf-8")
    bare_shot = tmp_path / "bare.png"
    assert chromium(tmp_path, f"--screenshot={bare_shot}", bare.as_uri(), window=WINDOW).returncode == 0
    painted = _coloured(image) - _coloured(read_png(bare_shot))
    assert painted > 2000, f"the plots added only {painted} coloured pixels"
    keep_screenshot(shot, "report.png")


#: Put into a copy of the page (the page itself holds no script): for each cell of the records table under a time
#: column, the lines its text takes, written into the DOM that ``--dump-dom`` prints.
_LINES_SCRIPT = """<script>
addEventListener("load", () => {
  const table = document.querySelector("section.summary table");
  const heads = [...table.querySelectorAll("th")].map((th) => th.textContent);
  const timed = ["median", "95% CI", "p99", "ratio [95% CI]"].map((h) => heads.indexOf(h)).filter((i) => i >= 0);
  const lines = [];
  for (const row of table.querySelectorAll("tbody tr")) {
    for (const i of timed) {
      const range = document.createRange();
      range.selectNodeContents(row.children[i]);
      lines.push(new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size);
    }
  }
  document.body.setAttribute("data-lines", lines.join(","));
});
</script>"""


def test_on_a_1400_pixel_window_no_time_cell_wraps(tmp_path: Path) -> None:
    """Issue 23 item 8: on a 1400-pixel window every time cell of the records table wrapped onto two lines (on
    main: each row's ratio cell on 3 lines, its median and interval on 1: [1, 1, 3] a row)."""
    tests = [f"suites/test_transformer.py::test_attention_block[cpu-bf16-seq{n}-batch8]" for n in (512, 1024, 2048)]

    def record(test: str, median: float, load: dict[str, object] | None = None) -> Record:
        made = make_record(median, test=test, load=load, work={"FLOP": 2e9, "samples": 64, "tokens": 8192})
        return dataclasses.replace(made, measurement=dataclasses.replace(made.measurement, converged=False))

    base_run = make_run(*(record(t, 10e-3 * (i + 1)) for i, t in enumerate(tests)))
    run = make_run(*(record(t, 11e-3 * (i + 1), BUSY) for i, t in enumerate(tests)))
    path = tmp_path / "wide.html"
    write(path, render(run, compare(Baseline(tmp_path / "main.json", [base_run] * 3, "main"), run)))
    page = path.read_text(encoding="utf-8")
    assert "starved (1 of 2 cores), not converged" in page  # a long flags cell, as a busy run has
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", _LINES_SCRIPT + "</body>"), encoding="utf-8")
    done = chromium(tmp_path, "--dump-dom", probe.as_uri(), window="1400,900")
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-lines="([\d,]*)"', done.stdout)
    assert found is not None, done.stdout[:2000]
    lines = [int(n) for n in found.group(1).split(",")]
    assert len(lines) == 3 * 3 and lines == [1] * len(lines), lines
