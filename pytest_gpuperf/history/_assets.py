"""Make a page published by asv work without the internet: serve its JavaScript and CSS from the page itself.

asv 0.6's ``index.html`` loads jQuery, flot, bootstrap and three small plugins from
public CDNs, with subresource-integrity hashes. Where those CDNs cannot be reached
(a firewall, an air-gapped lab, CI) the page shows only "Can not determine
continental origin of swallow". This module fetches the same versions from the
npm registry with the ordinary ``npm pack`` (so npm's own configuration, such as a
company registry mirror in ``.npmrc``, applies), keeps the tarballs in a cache
directory, copies the files into ``<html>/vendor/`` and points the page at them.

A tarball already in the cache is used as it is: without npm, or without any
network, put the tarballs there by hand (``npm pack jquery@3.3.1`` on any machine
that reaches a registry makes ``jquery-3.3.1.tgz``).

An integrity attribute is kept when the local file has that hash (jquery,
bootstrap, blueimp-md5 and flot-orderbars are byte-identical on npm) and dropped
when it has not: npm's flot 0.8.3 ships unminified files, and npm has
stupid-table-plugin 1.1.3, not the CDN's stupidtable 1.0.1 (same plugin API).

    pytest-gpuperf history offline .asv/html [--cache DIR]
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["ASSETS", "Asset", "OfflineError", "default_cache", "fetch", "localize", "remote_urls"]


class OfflineError(Exception):
    """An asset that cannot be fetched or placed; the message names it and what to do."""


@dataclass(frozen=True)
class Asset:
    url: str  # exactly as asv's index.html has it
    package: str  # npm name
    version: str
    member: str  # path inside the npm tarball, below package/

    @property
    def tarball(self) -> str:
        return f"{self.package}-{self.version}.tgz"

    @property
    def local(self) -> str:
        """Where the page finds it, relative to index.html."""
        return f"vendor/{self.package}-{self.version}/{self.member}"


_CDNJS: Final = "https://cdnjs.cloudflare.com/ajax/libs"
#: asv 0.6.6's external assets and their npm sources.
ASSETS: Final[tuple[Asset, ...]] = (
    Asset("https://code.jquery.com/jquery-3.3.1.min.js", "jquery", "3.3.1", "dist/jquery.min.js"),
    Asset(f"{_CDNJS}/flot/0.8.3/jquery.flot.min.js", "flot", "0.8.3", "jquery.flot.js"),
    Asset(f"{_CDNJS}/flot/0.8.3/jquery.flot.time.min.js", "flot", "0.8.3", "jquery.flot.time.js"),
    Asset(f"{_CDNJS}/flot/0.8.3/jquery.flot.selection.min.js", "flot", "0.8.3", "jquery.flot.selection.js"),
    Asset(f"{_CDNJS}/flot/0.8.3/jquery.flot.categories.min.js", "flot", "0.8.3", "jquery.flot.categories.js"),
    Asset(
        "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js",
        "flot-orderbars",
        "1.0.0",
        "js/jquery.flot.orderBars.js",
    ),
    Asset(f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js", "stupid-table-plugin", "1.1.3", "stupidtable.min.js"),
    Asset(f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js", "blueimp-md5", "2.19.0", "js/md5.min.js"),
    Asset(
        "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js",
        "bootstrap",
        "3.1.1",
        "dist/js/bootstrap.min.js",
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css",
        "bootstrap",
        "3.1.1",
        "dist/css/bootstrap.min.css",
    ),
)
#: Files a stylesheet refers to by relative path: bootstrap's icon fonts.
_COMPANIONS: Final = {"bootstrap": "dist/fonts/"}
_TAG: Final = re.compile(r"<(script|link)\b[^>]*>", re.IGNORECASE)
_ATTR_INTEGRITY: Final = re.compile(r'\s+integrity="([^"]*)"')
_REMOTE: Final = re.compile(r'(?:src|href)="(https?://[^"]+)"')


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-gpuperf" / "asv-assets"


def fetch(cache: Path, *, npm: str | None = None) -> dict[str, Path]:
    """Every tarball ASSETS needs, in ``cache``: {tarball name: path}; ``npm pack`` fetches the missing ones."""
    cache.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for asset in ASSETS:
        path = cache / asset.tarball
        if not path.exists():
            _npm_pack(f"{asset.package}@{asset.version}", cache, npm)
        if not path.exists():
            raise OfflineError(f"npm pack {asset.package}@{asset.version} did not leave {path}")
        out[asset.tarball] = path
    return out


def _npm_pack(spec: str, cache: Path, npm: str | None) -> None:
    exe = npm or shutil.which("npm")
    if exe is None:
        raise OfflineError(
            f"{spec} is not in {cache} and npm is not installed; install npm (Debian: apt-get install npm), "
            f"or on a machine that reaches an npm registry run `npm pack {spec}` and copy the .tgz into {cache}"
        )
    try:
        done = subprocess.run(
            [exe, "pack", spec, "--pack-destination", str(cache), "--silent"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise OfflineError(f"npm pack {spec} could not run: {exc}") from None
    if done.returncode != 0:
        raise OfflineError(
            f"npm pack {spec} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}; "
            f"check the npm registry setting (npm config get registry), or put {spec}'s .tgz into {cache} by hand"
        )


def localize(html_dir: Path, cache: Path, *, npm: str | None = None) -> list[str]:
    """Copy the assets into ``html_dir/vendor`` and point ``index.html`` at them; return notes on what changed."""
    index = html_dir / "index.html"
    if not index.is_file():
        raise OfflineError(f"{index} does not exist; run `asv publish` first and give its html_dir")
    tarballs = fetch(cache, npm=npm)
    for asset in ASSETS:
        _extract(tarballs[asset.tarball], asset.member, html_dir / asset.local)
    for package, folder in _COMPANIONS.items():
        first = next(a for a in ASSETS if a.package == package)
        _extract_tree(tarballs[first.tarball], folder, html_dir / f"vendor/{package}-{first.version}/{folder}")
    text, notes = _rewrite(index.read_text(encoding="utf-8"), html_dir)
    index.write_text(text, encoding="utf-8")
    left = remote_urls(text)
    if left:
        notes.append("still loaded from the internet (unknown to pytest-gpuperf history offline): " + ", ".join(left))
    return notes


def remote_urls(html: str) -> list[str]:
    """http(s) URLs that script and link tags of ``html`` load."""
    return [m.group(1) for tag in _TAG.finditer(html) for m in [_REMOTE.search(tag.group(0))] if m]


def _rewrite(html: str, html_dir: Path) -> tuple[str, list[str]]:
    notes: list[str] = []
    by_url = {a.url: a for a in ASSETS}

    def replace(tag: re.Match[str]) -> str:
        text = tag.group(0)
        found = _REMOTE.search(text)
        asset = by_url.get(found.group(1)) if found else None
        if asset is None:
            return text
        text = text.replace(asset.url, asset.local)
        integrity = _ATTR_INTEGRITY.search(text)
        if integrity and not _matches(integrity.group(1), (html_dir / asset.local).read_bytes()):
            text = _ATTR_INTEGRITY.sub("", text)
            notes.append(f"{asset.url}: served {asset.package}@{asset.version}/{asset.member} without integrity check")
        return text

    return _TAG.sub(replace, html), notes


def _matches(integrity: str, data: bytes) -> bool:
    """Subresource integrity: any ``alg-base64`` token that equals the file's digest."""
    for token in integrity.split():
        alg, _, expected = token.partition("-")
        if alg in ("sha256", "sha384", "sha512"):
            digest = base64.b64encode(hashlib.new(alg, data).digest()).decode()
            if digest == expected:
                return True
    return False


def _open(tarball: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(tarball, "r:gz")
    except (OSError, tarfile.TarError) as exc:
        raise OfflineError(
            f"{tarball} is not a readable npm tarball ({exc}); delete it so it is fetched again"
        ) from None


def _extract(tarball: Path, member: str, target: Path) -> None:
    with _open(tarball) as tar:
        try:
            source = tar.extractfile(f"package/{member}")
        except KeyError:
            source = None
        if source is None:
            raise OfflineError(f"{tarball} has no package/{member}; delete it so the right version is fetched")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read())


def _extract_tree(tarball: Path, folder: str, target: Path) -> None:
    prefix = f"package/{folder}"
    with _open(tarball) as tar:
        for info in tar.getmembers():
            if info.isfile() and info.name.startswith(prefix) and ".." not in info.name:
                source = tar.extractfile(info)
                if source is not None:
                    path = target / info.name[len(prefix) :]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(source.read())
