"""The fingerprint's typed view: the stored JSON back byte for byte, defaults for keys older files lack, user
keys kept, and no reader of the package reading the stored form around it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_gpuperf
from pytest_gpuperf._jsonfile import lined
from pytest_gpuperf.results import (
    CudaDevice,
    Fingerprint,
    GitState,
    Nvml,
    NvmlGpu,
    Run,
    collect,
    differences,
    load_run,
    save_baseline_file,
    save_run,
)
from pytest_gpuperf.results._comparable import matching_view
from pytest_gpuperf.results._files import RUN_DEPTH
from pytest_gpuperf.results._pytest_benchmark import to_pytest_benchmark
from tests.fake_nvml import FakeNvml, cuda_props
from tests.fake_nvml import gpus as fake_gpus
from tests.results.test_fingerprint import NO_NVML, fake_torch
from tests.synthetic import FINGERPRINT, make_record, make_run


def stored(data: Any) -> str:
    """The bytes a results file holds for ``data`` (``_files.save_run``'s dump)."""
    return lined(data, RUN_DEPTH)


def round_trip(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` read as the view and written back, through JSON as a file would be."""
    return Fingerprint.from_dict(json.loads(stored(data))).to_dict()


def nvml_fingerprint() -> dict[str, Any]:
    """What collect() stores on 4 NVIDIA GPUs of which CUDA sees 2 (NVML's 3 and 1), with a throttled one."""
    nvml = FakeNvml(fake_gpus(4))
    nvml.devices[1].mig = None
    nvml.devices[3].reasons, nvml.devices[3].power_mw = 0x4 | 0x20, 612_345
    fp = collect(
        torch_module=fake_torch(props=[cuda_props(nvml.devices[3]), cuda_props(nvml.devices[1])]), nvml_module=nvml
    )
    assert fp["nvml"]["gpus"][3]["throttle_reasons"] and fp["cuda_devices"][1]["mig_mode"] is None
    return fp


#: A results file of schema 1 from before the precision flags, the environment and NVML (and without a GPU).
OLD: dict[str, Any] = {
    "python": "3.11.9",
    "implementation": "cpython",
    "platform": "Linux-6.1-x86_64",
    "machine": "x86_64",
    "hostname": "box-1",
    "cpu_model": "AMD EPYC 9R14",
    "cpu_count": 2,
    "torch": "2.13.0+cpu",
    "torch_cuda": None,
    "cudnn": None,
    "threads": 2,
    "interop_threads": 2,
    "mkl": True,
    "mkldnn": True,
    "mps": False,
    "git": {"commit": "a" * 40, "branch": "main", "dirty": True, "diff_sha": "1234abcd5678"},
}


# ---------------------------------------------------------------- the stored form back, byte for byte


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(nvml_fingerprint, id="nvml"),
        pytest.param(lambda: collect(torch_module=fake_torch(gpus=0, matmul="tf32"), nvml_module=NO_NVML), id="cpu"),
        pytest.param(lambda: dict(OLD), id="old-file"),
        pytest.param(lambda: dict(FINGERPRINT), id="synthetic"),
        pytest.param(lambda: {}, id="empty"),
    ],
)
def test_a_fingerprint_round_trips_to_the_same_bytes(make: Any) -> None:
    data = make()
    assert Fingerprint.from_dict(data).to_dict() == data
    assert stored(Fingerprint.from_dict(data).to_dict()) == stored(data), "the same keys, in the same order"
    assert stored(round_trip(data)) == stored(data)


def test_this_machines_fingerprint_round_trips() -> None:
    data = collect(Path(pytest_gpuperf.__file__).parent)  # real torch, and git state when run from a clone
    assert stored(round_trip(data)) == stored(data)
    assert Fingerprint.from_dict(data).torch == data["torch"]


def test_a_results_file_of_this_version_is_written_back_unchanged(tmp_path: Path) -> None:
    """A session's fingerprint (NVML, the hook's keys after collect's) saved, read and saved again: the same file,
    and the same again inside a baseline (which rewrites its older runs on every save)."""
    data = nvml_fingerprint()
    data["rack"] = "B7"
    data["cluster"] = {"name": "north", "nodes": [1, 2]}
    path = tmp_path / "run.json"
    save_run(path, make_run(make_record(1e-3), fingerprint=data))
    again = tmp_path / "again.json"
    save_run(again, load_run(path))
    assert again.read_bytes() == path.read_bytes()
    assert json.loads(path.read_text())["fingerprint"] == data
    baseline = tmp_path / "main.json"
    save_baseline_file(baseline, "main", [load_run(path)])
    assert json.loads(baseline.read_text())["runs"][0] == json.loads(path.read_text())


def test_a_pytest_benchmark_fingerprint_keeps_its_order_and_nulls() -> None:
    """What is read from pytest-benchmark's machine_info: ``source`` first, a null where it recorded nothing."""
    data: dict[str, Any] = {"source": "pytest-benchmark", "python": "3.12.1", "implementation": "cpython"}
    data["platform"] = None
    data |= {"machine": "x86_64", "hostname": None, "cpu_model": None, "cpu_count": 8, "git": {}}
    assert stored(round_trip(data)) == stored(data)
    run = make_run(make_record(1e-3), fingerprint=data)
    assert to_pytest_benchmark(run)["machine_info"]["gpuperf"] == data


def test_a_null_stays_and_an_absent_key_stays_absent() -> None:
    assert Fingerprint.from_dict({"cudnn": None}).to_dict() == {"cudnn": None}
    assert Fingerprint.from_dict({}).to_dict() == {}
    assert Fingerprint.from_dict({"git": {}}).to_dict() == {"git": {}}


# ---------------------------------------------------------------- typed fields and their defaults


def test_the_fields_of_a_collected_fingerprint() -> None:
    fp = Fingerprint.from_dict(nvml_fingerprint())
    assert fp.torch == "2.13.0+cu124" and fp.torch_cuda == "12.4" and fp.cudnn == 90100 and fp.threads == 16
    assert fp.cuda_driver == "12.4" and fp.precision is not None and fp.precision["cudnn.allow_tf32"] is True
    assert fp.cuda_devices is not None and fp.nvml is not None and fp.nvml.gpus is not None
    first, second = fp.cuda_devices
    assert first == CudaDevice(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        capability="9.0",
        memory_bytes=80 * 2**30,
        multiprocessors=132,
        uuid="00000003-1111-2222-3333-444444444444",
        nvml_match="uuid",
        nvml_index=3,
        mig_mode=False,
    )
    assert (second.nvml_index, second.mig_mode) == (1, None)
    gpu = fp.nvml.gpus[3]
    assert isinstance(gpu, NvmlGpu) and gpu.cuda_index == 0 and gpu.power_w == 612.345
    assert gpu.throttle_reasons == ("sw_power_cap", "sw_thermal_slowdown") and fp.nvml.driver == "580.159.04"
    assert [g.cuda_index for g in fp.nvml.gpus] == [None, 1, None, 0]


def test_keys_an_older_file_lacks_read_as_not_recorded() -> None:
    fp = Fingerprint.from_dict(OLD)
    assert fp.precision is None and fp.env is None and fp.nvml is None and fp.cuda_devices is None
    assert fp.source is None and fp.torch_hip is None and fp.cuda_driver is None and fp.extra == {}
    assert fp.git == GitState(commit="a" * 40, branch="main", dirty=True, diff_sha="1234abcd5678")
    empty = Fingerprint.from_dict({})
    assert empty.git is None and empty.torch is None and empty.cpu_count is None
    unrecorded = dataclasses.replace(make_run(), fingerprint=empty)
    assert unrecorded.git == GitState(), "Run.git: empty outside git and where not recorded"
    assert Fingerprint.from_dict({"nvml": {"driver": "580.159.04"}}).nvml == Nvml(driver="580.159.04")


def test_a_value_not_of_its_type_is_kept_as_written_and_reads_as_not_recorded() -> None:
    """A hook may overwrite a key the tool writes: the file keeps what it wrote, the readers see no fact."""
    data = {"threads": "many", "cpu_count": True, "git": "main", "cuda_devices": [{"name": "x"}, "y"]}
    fp = Fingerprint.from_dict(data)
    assert fp.threads is None and fp.cpu_count is None and fp.git is None and fp.cuda_devices is None
    assert fp.extra == data and fp.to_dict() == data


def test_user_keys_are_kept_and_readable() -> None:
    data = {**OLD, "rack": "B7", "git": {**OLD["git"], "ci_pipeline": 41}}
    data["cuda_devices"] = [{"name": "NVIDIA H100", "bus": "0000:01:00.0"}]
    fp = Fingerprint.from_dict(data)
    assert fp.extra == {"rack": "B7"} and fp.get("rack") == "B7" and fp["rack"] == "B7"
    assert fp.git is not None and fp.git.extra == {"ci_pipeline": 41}
    assert fp.cuda_devices is not None and fp.cuda_devices[0].extra == {"bus": "0000:01:00.0"}
    assert stored(fp.to_dict()) == stored(data)


def test_user_keys_take_no_part_in_the_comparison() -> None:
    """As documented for the hook: the rule neither uses nor shows keys a user adds."""
    assert differences(OLD, {**OLD, "rack": "B7"}) == []
    assert differences({**OLD, "rack": "A1"}, {**OLD, "rack": "B7"}) == []
    assert set(matching_view({**OLD, "rack": "B7"})) == set(matching_view(OLD))


def test_the_rule_reads_a_view_as_it_reads_its_stored_form() -> None:
    head = {**OLD, "cpu_model": "Intel Xeon 8480", "hostname": "box-2"}
    by_dict = [str(d) for d in differences(OLD, head)]
    assert by_dict == [str(d) for d in differences(Fingerprint.from_dict(OLD), Fingerprint.from_dict(head))]
    assert by_dict == ["CPU model AMD EPYC 9R14 -> Intel Xeon 8480", "host box-1 -> box-2"]


# ---------------------------------------------------------------- built in code, replaced, read as a mapping


def test_a_fingerprint_built_in_code_writes_its_recorded_fields_in_schema_order() -> None:
    fp = Fingerprint(
        torch="2.13.0+cu124",
        python="3.12.3",
        cuda_devices=(CudaDevice(name="NVIDIA H100", capability="9.0"),),
        git=GitState(commit="c" * 40, dirty=False),
        extra={"rack": "B7"},
    )
    assert stored(fp.to_dict()) == stored(
        {
            "python": "3.12.3",
            "torch": "2.13.0+cu124",
            "cuda_devices": [{"name": "NVIDIA H100", "capability": "9.0"}],
            "git": {"commit": "c" * 40, "dirty": False},
            "rack": "B7",
        }
    )


def test_a_replaced_field_is_written_where_the_key_was() -> None:
    fp = dataclasses.replace(Fingerprint.from_dict(OLD), hostname="box-9", env={"NCCL_DEBUG": "INFO"})
    data = fp.to_dict()
    assert list(data) == [*OLD, "env"] and data["hostname"] == "box-9" and data["env"] == {"NCCL_DEBUG": "INFO"}


def test_the_stored_form_stays_readable_as_a_mapping() -> None:
    """``Run.fingerprint`` was the stored dict: code that reads it so keeps working, and cannot change it."""
    fp = Fingerprint.from_dict(OLD)
    assert fp == OLD and dict(fp) == OLD and fp["git"]["dirty"] is True and "nvml" not in fp
    fp["git"]["dirty"] = False  # a copy: the view is frozen
    assert fp.git is not None and fp.git.dirty is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        fp.hostname = "box-2"  # type: ignore[misc]
    assert fp != {**OLD, "hostname": "box-2"} and not Fingerprint.from_dict({})


def test_a_run_holds_the_view_and_writes_the_stored_form() -> None:
    run = make_run(make_record(1e-3), fingerprint=OLD)
    assert isinstance(run.fingerprint, Fingerprint) and run.git.diff_sha == "1234abcd5678"
    assert stored(Run.from_dict(json.loads(stored(run.to_dict()))).to_dict()) == stored(run.to_dict())
    assert run.to_dict()["fingerprint"] == OLD


# ---------------------------------------------------------------- every reader goes through the view

PACKAGE = Path(pytest_gpuperf.__file__).parent
#: A raw read of the stored form: ``fingerprint.get(``, ``fp["torch"]``, ``run.git.get(``, ``nvml.get(`` ...
RAW_READ = re.compile(r"\b(fingerprint|fp|git|nvml|cuda_devices|precision)(\(\))?(\.get\(|\[)")


def test_no_module_reads_the_stored_fingerprint_around_the_view() -> None:
    raw = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_fingerprint.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if RAW_READ.search(line)
    ]
    assert raw == [], "read the fields of results.Fingerprint"
