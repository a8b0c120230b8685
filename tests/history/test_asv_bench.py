"""The asv route: benchmarks generated from suites/workloads/, checked and run by real asv in this checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_QUICK = {"GPUPERF_ASV_SETTINGS": "max_time=0.3 warmup_time=0.1 min_samples=5", "GPUPERF_ASV_DEVICE": "cpu"}


def _in_git() -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, check=False)
    return done.returncode == 0


needs_git = pytest.mark.skipif(not _in_git(), reason="needs this checkout to be a git work tree with a commit")


def _config(tmp_path: Path) -> Path:
    """The top-level asv.conf.json, with results and html in tmp_path instead of the checkout."""
    from asv.util import load_json

    data = load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    # asv publish graphs the commits of the configured branches: the one checked out here, so that a
    # commit not yet on main (a feature branch) is published too.
    branch = subprocess.run(
        ["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    if branch and branch != "HEAD":
        data["branches"] = [branch]
    data.update(
        repo=str(ROOT),
        benchmark_dir=str(ROOT / "benchmarks"),
        results_dir=str(tmp_path / "results"),
        html_dir=str(tmp_path / "html"),
    )
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps(data))
    return path


def _asv(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # HOME beside the config: asv keeps machine descriptions in ~/.asv-machine.json.
    home = config.parent / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "asv", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HOME": str(home), **(env or {})},
        check=False,
    )


@pytest.mark.e2e  # asv itself, end to end: its own processes
def test_asv_check_finds_no_problems(tmp_path: Path) -> None:
    done = _asv(_config(tmp_path), "check", env=_QUICK)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No problems found" in done.stdout


def test_every_workload_becomes_one_benchmark_with_a_fixed_version() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks._generate import benchmark_classes, load_workloads
    finally:
        sys.path.remove(str(ROOT))
    workloads = load_workloads()
    classes = benchmark_classes(workloads, {"GPUPERF_ASV_DEVICE": "cpu"})
    assert sorted(classes) == sorted(workloads)
    for name, cls in classes.items():
        attrs = dict(vars(cls))
        assert attrs["unit"] == "seconds"
        assert attrs["version"] == f"gpuperf-asv-1 {name} size=auto"  # not a hash of code: comments keep history
        assert attrs["params"] == [["cpu"]] and attrs["param_names"] == ["device"]
    sized = benchmark_classes(workloads, {"GPUPERF_ASV_DEVICE": "cpu", "GPUPERF_ASV_SIZE": "medium"})
    assert all("size=medium" in vars(c)["version"] for c in sized.values())


@pytest.mark.parametrize("layout", ["suites/workloads/__init__.py", "suites/workloads.py"])
def test_the_suites_of_the_commit_asv_checked_out_are_imported_as_a_package_or_one_module(
    tmp_path: Path, layout: str
) -> None:
    """asv's virtualenv route measures older commits too: before the package, suites.workloads was one module."""
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks._generate import suites_root
    finally:
        sys.path.remove(str(ROOT))
    project = tmp_path / "project"
    assert suites_root({"ASV_ENV_DIR": str(tmp_path)}) == ROOT, "no suites in the environment: this checkout's"
    (project / layout).parent.mkdir(parents=True)
    (project / layout).write_text("WORKLOADS = {}\n")
    assert suites_root({"ASV_ENV_DIR": str(tmp_path)}) == project


def test_bad_settings_name_the_variable() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks._generate import settings_from
    finally:
        sys.path.remove(str(ROOT))
    with pytest.raises(ValueError, match=r"GPUPERF_ASV_SETTINGS item 'max_time' is not key=value"):
        settings_from("max_time")
    with pytest.raises(ValueError, match=r"GPUPERF_ASV_SETTINGS='target=5': .*target"):
        settings_from("target=5")


@needs_git
@pytest.mark.e2e  # asv itself, end to end: its own processes
def test_asv_run_records_the_sampler_samples_and_publishes(tmp_path: Path) -> None:
    config = _config(tmp_path)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    machine = _asv(config, "machine", "--yes", "--machine", "asvtest")
    assert machine.returncode == 0, machine.stderr
    run = _asv(
        config,
        "run",
        f"--set-commit-hash={commit}",
        "--machine=asvtest",
        "--record-samples",
        "--bench=matmul_float32",
        env=_QUICK,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (path,) = (tmp_path / "results" / "asvtest").glob(f"{commit[:8]}-existing-*.json")
    from asv.results import Results

    results = Results.load(str(path))
    name = "workloads.matmul_float32.track_step_seconds"
    params = results.get_result_params(name)
    (value,) = results.get_result_value(name, params)
    (samples,) = results.get_result_samples(name, params)
    (stats,) = results.get_result_stats(name, params)
    assert 0 < stats["ci_99_a"] <= value <= stats["ci_99_b"]
    assert len(samples) == stats["repeat"] >= 5  # the sampler's samples, not asv's own timer
    published = _asv(config, "publish")
    assert published.returncode == 0, published.stdout + published.stderr
    assert list((tmp_path / "html" / "graphs").rglob(f"{name}.json"))


def test_virtualenv_config_pins_torch_and_builds_commits() -> None:
    from asv.config import Config

    conf = Config.load(str(ROOT / "asv.virtualenv.conf.json"))
    assert conf.environment_type == "virtualenv"
    assert conf.matrix == {"req": {"torch": ["2.13.0"]}}
    # The project's wheel only: asv's default build resolves the unpinned torch of its dependencies.
    assert conf.build_command == ["python -m pip wheel --no-deps -w {build_cache_dir} {build_dir}"]
    assert conf.results_dir != Config.load(str(ROOT / "asv.conf.json")).results_dir
    existing = Config.load(str(ROOT / "asv.conf.json"))
    assert existing.environment_type == "existing" and existing.benchmark_dir == "benchmarks"
