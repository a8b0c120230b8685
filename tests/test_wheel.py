"""The wheel a user installs: built with pip from the tracked files (a copy, so the build leaves nothing in the
clone), it carries py.typed (PEP 561: a user's mypy --strict then reads ``measure()``'s types, not Any), the
LICENSE its metadata names, and the classifiers (issue 24, item 5)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the tracked files")
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:  # the build-system's floor (PEP 639 license fields)
        pytest.skip(f"setuptools {setuptools.__version__} cannot build this project; it needs 77 or newer")
    source = tmp_path_factory.mktemp("source")
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode().split("\0")
    )
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out)]
    subprocess.run([*command, str(source)], check=True, capture_output=True)
    (built,) = out.glob("pytest_gpuperf-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_is_typed_and_licensed(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    assert "pytest_gpuperf/py.typed" in names
    licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert licence and b"MIT License" in wheel.read(licence[0])
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = wheel.read(metadata).decode()
    assert "License-Expression: MIT" in text
    assert "Classifier: Typing :: Typed" in text and "Classifier: Development Status :: 3 - Alpha" in text
