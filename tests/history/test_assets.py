"""``history offline`` serves only files whose sha256 is pinned, and keeps an integrity attribute on every tag.

The cache holds synthetic npm tarballs and the pins are patched to their contents, so these
tests need neither npm nor the network; one test checks the real pins against the real cached
tarballs where a machine has them.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.history import _assets
from pytest_gpuperf.history._assets import ASSETS, Asset, OfflineError, default_cache

ASV_INDEX = Path(str(__import__("asv").__file__)).parent / "www" / "index.html"


def _content(asset: Asset) -> bytes:
    return f"/* {asset.package}@{asset.version} {asset.member} */\n".encode()


def _pack(cache: Path, assets: tuple[Asset, ...], tampered: str | None = None) -> None:
    """npm-like tarballs (``package/<member>``) of the synthetic files; ``tampered`` names a member to alter."""
    by_tarball: dict[str, list[Asset]] = {}
    for asset in assets:
        by_tarball.setdefault(asset.tarball, []).append(asset)
    cache.mkdir(parents=True, exist_ok=True)
    for name, members in by_tarball.items():
        with tarfile.open(cache / name, "w:gz") as tar:
            for asset in members:
                data = _content(asset) + (b"alert('planted');\n" if asset.member == tampered else b"")
                info = tarfile.TarInfo(f"package/{asset.member}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> tuple[Asset, ...]:
    """The assets and fonts, pinned to the synthetic files' hashes."""
    assets = tuple(dataclasses.replace(a, sha256=hashlib.sha256(_content(a)).hexdigest()) for a in ASSETS)
    fonts = tuple(dataclasses.replace(a, sha256=hashlib.sha256(_content(a)).hexdigest()) for a in _assets._FONTS)
    monkeypatch.setattr(_assets, "ASSETS", assets)
    monkeypatch.setattr(_assets, "_FONTS", fonts)
    return assets + fonts


@pytest.fixture
def html(tmp_path: Path) -> Path:
    """asv's own index.html, as asv publish writes it."""
    folder = tmp_path / "html"
    folder.mkdir()
    shutil.copy(ASV_INDEX, folder / "index.html")
    return folder


def _offline(html: Path, cache: Path) -> int:
    return main(["history", "offline", str(html), "--cache", str(cache)])


def test_a_normal_run_prints_one_line_and_every_tag_keeps_the_served_files_hash(
    pinned: tuple[Asset, ...], html: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _pack(tmp_path / "cache", pinned)
    assert _offline(html, tmp_path / "cache") == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"offline: {html / 'index.html'} now loads its scripts from {html / 'vendor'}, each pinned to its sha256"
    ]
    text = (html / "index.html").read_text(encoding="utf-8")
    assert _assets.remote_urls(text) == []
    tags = {m.group(1): m.group(0) for m in re.finditer(r'<[^>]*(?:src|href)="(vendor/[^"]+)"[^>]*>', text)}
    assert len(tags) == len(ASSETS) == 10
    for local, tag in tags.items():
        digest = base64.b64encode(hashlib.sha256((html / local).read_bytes()).digest()).decode()
        assert f'integrity="sha256-{digest}"' in tag, tag
    for font in _assets._FONTS:
        assert (html / font.local).read_bytes() == _content(font)


@pytest.mark.parametrize("strip_integrity", [True, False])
def test_a_tampered_cached_jquery_is_refused_and_nothing_is_written(
    pinned: tuple[Asset, ...], html: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], strip_integrity: bool
) -> None:
    """The issue: a planted jquery tarball, its tag's integrity removed, was served with a routine note and exit 0."""
    _pack(tmp_path / "cache", pinned, tampered="dist/jquery.min.js")
    index = html / "index.html"
    if strip_integrity:
        index.write_text(re.sub(r'(jquery-3\.3\.1\.min\.js") integrity="[^"]*"', r"\1", index.read_text()))
    before = index.read_bytes()
    assert _offline(html, tmp_path / "cache") == 2
    captured = capsys.readouterr()
    tarball = tmp_path / "cache" / "jquery-3.3.1.tgz"
    assert f"{tarball}: package/dist/jquery.min.js has sha256 " in captured.err
    assert f"Delete {tarball} and run again" in captured.err and "Nothing was written" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert index.read_bytes() == before and not (html / "vendor").exists()


def test_a_tampered_font_is_refused_too(pinned: tuple[Asset, ...], html: Path, tmp_path: Path) -> None:
    _pack(tmp_path / "cache", pinned, tampered="dist/fonts/glyphicons-halflings-regular.woff")
    with pytest.raises(
        OfflineError, match=r"bootstrap-3\.1\.1\.tgz: package/dist/fonts/glyphicons-halflings-regular\.woff"
    ):
        _assets.localize(html, tmp_path / "cache")


def test_a_link_planted_in_vendor_is_replaced_not_followed(
    pinned: tuple[Asset, ...], html: Path, tmp_path: Path
) -> None:
    _pack(tmp_path / "cache", pinned)
    outside = tmp_path / "outside.txt"
    outside.write_text("mine")
    link = html / ASSETS[0].local
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    _assets.localize(html, tmp_path / "cache")
    assert outside.read_text() == "mine" and not link.is_symlink()


_REAL = default_cache()


@pytest.mark.skipif(
    not all((_REAL / a.tarball).exists() for a in ASSETS), reason=f"needs npm's tarballs in {_REAL} (npm pack)"
)
def test_the_pins_are_those_of_npms_tarballs() -> None:
    for asset in ASSETS + _assets._FONTS:
        assert _assets._pinned(_REAL / asset.tarball, asset)
