"""Make a page published by asv work without the internet: serve its JavaScript and CSS from the page itself.

asv 0.6's ``index.html`` loads jQuery, flot, bootstrap and three small plugins from
public CDNs, with subresource-integrity hashes. Where those CDNs cannot be reached
(a firewall, an air-gapped lab, CI) the page shows only "Can not determine
continental origin of swallow". This module fetches the same versions from the
npm registry with the ordinary ``npm pack`` (so npm's own configuration, such as a
company registry mirror in ``.npmrc``, applies), keeps the tarballs in a cache
directory, copies the files into ``<html>/vendor/`` and points the page at them.

A tarball already in the cache is used (once its files match their pins): without npm, or without any
network, put the tarballs there by hand (``npm pack jquery@3.3.1`` on any machine
that reaches a registry makes ``jquery-3.3.1.tgz``).

Every file placed is pinned to a sha256 (``Asset.sha256``, ``_FONTS``), taken from
the tarballs npm's registry serves (their ``dist.shasum`` checked on 2026-11-26): a
cached tarball whose file differs is refused, naming the tarball and the fix, before
anything is written. Each tag keeps an ``integrity`` attribute, the pinned file's
``sha256-...``, so the browser checks the file as well. That is the CDN's own hash for
jquery, bootstrap, blueimp-md5 and flot-orderbars (byte-identical on npm); npm's
flot 0.8.3 ships unminified files, and npm has stupid-table-plugin 1.1.3, not the
CDN's stupidtable 1.0.1 (same plugin API), so those five get our pin in place of the
CDN's hash, which their files cannot match.

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
    sha256: str  # hex digest of that file, as npm's registry serves it

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
    Asset(
        "https://code.jquery.com/jquery-3.3.1.min.js",
        "jquery",
        "3.3.1",
        "dist/jquery.min.js",
        "160a426ff2894252cd7cebbdd6d6b7da8fcd319c65b70468f10b6690c45d02ef",
    ),
    Asset(
        f"{_CDNJS}/flot/0.8.3/jquery.flot.min.js",
        "flot",
        "0.8.3",
        "jquery.flot.js",
        "b7b931f273c38b1277b9c6c1f4e05c4ec09885a487bddaf3279e2d7e49a38e12",
    ),
    Asset(
        f"{_CDNJS}/flot/0.8.3/jquery.flot.time.min.js",
        "flot",
        "0.8.3",
        "jquery.flot.time.js",
        "a582c832adc7138a6b05aaf61f16ebac274701f1be4afea77e739a1c34b9c41a",
    ),
    Asset(
        f"{_CDNJS}/flot/0.8.3/jquery.flot.selection.min.js",
        "flot",
        "0.8.3",
        "jquery.flot.selection.js",
        "e6c85f6c1ebe4b4da29d8ae238c7c5060283f05f7ef054f6b91817d02c092918",
    ),
    Asset(
        f"{_CDNJS}/flot/0.8.3/jquery.flot.categories.min.js",
        "flot",
        "0.8.3",
        "jquery.flot.categories.js",
        "6e81664b28ea795c734906f4aa15614640a75ac7fbd399a7fb9084040698351a",
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js",
        "flot-orderbars",
        "1.0.0",
        "js/jquery.flot.orderBars.js",
        "39735b4f46f96ff4e082572401f47c55a2767b366fd1d1e821e44a8d830a12bf",
    ),
    Asset(
        f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js",
        "stupid-table-plugin",
        "1.1.3",
        "stupidtable.min.js",
        "4642380f28ebe9ed7cac251793b281ef8620c4386205d92788f9b12f5cceb4e0",
    ),
    Asset(
        f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js",
        "blueimp-md5",
        "2.19.0",
        "js/md5.min.js",
        "64d7ded388c562e4bde9e58ce205e5fa01b9734fcd434d496eb7b4fbfe9b927d",
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js",
        "bootstrap",
        "3.1.1",
        "dist/js/bootstrap.min.js",
        "898d05a17f2cfc5120ddcdba47a885c378c0b466f30f0700e502757e24b403a1",
    ),
    Asset(
        "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css",
        "bootstrap",
        "3.1.1",
        "dist/css/bootstrap.min.css",
        "e9503448692b738dd260fbd7f7cabf2e11f09b600fa97e6eb3a56eba5b1a7e9b",
    ),
)
#: Files bootstrap's stylesheet refers to by relative path (its icon fonts), pinned like ASSETS.
_FONTS: Final[tuple[Asset, ...]] = tuple(
    Asset("", "bootstrap", "3.1.1", f"dist/fonts/glyphicons-halflings-regular.{ext}", digest)
    for ext, digest in (
        ("eot", "f495f34e4f177cf0115af995bbbfeb3fcabc88502876e76fc51a4ab439bc8431"),
        ("svg", "d168d50a88c730b4e6830dc0da2a2b51dae4658a77d9619943c27b8ecfc19d1a"),
        ("ttf", "bd18efd3efd70fec8ad09611a20cdbf99440b2c1d40085c29be036f891d65358"),
        ("woff", "fc969dc1c6ff531abcf368089dcbaf5775133b0626ff56b52301a059fc0f9e1e"),
    )
)
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
    """Copy the pinned assets into ``html_dir/vendor`` and point ``index.html`` at them.

    Every file is read and checked against its pin before any is written, so a tampered
    cache leaves the page as it was. Returns notes that need the user's attention: none
    on a normal run.
    """
    index = html_dir / "index.html"
    if not index.is_file():
        raise OfflineError(f"{index} does not exist; run `asv publish` first and give its html_dir")
    tarballs = fetch(cache, npm=npm)
    files = {asset.local: _pinned(tarballs[asset.tarball], asset) for asset in ASSETS + _FONTS}
    for local, data in files.items():
        _write(html_dir / local, data)
    text = _rewrite(index.read_text(encoding="utf-8"))
    _write(index, text.encode("utf-8"))
    left = remote_urls(text)
    if left:
        return ["still loaded from the internet (unknown to pytest-gpuperf history offline): " + ", ".join(left)]
    return []


def remote_urls(html: str) -> list[str]:
    """http(s) URLs that script and link tags of ``html`` load."""
    return [m.group(1) for tag in _TAG.finditer(html) for m in [_REMOTE.search(tag.group(0))] if m]


def _integrity(asset: Asset) -> str:
    """The subresource-integrity value of the file we serve: its pinned sha256."""
    return "sha256-" + base64.b64encode(bytes.fromhex(asset.sha256)).decode()


def _rewrite(html: str) -> str:
    """Point each known tag at the local copy, with the pin as its integrity (added where the tag had none)."""
    by_url = {a.url: a for a in ASSETS}

    def replace(tag: re.Match[str]) -> str:
        text = tag.group(0)
        found = _REMOTE.search(text)
        asset = by_url.get(found.group(1)) if found else None
        if asset is None:
            return text
        text = _ATTR_INTEGRITY.sub("", text.replace(asset.url, asset.local))
        closing = "/>" if text.endswith("/>") else ">"
        return f'{text[: -len(closing)].rstrip()} integrity="{_integrity(asset)}"{closing}'

    return _TAG.sub(replace, html)


def _open(tarball: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(tarball, "r:gz")
    except (OSError, tarfile.TarError) as exc:
        raise OfflineError(
            f"{tarball} is not a readable npm tarball ({exc}); delete it so it is fetched again"
        ) from None


def _pinned(tarball: Path, asset: Asset) -> bytes:
    """``asset``'s file from ``tarball``, refused unless its sha256 is the pinned one."""
    with _open(tarball) as tar:
        try:
            source = tar.extractfile(f"package/{asset.member}")
        except KeyError:
            source = None
        if source is None:
            raise OfflineError(f"{tarball} has no package/{asset.member}; delete it so the right version is fetched")
        data = source.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != asset.sha256:
        raise OfflineError(
            f"{tarball}: package/{asset.member} has sha256 {digest}, not the pinned {asset.sha256} of "
            f"{asset.package}@{asset.version} as npm's registry serves it; the cached tarball was altered or is "
            f"another build. Nothing was written. Delete {tarball} and run again, so `npm pack "
            f"{asset.package}@{asset.version}` fetches it anew"
        )
    return data


def _write(target: Path, data: bytes) -> None:
    """Write ``data`` as a new file: a link planted at ``target`` is replaced, never followed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    target.write_bytes(data)
