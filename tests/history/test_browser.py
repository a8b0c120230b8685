"""A real browser opens the published history and sees a graph with points.

Headless Chromium loads ``index.html`` served on 127.0.0.1, with the page's
JavaScript and CSS served from the page itself (``pytest-gpuperf history offline``: the CDNs asv
uses are not reachable here). A probe script added to the served copy reads the
points flot plotted in the main graph and writes their count into the DOM, which
``--dump-dom`` prints. A screenshot is kept for people (``GPUPERF_SCREENSHOT``: see ``tests/browser.py``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.history._assets import ASSETS, default_cache, localize, remote_urls
from tests.browser import CHROMIUM, NO_CHROMIUM, chromium, keep_screenshot, skip_unless
from tests.history.repo import STEP, PlantedHistory, planted_history

CACHE = Path(os.environ.get("GPUPERF_ASSET_CACHE") or default_cache())
_HAVE_ASSETS = all((CACHE / a.tarball).exists() for a in ASSETS)

_MISSING = [
    reason
    for absent, reason in (
        (CHROMIUM is None, NO_CHROMIUM),
        (
            shutil.which("npm") is None and not _HAVE_ASSETS,
            f"needs npm (apt-get install npm) to fetch the page's scripts, or their tarballs in {CACHE}",
        ),
        (shutil.which("git") is None, "needs git to make a history"),
    )
    if absent
]
pytestmark = [skip_unless(_MISSING, "the browser test"), pytest.mark.e2e]

_PROBE = """
(function () {
  var tries = 0;
  var timer = setInterval(function () {
    tries += 1;
    var plot = window.jQuery && jQuery('#main-graph').data('plot');
    if (!plot && tries < 150) { return; }
    clearInterval(timer);
    var series = plot ? plot.getData() : [];
    var points = 0;
    series.forEach(function (s) {
      s.data.forEach(function (p) { if (p && p[1] !== null && isFinite(p[1])) { points += 1; } });
    });
    document.body.setAttribute('data-probe-series', String(series.length));
    document.body.setAttribute('data-probe-points', String(points));
    document.body.setAttribute('data-probe-failed', String(!!window.js_load_failed || false));
  }, 100);
})();
"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return None


@pytest.fixture
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Iterator[str]:
    """The published history, made offline, served on 127.0.0.1; yields the page's URL."""
    history: PlantedHistory = planted_history(request, tmp_path_factory)
    html = tmp_path / "html"
    shutil.copytree(history.out / "html", html)
    localize(html, CACHE)
    index = html / "index.html"
    text = index.read_text(encoding="utf-8")
    assert remote_urls(text) == []  # nothing is loaded from the internet any more
    (html / "probe.js").write_text(_PROBE, encoding="utf-8")
    index.write_text(text.replace("</body>", '<script src="probe.js"></script></body>'), encoding="utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html#{STEP}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_published_page_shows_a_graph_with_points(site: str, tmp_path: Path) -> None:
    done = chromium(tmp_path, "--dump-dom", site)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = dict(re.findall(r'data-probe-(\w+)="([^"]*)"', done.stdout))
    assert probe, f"the probe did not run; page:\n{done.stdout[:3000]}"
    assert "Can not determine continental origin of swallow" not in done.stdout
    assert int(probe["series"]) >= 1
    assert int(probe["points"]) == 5  # one per recorded commit
    screenshot = tmp_path / "history.png"
    shot = chromium(tmp_path, f"--screenshot={screenshot}", site)
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = screenshot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000
    keep_screenshot(screenshot, "history.png")
