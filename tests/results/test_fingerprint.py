"""The fingerprint: what is collected (with stand-ins for CUDA and NVML), git state, and the comparability rule."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pytest_gpuperf._git import git_state
from pytest_gpuperf.results import collect, differences, parse_mismatch_keys
from pytest_gpuperf.results._comparable import MUST_MATCH, matching_view
from pytest_gpuperf.results._fingerprint import PRECISION_FLAGS
from tests.fake_nvml import FakeGpu, FakeNvml, cuda_props
from tests.fake_nvml import gpus as fake_gpus


def fake_torch(gpus: int = 2, props: list[Any] | None = None, **precision: Any) -> Any:
    """torch with ``gpus`` H100s (or the given device properties); ``precision`` adds torch >= 2.9's attributes."""
    devices = props if props is not None else [cuda_props(g) for g in fake_gpus(gpus)]
    cuda = SimpleNamespace(
        is_available=lambda: bool(devices),
        device_count=lambda: len(devices),
        get_device_properties=lambda i: devices[i],
    )
    backends = SimpleNamespace(
        cudnn=SimpleNamespace(
            is_available=lambda: True, version=lambda: 90100, allow_tf32=True, benchmark=False, deterministic=False
        ),
        cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False)),
        mkl=SimpleNamespace(is_available=lambda: False),
        mkldnn=SimpleNamespace(is_available=lambda: True),
        mps=SimpleNamespace(is_available=lambda: False),
    )
    if precision:
        backends.fp32_precision = precision.get("generic", "none")
        backends.cuda.matmul.fp32_precision = precision.get("matmul", "none")
        backends.cudnn.fp32_precision = "none"
        backends.cudnn.conv = SimpleNamespace(fp32_precision=precision.get("conv", "tf32"))
        backends.cudnn.rnn = SimpleNamespace(fp32_precision="tf32")
    return SimpleNamespace(
        __version__="2.13.0+cu124",
        version=SimpleNamespace(cuda="12.4", hip=None),
        backends=backends,
        cuda=cuda,
        get_num_threads=lambda: 16,
        get_num_interop_threads=lambda: 16,
        get_float32_matmul_precision=lambda: "highest",
        _C=SimpleNamespace(_cuda_getDriverVersion=lambda: 12040),
    )


NO_NVML = FakeNvml([], fail_init=True)


