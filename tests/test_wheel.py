"""The package a user installs (issue 24, items 4 and 5), built from the tracked files (a copy, so the builds leave
nothing in the clone).

The wheel carries py.typed (PEP 561: a user's mypy --strict then reads ``measure()``'s types, not Any), the LICENSE
its metadata names, the classifiers, and the suites as ``pytest_gpuperf.suites``. Installed into a fresh
environment outside the clone, ``pytest --pyargs pytest_gpuperf.suites`` runs them there, ``ab`` and ``history
record`` find them, and a user's mypy sees the package's types. The sdist holds what builds that same wheel, and the
manual; pip installs either, with the version, licence and classifiers in the installed metadata. The README, which
the package index shows as the long description, has no link the index cannot follow. The tests that build or
install the wheel or the sdist are in the e2e group (``pytest -m e2e``), which .ci/run runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import pytest_gpuperf
from pytest_gpuperf import _suites
from tests.test_docs import _links

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest requires tomli before 3.11
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
#: The test interpreter's packages (torch, pytest, the dev tools) that the fresh environment borrows, by a path in a
#: .pth file: a plain path is added as it is, without running that folder's own .pth files, so the clone's editable
#: install (a .pth there) stays out, and pytest_gpuperf comes from the wheel alone.
BORROWED = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})


def _tracked() -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the tracked files")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode()
    return [name for name in listed.split("\0") if name and (REPO / name).is_file()]


@pytest.fixture(scope="module")
def tracked_copy(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Path]:
    """A fresh copy of the tracked files per call (a build writes into its source folder)."""
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:  # the build-system's floor (PEP 639 license fields)
        pytest.skip(f"setuptools {setuptools.__version__} cannot build this project; it needs 77 or newer")
    names = _tracked()

    def copy() -> Path:
        source = tmp_path_factory.mktemp("source")
        for name in names:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
        return source

    return copy


def _pip_wheel(source: Path, out: Path) -> Path:
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out)]
    subprocess.run([*command, str(source)], check=True, capture_output=True)
    (built,) = out.glob("pytest_gpuperf-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_path(tracked_copy: Callable[[], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _pip_wheel(tracked_copy(), tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def wheel(wheel_path: Path) -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel_path)


@pytest.fixture(scope="module")
def sdist_path(tracked_copy: Callable[[], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, built by setuptools' own backend (what ``python -m build --sdist`` calls, without needing it)."""
    source, out = tracked_copy(), tmp_path_factory.mktemp("sdist")
    build = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    subprocess.run([sys.executable, "-c", build, str(out)], cwd=source, check=True, capture_output=True)
    (sdist,) = out.glob("pytest_gpuperf-*.tar.gz")
    return sdist


def _metadata(wheel: zipfile.ZipFile) -> str:
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return wheel.read(metadata).decode()


