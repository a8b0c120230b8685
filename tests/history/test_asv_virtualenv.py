"""``asv.virtualenv.conf.json`` as shipped, run by real asv: offline, from a local wheelhouse, on two commits.

A scratch git repository holds a copy of this work tree (commit ``base``) and the same tree with
the ``matmul_*`` step doing its product four times (commit ``slow``, the planted slowdown).
``asv continuous`` builds both commits with the configuration's ``build_command``, installs them
into one virtualenv (torch pinned by the configuration's ``matrix``) and runs ``asv run`` on each;
it must exit 1. pip sees only the wheelhouse (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``), so nothing
can be downloaded, least of all an unpinned torch. The wheelhouse is made with ``pip download``
of the exact versions installed here (pip's own configured sources; on CI, the local disk).

This is the slowest test of the suite (a virtualenv with torch): 50 to 72 s on the development
machine. It skips only when asv or virtualenv is missing, or when this environment's torch is not
the configuration's pin (then the wheelhouse would have to download it: set
``GPUPERF_ASV_WHEELHOUSE`` to a folder holding the pinned wheel and the project's dependencies).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - pytest requires tomli before 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "asv.virtualenv.conf.json"
BENCH = "matmul_float32"
_STEP = "torch.mm(a, b, out=c)"
_QUICK = {"GPUPERF_ASV_SETTINGS": "max_time=0.5 warmup_time=0.1 min_samples=10", "GPUPERF_ASV_DEVICE": "cpu"}

pytest.importorskip("asv", reason="needs asv (pip install 'pytest-gpuperf[asv]')")
pytest.importorskip("virtualenv", reason="needs virtualenv, which asv's virtualenv environments use")
if shutil.which("git") is None:  # pragma: no cover - git is everywhere this project is developed
    pytest.skip("needs git", allow_module_level=True)


def _shipped() -> dict[str, object]:
    from asv.util import load_json

    data: dict[str, object] = load_json(str(CONFIG), js_comments=True)
    return data


def _torch_pin() -> str:
    matrix = _shipped()["matrix"]
    assert isinstance(matrix, dict)
    (pin,) = matrix["req"]["torch"]
    assert isinstance(pin, str) and pin, "the configuration must pin one torch version"
    return pin


def _installed_closure(names: list[str]) -> dict[str, str]:
    """{distribution: installed version} for ``names`` and everything they require here."""
    found: dict[str, str] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        dist = metadata.distribution(name)
        found[name] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def _pip(*args: str, cwd: Path | None = None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False
    )
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("GPUPERF_ASV_WHEELHOUSE")
    if given:
        return Path(given)
    pin = _torch_pin()
    torch_version = metadata.version("torch")
    if Version(torch_version).public != Version(pin).public:
        pytest.skip(
            f"asv.virtualenv.conf.json pins torch {pin} and this environment has {torch_version}: "
            "set GPUPERF_ASV_WHEELHOUSE to a folder with the pinned torch wheel and the project's dependencies"
        )
    # Exact versions only (torch's local label included, e.g. 2.13.0+cpu): never a resolver's choice of torch.
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = _installed_closure([Requirement(line).name for line in dependencies])
    house = tmp_path_factory.mktemp("wheelhouse")
    exact = [f"{name}=={version}" for name, version in pins.items()]
    _pip("download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(house), *exact)
    # What asv installs into every environment beside the matrix (build, asv_runner, pympler, wheel), and
    # setuptools for `pip wheel`'s isolated build: the versions installed here, else pip's choice (none is torch).
    tools = []
    for name in ("build", "asv_runner", "pympler", "wheel", "setuptools"):
        try:
            tools.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            tools.append(name)
    _pip("download", "--quiet", "--only-binary=:all:", "-d", str(house), *tools)
    return house


def _scratch_repo(path: Path) -> tuple[str, str]:
    """A git repository of this work tree (``base``) and the planted slowdown (``slow``); their hashes."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, path / name)

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    base = git("rev-parse", "HEAD")
    matmul = path / "suites" / "workloads" / "matmul.py"
    text = matmul.read_text()
    assert text.count(_STEP) == 1, f"the planted slowdown expects one {_STEP!r} in suites/workloads/matmul.py"
    matmul.write_text(text.replace(_STEP, "; ".join([_STEP] * 4)))
    git("commit", "-q", "-am", "slow: four products per step")
    return base, git("rev-parse", "HEAD")


@pytest.mark.e2e  # pip downloads a wheelhouse, asv builds a virtualenv per commit: a minute
def test_virtualenv_config_builds_two_commits_offline_and_continuous_exits_1(tmp_path: Path, wheelhouse: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    base, slow = _scratch_repo(repo)
    config = _shipped()
    # Only where things go, and this Python's version, differ from the shipped file.
    config.update(
        repo=str(repo),
        benchmark_dir=str(repo / "benchmarks"),
        env_dir=str(tmp_path / "env"),
        results_dir=str(tmp_path / "results"),
        html_dir=str(tmp_path / "html"),
        pythons=[f"{sys.version_info.major}.{sys.version_info.minor}"],
    )
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps(config))
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        **_QUICK,
        "HOME": str(home),  # asv keeps machine descriptions in ~/.asv-machine.json
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheelhouse),
    }

    def asv(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asv", "--config", str(path), *args],
            capture_output=True,
            text=True,
            timeout=900,
            env=env,
            check=False,
        )

    machine = asv("machine", "--yes", "--machine", "testbox")
    assert machine.returncode == 0, machine.stdout + machine.stderr
    done = asv("continuous", "--factor", "1.1", "--machine", "testbox", "-b", BENCH, base, slow)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "PERFORMANCE DECREASED" in output, output
    assert f"workloads.{BENCH}.track_step_seconds" in output, output
    # Both commits were built, installed and measured in the virtualenv (asv run's results, one file each).
    recorded = sorted(p.name[:8] for p in (tmp_path / "results" / "testbox").glob("*-virtualenv-*.json"))
    assert recorded == sorted([base[:8], slow[:8]]), output
