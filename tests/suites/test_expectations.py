"""The suites' expectations file: shipped floors matched to device names, and the file chosen by environment."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_gpuperf.measuring import Expectations, resolve_size
from suites.support import EXPECTATIONS_ENV, expectations

SHIPPED = Path(__file__).parents[2] / "suites" / "expectations.json"


@pytest.mark.parametrize(
    ("device_name", "key"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A10G", None),  # a different product: no whole-word match
        ("NVIDIA H100 80GB HBM3", "H100 80GB HBM3"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-16GB", "V100-SXM2"),
        ("Tesla V100S-PCIE-32GB", "V100S"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA GeForce RTX 4090", None),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", None),  # a slice: the full GPU's floor does not apply
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", None),
        ("Intel(R) Xeon(R) Processor", None),
    ],
)
def test_shipped_floors_match_device_names_by_whole_words_longest_first(device_name: str, key: str | None) -> None:
    floors = Expectations.load(SHIPPED).for_device(device_name)
    assert (floors.key if floors else None) == key


def test_a_mig_slice_gets_no_floor_and_says_why() -> None:
    why = Expectations.why_none("NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    assert why is not None and "is a MIG slice" in why and "no floor is asserted" in why
    assert Expectations.why_none("NVIDIA H100 80GB HBM3") is None
    assert Expectations.why_none("Migration GPU") is None  # a whole word only


def test_auto_size_follows_the_device_memory() -> None:
    gib = 1 << 30

    def gpu(memory: int) -> Any:
        return SimpleNamespace(describe=lambda: {"memory_bytes": memory})

    assert resolve_size("auto", "cuda", gpu(80 * gib)) == "large"
    assert resolve_size("auto", "cuda", gpu(16 * gib)) == "medium"  # a 10-16 GB GPU or a MIG slice
    assert resolve_size("auto", "cuda") == "medium"  # memory not known
    assert resolve_size("auto", "cpu", gpu(80 * gib)) == "small"
    assert resolve_size("large", "cuda", gpu(10 * gib)) == "large"  # asked for: as asked


def test_a_floor_is_the_stated_fraction_of_the_datasheet_figure() -> None:
    shipped = Expectations.load(SHIPPED)
    a100 = shipped.for_device("NVIDIA A100-SXM4-40GB")
    assert a100 is not None and "datasheet" in a100.source.lower()
    floor = a100.floor("matmul_float16")
    assert floor is not None and floor.unit == "FLOP/s"
    assert floor.value == pytest.approx(312e12 * shipped.fraction)
    assert a100.floor("matmul_int8") is None
    assert 0 < shipped.fraction <= 0.5, "floors, not targets"
    data = json.loads(SHIPPED.read_text())
    assert "FLOORS" in data["about"] and "No figure here was measured" in data["about"]


def test_every_shipped_device_has_a_source_and_only_matmul_figures() -> None:
    for entry in Expectations.load(SHIPPED).devices.values():
        assert entry.source
        assert set(entry.datasheet) <= {"matmul_float32", "matmul_tf32", "matmul_float16", "matmul_bfloat16"}


def test_environment_variable_points_at_another_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine.json"
    mine.write_text(
        json.dumps(
            {
                "schema": "pytest-gpuperf/expectations",
                "version": 1,
                "floor_fraction": 0.5,
                "devices": {"Lab GPU": {"source": "our lab", "datasheet": {"matmul_float32": "10 TFLOP/s"}}},
            }
        )
    )
    monkeypatch.setenv(EXPECTATIONS_ENV, str(mine))
    loaded = expectations()
    assert loaded.path == mine
    lab = loaded.for_device("ACME Lab GPU rev 2")
    assert lab is not None
    floor = lab.floor("matmul_float32")
    assert floor is not None and floor.value == pytest.approx(5e12)


def _gpuperf(kind: str, name: str) -> Any:
    backend = SimpleNamespace(describe=lambda: {"name": name})
    return SimpleNamespace(slot=SimpleNamespace(kind=kind, id=f"{kind}:0"), backend=backend)


def test_the_datasheet_peak_is_the_percent_of_peak_ceiling_of_a_known_cuda_device() -> None:
    from suites.conftest import datasheet_peak

    found = datasheet_peak(_gpuperf("cuda", "NVIDIA H100 80GB HBM3"), "bfloat16")
    assert found is not None
    value, how = found
    assert value == pytest.approx(989e12)  # the file lists the dense figure
    assert how.startswith("H100 80GB HBM3 datasheet: matmul_bfloat16 989 TFLOP/s dense")
    assert datasheet_peak(_gpuperf("cuda", "NVIDIA A10G"), "bfloat16") is None, "not in the file"
    assert datasheet_peak(_gpuperf("cuda", "NVIDIA H100 80GB HBM3 MIG 1g.10gb"), "bfloat16") is None
    assert datasheet_peak(_gpuperf("cpu", "NVIDIA H100 80GB HBM3"), "bfloat16") is None, "CPUs have none"