@pytest.mark.e2e
def test_the_wheel_is_typed_and_licensed(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    assert "pytest_gpuperf/py.typed" in names
    licence = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert licence and b"MIT License" in wheel.read(licence[0])
    assert_published_metadata(_metadata(wheel))


def assert_published_metadata(text: str) -> None:
    """What the index shows of the package: its version, licence and classifiers (and no URL: none exists yet)."""
    assert f"\nVersion: {pytest_gpuperf.__version__}\n" in text
    assert "License-Expression: MIT" in text and "License-File: LICENSE" in text
    assert "Classifier: Typing :: Typed" in text and "Classifier: Development Status :: 3 - Alpha" in text
    assert "Classifier: Framework :: Pytest" in text and "Classifier: Topic :: System :: Benchmark" in text
    assert "Project-URL" not in text, "no public home yet: a project URL waits for one"


def test_the_version_is_written_once_and_read_without_importing_the_package() -> None:
    """``pytest_gpuperf.__version__`` is the version; pyproject.toml reads it from the file (setuptools' static
    read of the assignment), so a build imports neither the package nor torch."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "pytest_gpuperf.__version__"}
    read = (
        "import sys; sys.modules['torch'] = None\n"
        "from setuptools.config.expand import read_attr\n"
        "print(read_attr('pytest_gpuperf.__version__', root_dir=sys.argv[1]))\n"
        "print(sorted(name for name in sys.modules if name.startswith('pytest_gpuperf')))\n"
    )
    done = subprocess.run([sys.executable, "-c", read, str(REPO)], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [pytest_gpuperf.__version__, "[]"]


@pytest.mark.e2e
def test_the_python_classifiers_run_from_the_floor_and_name_this_python(wheel: zipfile.ZipFile) -> None:
    """One classifier per minor version from Requires-Python's floor up, without a gap, this (CI's) Python among
    them: what the metadata promises and what runs agree."""
    text = _metadata(wheel)
    (floor,) = re.findall(r"^Requires-Python: >=3\.(\d+)$", text, flags=re.M)
    minors = sorted(int(m) for m in re.findall(r"^Classifier: Programming Language :: Python :: 3\.(\d+)$", text, re.M))
    assert minors == list(range(int(floor), int(floor) + len(minors)))
    assert sys.version_info[:2] in [(3, minor) for minor in minors]


@pytest.mark.e2e
def test_the_wheel_carries_every_file_of_the_suites(wheel: zipfile.ZipFile) -> None:
    """``suites/`` of the clone, each tracked file (the data file expectations.json, the conftest, the workloads
    package), as ``pytest_gpuperf/suites/``."""
    shipped = {n for n in wheel.namelist() if n.startswith("pytest_gpuperf/suites/")}
    assert shipped == {f"pytest_gpuperf/{name}" for name in _tracked() if name.startswith("suites/")}
    assert {"pytest_gpuperf/suites/expectations.json", "pytest_gpuperf/suites/conftest.py"} <= shipped


def test_in_the_clone_the_suites_are_found_by_name_never_imported() -> None:
    """The clone's editable install maps ``pytest_gpuperf.suites`` to ``suites/`` (a regular install copies it);
    finding it loads none of it, which pytest imports as ``suites`` here."""
    found = _suites.installed()
    assert found is not None and (found / "conftest.py").is_file() and (found / "workloads" / "__init__.py").is_file()
    assert not [name for name in sys.modules if name.startswith(_suites.PACKAGE)]


def test_history_records_a_repositorys_own_suites_else_the_installed_ones(tmp_path: Path) -> None:
    assert _suites.default_tests(tmp_path) == ("--pyargs", "pytest_gpuperf.suites")
    (tmp_path / "suites").mkdir()
    assert _suites.default_tests(tmp_path) == _suites.default_tests(REPO) == ("suites",)


# ---------------------------------------------------------------- the wheel installed, no clone in sight


@dataclass(frozen=True)
class Installed:
    """A fresh environment with the wheel installed, and a folder outside the clone to run in."""

    prefix: Path
    cwd: Path

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``args[0]`` names a program of the environment (``python``, ``pytest-gpuperf``)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON", "VIRTUAL_ENV"))}
        program = str(self.prefix / "bin" / args[0])
        return subprocess.run(
            [program, *args[1:]], cwd=cwd or self.cwd, env=env, capture_output=True, text=True, check=False
        )


def install(package: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """``package`` (a wheel, or an sdist that pip builds there with the borrowed setuptools) installed by pip
    with ``--no-deps`` into a fresh environment that borrows everything else from the test's."""
    prefix = tmp_path_factory.mktemp("env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, capture_output=True)
    python = prefix / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "_borrowed.pth").write_text("".join(f"{path}\n" for path in BORROWED))
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q"]
    subprocess.run([*pip, "--no-build-isolation", str(package)], check=True, capture_output=True)
    return Installed(prefix, tmp_path_factory.mktemp("elsewhere"))