def test_collects_device_driver_cuda_cudnn_and_nvml_clocks() -> None:
    nvml = FakeNvml(fake_gpus(1))
    gpu = nvml.devices[0]
    gpu.sm_clock_mhz, gpu.power_mw, gpu.temperature_c, gpu.reasons = 1755, 612_000, 71, 0x4 | 0x20
    fp = collect(torch_module=fake_torch(props=[cuda_props(gpu)]), nvml_module=nvml)
    assert fp["torch"] == "2.13.0+cu124" and fp["torch_cuda"] == "12.4" and fp["cudnn"] == 90100
    assert fp["cuda_driver"] == "12.4" and fp["threads"] == 16
    assert fp["cuda_devices"][0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "capability": "9.0",
        "memory_bytes": 80 * 2**30,
        "multiprocessors": 132,
        "uuid": "00000000-1111-2222-3333-444444444444",
        "nvml_match": "uuid",
        "nvml_index": 0,
        "mig_mode": False,
    }
    (nvml_gpu,) = fp["nvml"]["gpus"]
    assert fp["nvml"]["driver"] == "580.159.04" and nvml.inits == nvml.shutdowns == 1
    assert nvml_gpu["sm_clock_mhz"] == 1755 and nvml_gpu["power_w"] == 612.0 and nvml_gpu["temperature_c"] == 71
    assert nvml_gpu["max_sm_clock_mhz"] == 1980 and nvml_gpu["power_limit_w"] == 700.0
    assert nvml_gpu["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert nvml_gpu["uuid"] == "GPU-00000000-1111-2222-3333-444444444444" and nvml_gpu["cuda_index"] == 0
    for key in ("python", "implementation", "platform", "machine", "hostname", "cpu_model", "cpu_count"):
        assert fp[key]


def test_nvml_devices_are_matched_to_cuda_devices_by_uuid_not_index() -> None:
    """CUDA_VISIBLE_DEVICES=3,1 on a machine of 4 GPUs (the second without MIG support), and a third CUDA
    device NVML cannot place."""
    nvml = FakeNvml(fake_gpus(4))
    nvml.devices[1].mig = None
    nvml.devices[3].mig = (1, 1)
    stranger = cuda_props(FakeGpu("GPU-99999999-0000-0000-0000-000000000000", (0, 42, 0)))
    props = [cuda_props(nvml.devices[3]), cuda_props(nvml.devices[1], uuid=False), stranger]
    fp = collect(torch_module=fake_torch(props=props), nvml_module=nvml)
    view = [(d["index"], d["nvml_index"], d["nvml_match"], d["mig_mode"]) for d in fp["cuda_devices"]]
    assert view == [(0, 3, "uuid", True), (1, 1, "pci bus id", None), (2, None, "unmatched", None)]
    assert [g["cuda_index"] for g in fp["nvml"]["gpus"]] == [None, 1, None, 0]


def test_without_nvml_or_driver_the_keys_are_absent() -> None:
    fp = collect(torch_module=fake_torch(gpus=0), nvml_module=NO_NVML)
    assert "nvml" not in fp and "cuda_devices" not in fp and "cuda_driver" not in fp


def refuses() -> str:
    raise RuntimeError("you have used mix of the legacy and new APIs to set the matmul precision")


def test_precision_flags_before_and_after_torch_2_9() -> None:
    legacy = collect(torch_module=fake_torch(gpus=0), nvml_module=NO_NVML)["precision"]
    assert list(legacy) == list(PRECISION_FLAGS), "every key, always (they are part of the results schema)"
    assert legacy["cuda.matmul.allow_tf32"] is False and legacy["cudnn.allow_tf32"] is True
    assert legacy["cudnn.benchmark"] is False and legacy["cudnn.deterministic"] is False
    assert legacy["float32_matmul_precision"] == "highest"
    assert legacy["cuda.matmul.fp32_precision"] is None and legacy["cudnn.conv.fp32_precision"] is None
    torch = fake_torch(gpus=0, matmul="tf32")
    torch.get_float32_matmul_precision = refuses  # torch 2.9 after mixing the legacy and the new API
    newer = collect(torch_module=torch, nvml_module=NO_NVML)["precision"]
    assert newer["cuda.matmul.fp32_precision"] == "tf32" and newer["cudnn.conv.fp32_precision"] == "tf32"
    assert newer["cudnn.rnn.fp32_precision"] == "tf32" and newer["fp32_precision"] == "none"
    assert newer["float32_matmul_precision"] is None


def test_allocator_and_nccl_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("NCCLX", "not nccl's")
    env = collect(torch_module=fake_torch(gpus=0), nvml_module=NO_NVML)["env"]
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True" and env["NCCL_DEBUG"] == "INFO"
    assert "NCCLX" not in env


def test_this_machine(tmp_path: Path) -> None:
    fp = collect(tmp_path)
    assert fp["torch"] == torch.__version__ and fp["threads"] == torch.get_num_threads()
    assert fp["git"] == {}  # tmp_path is not a git work tree


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


# ---------------------------------------------------------------- clocks, MIG, precision flags and environment

GPU_BASE: dict[str, Any] = {
    **BASE,
    "cuda_devices": [{**BASE["cuda_devices"][0], "mig_mode": False, "nvml_index": 5, "nvml_match": "uuid"}],
    "nvml": {
        "driver": "580.159.04",
        "gpus": [
            {"index": 4, "cuda_index": None, "max_sm_clock_mhz": 1755, "throttle_reasons": ["hw_slowdown"]},
            {"index": 5, "cuda_index": 0, "max_sm_clock_mhz": 1980, "throttle_reasons": ["gpu_idle"]},
        ],
    },
    "precision": {"cuda.matmul.allow_tf32": False, "cudnn.benchmark": False, "cuda.matmul.fp32_precision": None},
    "env": {"NCCL_DEBUG": "INFO"},
}


def changed(**changes: Any) -> dict[str, Any]:
    head = copy.deepcopy(GPU_BASE)
    for path, value in changes.items():
        *parents, last = path.split("__")
        target: Any = head
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[last] = value
    return head


def test_precision_flags_and_mig_mode_block_like_hardware() -> None:
    (diff,) = differences(GPU_BASE, changed(**{"precision__cudnn.benchmark": True}))
    assert diff.key == "precision" and diff.blocking and "precision" in MUST_MATCH
    (diff,) = differences(GPU_BASE, changed(**{"precision__cuda.matmul.allow_tf32": True}))
    assert str(diff) == "torch precision flags cuda.matmul.allow_tf32=False -> cuda.matmul.allow_tf32=True"
    (diff,) = differences(GPU_BASE, changed(cuda_devices__0__mig_mode=True))
    assert (diff.key, diff.blocking, str(diff)) == ("mig", True, "GPU MIG mode off -> on")
    assert not [d for d in differences(GPU_BASE, changed(cuda_devices__0__mig_mode=True), allow=["mig"]) if d.blocking]
    assert parse_mismatch_keys("precision,mig") == ("precision", "mig")


def test_a_flag_only_one_torch_records_is_no_difference() -> None:
    """torch 2.9 added the fp32_precision flags: a run of torch 2.8 lacks them (None: unreadable, left out)."""
    newer = changed(**{"precision__cuda.matmul.fp32_precision": "tf32", "precision__cudnn.conv.fp32_precision": "tf32"})
    assert differences(GPU_BASE, newer) == []


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"nvml__gpus__1__max_sm_clock_mhz": 1755}, "max SM clock (MHz) 1980 -> 1755"),
        (
            {"nvml__gpus__1__throttle_reasons": ["sw_thermal_slowdown"]},
            "GPU throttle reasons none -> sw_thermal_slowdown",
        ),
        (
            {"env": {"NCCL_DEBUG": "WARN", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}},
            "environment NCCL_DEBUG=INFO -> NCCL_DEBUG=WARN, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        ),
    ],
)
def test_clocks_throttling_and_environment_are_shown_not_blocking(change: dict[str, Any], shown: str) -> None:
    diffs = differences(GPU_BASE, changed(**change))
    assert [str(d) for d in diffs] == [shown] and not diffs[0].blocking


