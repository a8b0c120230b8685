"""A real browser opens the published history and sees a graph with points.

Headless Chromium loads ``index.html`` served on 127.0.0.1, with the page's
JavaScript and CSS served from the page itself (``pytest-gpuperf history offline``: the CDNs asv
uses are not reachable here). A probe script added to the served copy reads the
points flot plotted in the main graph and writes their count into the DOM, which
``--dump-dom`` prints. A screenshot is kept for people (``GPUPERF_SCREENSHOT=path``
copies it there).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.history import ASSETS, default_cache, localize, remote_urls
from tests.history.repo import STEP, PlantedHistory, planted_history

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
CACHE = Path(os.environ.get("GPUPERF_ASSET_CACHE") or default_cache())
_HAVE_ASSETS = all((CACHE / a.tarball).exists() for a in ASSETS)

_MISSING = [
    reason
    for absent, reason in (
        (CHROMIUM is None, "needs Debian's chromium for a real browser: apt-get install chromium (.ci/run does)"),
        (
            shutil.which("npm") is None and not _HAVE_ASSETS,
            f"needs npm (apt-get install npm) to fetch the page's scripts, or their tarballs in {CACHE}",
        ),
        (shutil.which("git") is None, "needs git to make a history"),
    )
    if absent
]
if _MISSING and os.environ.get("GPUPERF_REQUIRE_BROWSER") == "1":
    # CI sets this: there a missing browser must fail the run, not skip the test quietly.
    raise RuntimeError("GPUPERF_REQUIRE_BROWSER=1, but the browser test " + "; ".join(_MISSING))
pytestmark = pytest.mark.skipif(bool(_MISSING), reason="; ".join(_MISSING))

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


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"  # a fresh profile: no cached pages
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
            "--window-size=1280,900",
            "--hide-scrollbars",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_published_page_shows_a_graph_with_points(site: str, tmp_path: Path) -> None:
    done = _chromium(tmp_path, "--dump-dom", site)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = dict(re.findall(r'data-probe-(\w+)="([^"]*)"', done.stdout))
    assert probe, f"the probe did not run; page:\n{done.stdout[:3000]}"
    assert "Can not determine continental origin of swallow" not in done.stdout
    assert int(probe["series"]) >= 1
    assert int(probe["points"]) == 5  # one per recorded commit
    screenshot = tmp_path / "history.png"
    shot = _chromium(tmp_path, f"--screenshot={screenshot}", site)
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = screenshot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000
    keep = os.environ.get("GPUPERF_SCREENSHOT")
    if keep:
        shutil.copyfile(screenshot, keep)
