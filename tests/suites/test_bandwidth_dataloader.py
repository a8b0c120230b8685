"""The bandwidth and data-loading suites: each assertion can fail, the notes say what is not asserted, the
loader never ends an epoch inside a timed block. CUDA paths through stand-ins (no GPU here)."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch

from pytest_gpuperf import Check, Gpuperf, Paired
from pytest_gpuperf.measuring import Expectations, ModeUnsupported
from pytest_gpuperf.measuring._backends import CudaBackend, block_timer
from pytest_gpuperf.measuring._expectations import ExpectationsError
from suites.conftest import BandwidthOp
from suites.dataloading import SyntheticDataset, _Forever, dataloader_steps, dataloader_unsupported
from suites.support import expectations
from suites.test_bandwidth import FRACTION_OF_REFERENCE, judge
from suites.test_dataloader import PINNED_AT_LEAST, bound_note, judge_pinned
from tests.measuring.fake_gpu import FakeGpu

REPO = Path(__file__).parents[2]
FAST = ("--gpuperf-min-time=0.01", "--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.05")


def _gpuperf(notes: list[str], checks: list[Check] | None = None) -> Gpuperf:
    """What the judges use of the fixture: the slot's id, the inconclusive setting, notes, and ``gpuperf.expect``
    (the fixture's own), whose checks of a record land in ``checks``."""
    stand_in = SimpleNamespace(
        slot=SimpleNamespace(id="cuda:0"), settings=SimpleNamespace(measure=SimpleNamespace(inconclusive="warn"))
    )
    stand_in.note = notes.append
    stand_in._observer_of = lambda record: (checks if checks is not None else []).append
    stand_in.expect = functools.partial(Gpuperf.expect, cast(Gpuperf, stand_in))
    return cast(Gpuperf, stand_in)


def _rounds(seconds: dict[str, float], work: dict[str, dict[str, float]], rounds: int = 30) -> Paired:
    """Paired rounds whose per-call times are ``seconds`` with a little jitter."""
    jitter = [1 + 0.01 * ((i * 7) % 5 - 2) for i in range(rounds)]
    return Paired({name: [t * j for j in jitter] for name, t in seconds.items()}, work)


REFERENCE = BandwidthOp("d2d_copy", 64 << 20, 10e9)


def _fraction(this_seconds: float) -> Any:
    # Half the bytes of the reference: at the reference's B/s a call takes half its time.
    rounds = _rounds({"this": this_seconds, "reference": 1.0}, {"this": {"B": 1.0}, "reference": {"B": 2.0}})
    return rounds.throughput_ratio("this", "reference", "B")


def test_the_reference_op_at_half_size_fails_below_half_the_reference_bandwidth() -> None:
    notes: list[str] = []
    checks: list[Check] = []
    judge(_gpuperf(notes, checks), "d2d_copy", REFERENCE, _fraction(0.5), "bytes=1")  # the same B/s: fraction 1
    assert [c.outcome for c in checks] == ["pass"]
    with pytest.raises(AssertionError, match=r"at least 0\.5"):
        # A third of the reference's B/s, below FRACTION_OF_REFERENCE.
        judge(_gpuperf(notes, checks), "d2d_copy", REFERENCE, _fraction(1.5), "bytes=1")
    assert FRACTION_OF_REFERENCE > 1 / 3


def test_the_other_op_is_noted_with_the_reason_and_never_fails() -> None:
    notes: list[str] = []
    judge(_gpuperf(notes), "axpy", REFERENCE, _fraction(5.0), "bytes=1")  # 10% of the reference
    (note,) = notes
    assert "10%" in note and "not asserted" in note and "depends on the device" in note


def test_pinned_dataloading_fails_when_slower_than_pageable() -> None:
    work = {"pinned": {"samples": 128.0}, "pageable": {"samples": 128.0}}
    checks: list[Check] = []
    notes: list[str] = []
    equal = _rounds({"pinned": 1.0, "pageable": 1.0}, work).throughput_ratio("pinned", "pageable", "samples")
    assert judge_pinned(_gpuperf(notes, checks), equal).outcome == "pass"
    slower = _rounds({"pinned": 1.0 / PINNED_AT_LEAST * 1.1, "pageable": 1.0}, work)
    with pytest.raises(AssertionError, match=r"at least 0\.95"):
        judge_pinned(_gpuperf(notes, checks), slower.throughput_ratio("pinned", "pageable", "samples"))


def test_pinned_copies_fail_when_slower_than_pageable() -> None:
    """test_copy.py's judgement (both directions): the paired B/s ratio pinned/pageable at least 1."""
    work = {"pinned": {"B": 1.0}, "pageable": {"B": 1.0}}
    notes: list[str] = []
    checks: list[Check] = []
    faster = _rounds({"pinned": 0.5, "pageable": 1.0}, work).throughput_ratio("pinned", "pageable", "B")
    assert _gpuperf(notes, checks).expect(faster, at_least=1.0, record="pinned").outcome == "pass"
    slower = _rounds({"pinned": 1.2, "pageable": 1.0}, work).throughput_ratio("pinned", "pageable", "B")
    with pytest.raises(AssertionError, match=r"at least 1"):
        _gpuperf(notes, checks).expect(slower, at_least=1.0, record="pinned")
    assert [c.outcome for c in checks] == ["pass", "fail"]


def test_the_bound_is_the_slower_of_the_loader_and_the_step() -> None:
    work = {name: {"samples": 128.0} for name in ("end_to_end", "loader", "step")}
    for loader, bound in ((2.0, "loading"), (0.5, "compute")):
        seconds = {"end_to_end": 3.0, "loader": loader, "step": 1.0}
        # The note reads each step's samples/s from its Measurement: stand-ins with that one method.
        measurements = {
            name: SimpleNamespace(throughput=lambda unit, t=t: SimpleNamespace(value=128.0 / t))
            for name, t in seconds.items()
        }
        rounds = Paired(_rounds(seconds, work).times, work, measurements=cast(Any, measurements))
        note = bound_note(rounds, "num_workers=2")
        assert note.startswith(f"num_workers=2: {bound} bounds the step") and "not asserted" in note


def test_the_bandwidth_block_of_the_expectations_gives_60_percent_floors_and_none_on_mig() -> None:
    table = expectations("bandwidth")
    assert table.fraction == 0.6
    for name, datasheet in (
        ("NVIDIA H100 80GB HBM3", 3.35e12),
        ("NVIDIA H100 PCIe", 2.0e12),
        ("NVIDIA H200", 4.8e12),
        ("NVIDIA A100-SXM4-40GB", 1.555e12),
        ("NVIDIA L4", 300e9),
    ):
        floors = table.for_device(name)
        assert floors is not None, name
        floor = floors.floor("bandwidth_d2d_copy")
        assert floor is not None and floor.unit == "B/s" and floor.value == pytest.approx(0.6 * datasheet), name
    assert table.for_device("NVIDIA H100 80GB HBM3 MIG 1g.10gb") is None
    assert table.for_device("NVIDIA A10G") is None
    for floors in table.devices.values():
        assert floors.source and set(floors.datasheet) == {"bandwidth_d2d_copy"}


def test_a_file_without_the_block_says_so(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_text('{"schema": "pytest-gpuperf/expectations", "version": 1, "floor_fraction": 0.25, "devices": {}}')
    with pytest.raises(ExpectationsError, match="no block 'bandwidth'"):
        Expectations.load(path, "bandwidth")


DATASHEET_TEST = """
from suites.test_bandwidth import hold_to_datasheet
from suites.workloads import bandwidth_step

def test_floor(gpuperf, device_name):
    step = bandwidth_step(gpuperf.device, "d2d_copy", 1 << 20)
    gpuperf.measure(step.fn, work=step.work, name="copy", params=step.params)
    hold_to_datasheet(gpuperf, device_name)
"""


@pytest.mark.parametrize(
    ("device_name", "outcome", "said"),
    [
        ("NVIDIA H100 80GB HBM3", "failed", "d2d_copy floor: 60% of the datasheet's 3.35 TB/s"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "passed", "is a MIG slice"),
        ("NVIDIA A10G", "passed", "no datasheet bandwidth for 'NVIDIA A10G'"),
    ],
)
def test_the_datasheet_floor_fails_a_slow_copy_and_is_not_applied_to_mig_or_unknown_gpus(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, device_name: str, outcome: str, said: str
) -> None:
    # A CPU copy of 1 MiB stands in for a GPU's: far below 60% of any GPU's datasheet bandwidth.
    monkeypatch.syspath_prepend(str(REPO))
    pytester.makeconftest(f"import pytest\n@pytest.fixture\ndef device_name():\n    return {device_name!r}\n")
    pytester.makepyfile(test_floor=DATASHEET_TEST)
    result = pytester.runpytest("--gpuperf-device=cpu", "--gpuperf-memory=off", "-p", "no:randomly", *FAST)
    result.assert_outcomes(**{outcome: 1})
    result.stdout.fnmatch_lines([f"*{said}*"])


def test_the_sampler_never_ends_an_epoch_and_the_labels_are_learnable() -> None:
    assert list(itertools.islice(_Forever(3), 7)) == [0, 1, 2, 0, 1, 2, 0]
    dataset = SyntheticDataset(64, 32)
    x, y = dataset[5]
    assert x.dtype == torch.float32 and float(x.min()) >= -0.5 and float(x.max()) <= 0.5
    assert 0 <= int(y) < 10 and len(dataset) == 64


def test_pinned_loading_needs_cuda_and_says_why() -> None:
    assert dataloader_unsupported(torch.device("cpu"), pinned=False) is None
    why = dataloader_unsupported(torch.device("cpu"), pinned=True)
    assert why is not None and "CUDA" in why


def test_the_three_steps_share_the_loader_and_run_past_the_dataset_end_with_workers() -> None:
    steps = dataloader_steps(torch.device("cpu"), "small", workers=2, pinned=False)
    assert set(steps) == {"end_to_end", "loader", "step"}
    for _ in range(12):  # 8 batches of samples: past the end of the dataset, without a new iterator
        steps["end_to_end"].fn()
        steps["loader"].fn()
    check = steps["end_to_end"].check
    assert check is not None
    check()
    assert steps["step"].work["FLOP"] > 0 and steps["loader"].params["num_workers"] == 2


def test_graph_mode_refuses_the_dataloader_steps_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """A captured graph would replay one stale batch copy and drop the loading: the capture is refused, so the
    test is skipped with the reason (the stand-in GPU captures; the steps are built on the CPU)."""
    gpu = FakeGpu()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: gpu.capturing)
    steps = dataloader_steps(torch.device("cpu"), "small", workers=0, pinned=False)
    backend = CudaBackend(0, torch_module=gpu.torch(), clock=gpu.clock)
    for name in ("end_to_end", "loader"):
        with pytest.raises(ModeUnsupported, match="replay one stale batch copy and drop the host's loading"):
            block_timer(backend, steps[name].fn, "graph")
    steps["end_to_end"].fn()  # outside a capture it loads as ever