@pytest.fixture(scope="module")
def installed(wheel_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install(wheel_path, tmp_path_factory)


_WHERE = """
import importlib.util, pathlib, pytest_gpuperf, torch
from pytest_gpuperf import _suites
from pytest_gpuperf.suites.support import expectations
print(pytest_gpuperf.__file__)
print(importlib.util.find_spec("suites"))
print(_suites.installed())
print(expectations().path)
print(expectations().for_device("NVIDIA A100-SXM4-80GB").key, expectations("bandwidth").for_device("NVIDIA H200").key)
print(" ".join(_suites.default_tests(pathlib.Path.cwd())))
"""


@pytest.mark.e2e
def test_the_package_and_its_suites_come_from_the_wheel(installed: Installed) -> None:
    done = installed.run("python", "-c", _WHERE)
    assert done.returncode == 0, done.stderr
    package, clone, suites, data, floors, tests = done.stdout.splitlines()
    inside = str(installed.prefix.resolve())
    assert package.startswith(inside) and package.endswith("site-packages/pytest_gpuperf/__init__.py")
    assert clone == "None", "no clone's suites/ on the path"
    assert suites == str(Path(package).parent / "suites")
    assert data == f"{suites}/expectations.json" and floors == "A100 H200"
    assert tests == "--pyargs pytest_gpuperf.suites"


@pytest.mark.e2e
def test_pytest_pyargs_runs_the_installed_suites(installed: Installed) -> None:
    """The suites' conftest loaded (its ``bandwidth_reference`` fixture, its note), the plugin's options taken,
    the records saved where pytest runs."""
    done = installed.run(
        "python",
        "-m",
        "pytest",
        "--pyargs",
        _suites.PACKAGE,
        "-k",
        "test_bandwidth_reference",
        "--gpuperf-device=cpu",
        "--gpuperf-max-time=0.3",
        "--gpuperf-warmup-time=0.05",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^test_bandwidth\.py \.", done.stdout, re.M)
    assert "test_bandwidth.py::test_bandwidth_reference[cpu]: bandwidth reference " in done.stdout
    assert f"gpuperf: saved 2 records to {installed.cwd.resolve()}/.gpuperf/runs/" in done.stdout
    assert re.search(r"\b1 passed, 43 deselected\b", done.stdout)


def _repository(path: Path) -> Path:
    """A git repository with one commit and no suites/: a project that is no clone of this one."""
    path.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    (path / "README").write_text("a project\n")
    for command in (["init", "-q", "-b", "main"], ["add", "README"], ["commit", "-q", "-m", "first"]):
        subprocess.run([*git, *command], cwd=path, check=True, capture_output=True)
    return path


@pytest.mark.e2e
def test_ab_and_history_find_the_installed_suites(installed: Installed) -> None:
    """Outside a clone, ``ab`` runs the installed suites' workloads (one copy on both sides, said to be an A/A run)
    and ``history record`` runs the installed suites with ``--pyargs``; ``--help`` states the rule."""
    help_text = " ".join(installed.run("pytest-gpuperf", "ab", "--help").stdout.split())
    assert "(default: suites/workloads when the repository has it, else the suites' workloads installed" in help_text
    help_text = " ".join(installed.run("pytest-gpuperf", "history", "record", "--help").stdout.split())
    assert "else the suites installed with pytest-gpuperf, as --pyargs pytest_gpuperf.suites)" in help_text

    project = _repository(installed.cwd / "project")
    quick = ("--device", "cpu", "--max-time", "0.2", "-k", "matmul_float32", "--fail-on", "none", "--trace", "off")
    done = installed.run("pytest-gpuperf", "ab", "--base", "HEAD", *quick, cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    suites = installed.run("python", "-c", "from pytest_gpuperf import _suites; print(_suites.installed())")
    workloads = f"{suites.stdout.strip()}/workloads"
    assert f"{project.resolve()} has no suites/workloads, so both sides run the suites' workloads installed" in (
        done.stdout
    )
    assert f"({workloads}), one copy: an A/A run" in done.stdout
    assert re.search(r"^matmul_float32 +cpu ", done.stdout, re.M)
    assert "warning: the repository has no suites/workloads, so both sides ran the installed suites'" in done.stderr

    pytest_args = ("-ktest_bandwidth_reference", "--gpuperf-device=cpu", "--gpuperf-max-time=0.3")
    done = installed.run(
        "pytest-gpuperf",
        "history",
        "record",
        "--last",
        "1",
        "--no-publish",
        "--machine",
        "testbox",
        *(f"--pytest-arg={arg}" for arg in pytest_args),
        cwd=project,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^[0-9a-f]{8} first: recorded$", done.stdout, re.M)
    (log,) = (project / ".asv" / "pytest" / "logs").glob("*.log")
    assert " --pyargs pytest_gpuperf.suites --gpuperf-asv=" in log.read_text()
    assert "test_bandwidth.test_bandwidth_reference" in (project / ".asv/pytest/results/benchmarks.json").read_text()


_USER = """\
from pytest_gpuperf import measure

result = measure(lambda: None, device="cpu")
reveal_type(result)
wrong: int = result.median
"""


@pytest.mark.e2e
def test_a_users_mypy_strict_sees_the_packages_types(installed: Installed) -> None:
    """Against the installed wheel: the revealed type is the package's ``Measurement`` (Any without py.typed, where
    mypy --strict reports the import as untyped instead), and a wrong assignment is caught."""
    pytest.importorskip("mypy")
    (installed.cwd / "user.py").write_text(_USER)
    # torch is skipped for speed: it is a large typed package of its own, and the user's file does not import it.
    (installed.cwd / "mypy.ini").write_text("[mypy]\nstrict = True\n\n[mypy-torch.*]\nfollow_imports = skip\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--python-executable", str(installed.prefix / "bin" / "python"), "user.py"],
        cwd=installed.cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.splitlines()[:2] == [
        'user.py:4: note: Revealed type is "pytest_gpuperf.measuring._measurement.Measurement"',
        'user.py:5: error: Incompatible types in assignment (expression has type "float", variable has type "int")  '
        "[assignment]",
    ]
    assert done.returncode == 1


# ---------------------------------------------------------------- the sdist, and the README the index shows


@pytest.mark.e2e
def test_the_sdist_holds_what_builds_the_same_wheel_and_the_manual(
    sdist_path: Path, wheel: zipfile.ZipFile, tmp_path: Path
) -> None:
    """The package, the suites, LICENSE, README, CHANGELOG and docs/; no tests (they need the whole repository);
    and the wheel built from it is the wheel built from the clone."""
    sdist = sdist_path
    with tarfile.open(sdist) as archive:
        names = {name.partition("/")[2] for name in archive.getnames() if archive.getmember(name).isfile()}
    generated = {"PKG-INFO", "setup.cfg"}
    names = {n for n in names if n not in generated and not n.startswith("pytest_gpuperf.egg-info/")}
    wanted = ("pytest_gpuperf/", "suites/", "docs/")
    top = {"LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "MANIFEST.in"}
    assert names == {n for n in _tracked() if n.startswith(wanted) or n in top}
    rebuilt = zipfile.ZipFile(_pip_wheel(sdist, tmp_path / "wheel"))
    assert sorted(rebuilt.namelist()) == sorted(wheel.namelist())


_INSTALLED_METADATA = """
import importlib.metadata as metadata
dist = metadata.distribution("pytest-gpuperf")
print(dist.read_text("METADATA"))
print("licence:", "MIT License" in (dist.read_text("licenses/LICENSE") or ""))
"""


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_pip_installs_the_wheel_and_the_sdist_with_their_licence_and_classifiers(
    kind: str, installed: Installed, sdist_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Installed by pip into a fresh environment, from the wheel or from the sdist (which pip builds there): the
    installed distribution's metadata carries the version, licence, LICENSE file and classifiers, and the
    package and its command line run."""
    env = installed if kind == "wheel" else install(sdist_path, tmp_path_factory)
    done = env.run("python", "-c", _INSTALLED_METADATA)
    assert done.returncode == 0, done.stderr
    text, _, licence = done.stdout.rpartition("licence: ")
    assert licence.strip() == "True"
    assert_published_metadata(text)
    where = env.run("python", "-c", "import pytest_gpuperf; print(pytest_gpuperf.__file__)")
    assert where.stdout.startswith(str(env.prefix.resolve())), where.stdout + where.stderr
    assert env.run("pytest-gpuperf", "--help").returncode == 0


#: Where an image or link of raw HTML points.
_HTML_TARGET = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)


def unfollowable(markdown: str) -> list[str]:
    """Each link or image target that the package index cannot follow: it shows the README away from its files and
    makes no heading anchors, so a relative path or a ``#anchor`` leads nowhere there; only absolute URLs work."""
    targets = [*_links(markdown), *_HTML_TARGET.findall(markdown)]
    return [target for target in targets if not target.startswith(("https://", "http://", "mailto:"))]


def test_the_link_check_finds_what_the_index_cannot_follow() -> None:
    text = '[a](docs/api.md) [b](#install) [c](https://pytorch.org/) <https://x.org> <img src="logo.png">\n[d]: x.md\n'
    assert unfollowable(text) == ["docs/api.md", "#install", "x.md", "logo.png"]


@pytest.mark.e2e
def test_the_index_can_follow_every_link_of_the_readme(wheel: zipfile.ZipFile) -> None:
    """The README is the long description (the index renders it as Markdown); it names the manual's pages as paths
    of docs/, which the sdist and the repository both hold, instead of linking to them."""
    metadata = _metadata(wheel)
    assert "Description-Content-Type: text/markdown" in metadata
    readme = (REPO / "README.md").read_text()
    assert metadata.partition("\n\n")[2].strip() == readme.strip()
    assert unfollowable(readme) == []