def test_the_other_gpus_and_the_idle_state_are_no_difference() -> None:
    """Only the CUDA devices' NVML entries count, and gpu_idle and the power cap are states, not throttles."""
    assert differences(GPU_BASE, changed(nvml__gpus__0__max_sm_clock_mhz=1410)) == []
    assert differences(GPU_BASE, changed(nvml__gpus__1__throttle_reasons=[])) == []
    assert differences(GPU_BASE, changed(nvml__gpus__1__throttle_reasons=["sw_power_cap"])) == []
    (locked,) = differences(GPU_BASE, changed(nvml__gpus__1__throttle_reasons=["applications_clocks_setting"]))
    assert str(locked) == "GPU throttle reasons none -> applications_clocks_setting" and not locked.blocking


@pytest.mark.parametrize("unsupported", ["power", "power_limit", "max_clock", "mig", "name", "clock", "reasons"])
def test_each_nvml_fact_fails_alone(unsupported: str) -> None:
    """Power on a vGPU, a MIG query, a field a driver lacks: on main one unsupported call in a GPU's facts lost the
    whole NVML part of the fingerprint (driver and every GPU); now that fact alone is None."""
    nvml = FakeNvml(fake_gpus(2), failing=frozenset({unsupported}))
    fp = collect(torch_module=fake_torch(props=[cuda_props(nvml.devices[1])]), nvml_module=nvml)
    assert fp["nvml"] is not None and fp["nvml"]["driver"] == "580.159.04" and len(fp["nvml"]["gpus"]) == 2
    gpu = fp["nvml"]["gpus"][1]
    lost = {key for key, value in gpu.items() if value is None and key != "cuda_index"}
    expected = {
        "power": {"power_w"},
        "power_limit": {"power_limit_w"},
        "max_clock": {"max_sm_clock_mhz"},
        "mig": {"mig_mode"},
        "name": {"name"},
        "clock": {"sm_clock_mhz", "mem_clock_mhz"},
        "reasons": {"throttle_reasons"},
    }
    assert lost == expected[unsupported]
    assert gpu["cuda_index"] == 0 and fp["cuda_devices"][0]["nvml_index"] == 1


def test_facts_one_run_did_not_record_are_no_difference() -> None:
    """Files from before these keys, or a run without NVML, compare as before."""
    old = {**BASE, "cuda_devices": [dict(BASE["cuda_devices"][0])], "nvml": {"driver": "580.159.04"}}
    assert differences(old, GPU_BASE) == [] and differences(GPU_BASE, old) == []
    view = matching_view(old)
    assert view["mig"] is None and view["precision"] is None and view["max_sm_clock"] is None
