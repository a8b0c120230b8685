"""The fingerprint: what is collected (with stand-ins for CUDA and NVML), git state, and the comparability rule."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pytest_gpuperf._git import git_state
from pytest_gpuperf.results import MUST_MATCH, collect, differences, throttle_names
from pytest_gpuperf.results._comparable import matching_view


def fake_torch(gpus: int = 2) -> Any:
    props = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=80 * 2**30)
    props.multi_processor_count = 132
    cuda = SimpleNamespace(
        is_available=lambda: gpus > 0,
        device_count=lambda: gpus,
        get_device_properties=lambda i: props,
    )
    backends = SimpleNamespace(
        cudnn=SimpleNamespace(is_available=lambda: True, version=lambda: 90100),
        mkl=SimpleNamespace(is_available=lambda: False),
        mkldnn=SimpleNamespace(is_available=lambda: True),
        mps=SimpleNamespace(is_available=lambda: False),
    )
    return SimpleNamespace(
        __version__="2.13.0+cu124",
        version=SimpleNamespace(cuda="12.4", hip=None),
        backends=backends,
        cuda=cuda,
        get_num_threads=lambda: 16,
        get_num_interop_threads=lambda: 16,
        _C=SimpleNamespace(_cuda_getDriverVersion=lambda: 12040),
    )


class FakeNvml:
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init = fail_init
        self.shut = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetClockInfo(self, h: int, which: int) -> int:
        return 1755 if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetMaxClockInfo(self, h: int, which: int) -> int:
        return 1980

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return 612_000

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return 700_000

    def nvmlDeviceGetTemperature(self, h: int, which: int) -> int:
        return 71

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return 0x4 | 0x20


def test_collects_device_driver_cuda_cudnn_and_nvml_clocks() -> None:
    nvml = FakeNvml()
    fp = collect(torch_module=fake_torch(), nvml_module=nvml)
    assert fp["torch"] == "2.13.0+cu124" and fp["torch_cuda"] == "12.4" and fp["cudnn"] == 90100
    assert fp["cuda_driver"] == "12.4" and fp["threads"] == 16
    assert fp["cuda_devices"][1] == {
        "index": 1,
        "name": "NVIDIA H100 80GB HBM3",
        "capability": "9.0",
        "memory_bytes": 80 * 2**30,
        "multiprocessors": 132,
    }
    (gpu,) = fp["nvml"]["gpus"]
    assert fp["nvml"]["driver"] == "550.54.15" and nvml.shut
    assert gpu["sm_clock_mhz"] == 1755 and gpu["power_w"] == 612.0 and gpu["temperature_c"] == 71
    assert gpu["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    for key in ("python", "implementation", "platform", "machine", "hostname", "cpu_model", "cpu_count"):
        assert fp[key]


def test_without_nvml_or_driver_the_keys_are_absent() -> None:
    fp = collect(torch_module=fake_torch(gpus=0), nvml_module=FakeNvml(fail_init=True))
    assert "nvml" not in fp and "cuda_devices" not in fp and "cuda_driver" not in fp


def test_this_machine(tmp_path: Path) -> None:
    fp = collect(tmp_path)
    assert fp["torch"] == torch.__version__ and fp["threads"] == torch.get_num_threads()
    assert fp["git"] == {}  # tmp_path is not a git work tree


def test_throttle_names_keep_unknown_bits() -> None:
    assert throttle_names(0) == []
    assert throttle_names(0x1 | 0x8 | 0x10000) == ["gpu_idle", "hw_slowdown", "0x10000"]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_git_commit_dirty_and_a_hash_of_the_uncommitted_diff(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x")
    (tmp_path / "f.py").write_text("x = 1\n")
    git(tmp_path, "add", "f.py")
    git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "f")
    clean = git_state(tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False and "diff_sha" not in clean
    (tmp_path / "f.py").write_text("x = 2\n")
    first = git_state(tmp_path)
    (tmp_path / "f.py").write_text("x = 3\n")
    second = git_state(tmp_path)
    assert first["dirty"] and second["dirty"] and first["diff_sha"] != second["diff_sha"]


# ---------------------------------------------------------------- the rule


BASE: dict[str, Any] = {
    "machine": "x86_64",
    "cpu_model": "AMD EPYC 9R14",
    "cpu_count": 2,
    "torch": "2.13.0+cu124",
    "torch_cuda": "12.4",
    "implementation": "cpython",
    "python": "3.11.9",
    "hostname": "a",
    "cuda_devices": [{"name": "NVIDIA H100", "capability": "9.0", "memory_bytes": 80 * 2**30}],
    "git": {"commit": "a" * 40, "dirty": False},
}


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"cpu_model": "Intel Xeon 8480"}, "cpu_model"),
        ({"cpu_count": 4}, "cpu_count"),
        ({"torch": "2.12.0+cu124"}, "torch_minor"),
        ({"torch_cuda": "11.8"}, "cuda"),
        ({"cuda_devices": [{"name": "NVIDIA A100", "capability": "8.0", "memory_bytes": 40 * 2**30}]}, "gpus"),
        ({"machine": "aarch64"}, "machine"),
    ],
)
def test_other_hardware_or_torch_minor_blocks(change: dict[str, Any], key: str) -> None:
    head = {**BASE, **change}
    (diff,) = [d for d in differences(BASE, head) if d.blocking]
    assert diff.key == key and key in MUST_MATCH
    assert not any(d.blocking for d in differences(BASE, head, allow=[key]))
    assert not any(d.blocking for d in differences(BASE, head, allow=["all"]))


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"hostname": "b"}, "host a -> b"),
        ({"python": "3.12.1"}, "Python 3.11.9 -> 3.12.1"),
        ({"torch": "2.13.1+cu124"}, "torch 2.13.0+cu124 -> 2.13.1+cu124"),
        ({"git": {"commit": "b" * 40, "dirty": True}}, "git commit aaaaaaaaaa -> bbbbbbbbbb"),
    ],
)
def test_other_host_python_patch_release_or_commit_is_only_shown(change: dict[str, Any], shown: str) -> None:
    diffs = differences(BASE, {**BASE, **change})
    assert diffs and not any(d.blocking for d in diffs)
    assert shown in [str(d) for d in diffs]


def test_gpu_list_reads_as_models() -> None:
    assert matching_view(BASE)["gpus"] == ("NVIDIA H100 (sm 9.0, 80 GiB)",)
