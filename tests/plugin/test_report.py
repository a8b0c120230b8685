"""The report's "% peak" column and the speedup of each device against the first, from synthetic records."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence

import pytest

from pytest_gpuperf.measuring import ClockSummary
from pytest_gpuperf.measuring._clocks import CLOCKS, ClockReading
from pytest_gpuperf.plugin._summary import device_free_key, header_line, speedup_table, speedups
from pytest_gpuperf.results import (
    Ceiling,
    Record,
    ceilings,
    flag_legend,
    flags,
    peaks_of,
    percent_of_peak,
    results_table,
    short_test,
)
from tests.synthetic import make_measurement, make_run


def record(
    test: str,
    device: str,
    seconds: Sequence[float],
    work: Mapping[str, float],
    *,
    name: str | None = None,
    params: Mapping[str, str] | None = None,
) -> Record:
    nodeid = f"suites/test_x.py::{test}[{device}]"
    m = make_measurement(name or nodeid, seconds, device=device, device_name=f"{device} model", work=dict(work))
    return Record(test=nodeid, device=device, measurement=m, params=dict(params or {}))


def around(center: float, n: int = 21, spread: float = 0.01) -> list[float]:
    """``n`` samples evenly spread within +-``spread`` of ``center``, in a shuffled (trendless) order."""
    values = [center * (1 - spread + 2 * spread * i / (n - 1)) for i in range(n)]
    random.Random(n).shuffle(values)
    return values


CPU_MM = record("test_mm", "cpu", around(0.1), {"FLOP": 2e9}, params={"n": "1024"})
GPU_MM = record("test_mm", "cuda:0", around(0.001), {"FLOP": 2e9}, params={"n": "1024"})
CPU_MLP = record("test_mlp", "cpu", around(0.02), {"samples": 512, "FLOP": 1e9}, params={"batch": "512"})
GPU_MLP = record("test_mlp", "cuda:0", around(0.004), {"samples": 16384, "FLOP": 32e9}, params={"batch": "16384"})


def test_speedup_of_each_device_against_the_first_with_a_combined_ci() -> None:
    rows = {s.test: s for s in speedups([CPU_MM, GPU_MM, CPU_MLP, GPU_MLP], ["cpu", "cuda:0"])}
    mm = rows["test_mm"]
    assert (mm.base, mm.device, mm.unit) == ("cpu", "cuda:0", "FLOP/s")
    assert mm.value == pytest.approx(100.0)
    assert mm.low < 100.0 < mm.high
    assert mm.low == pytest.approx((2e9 / GPU_MM.measurement.ci.high) / (2e9 / CPU_MM.measurement.ci.low))
    assert mm.note == ""


def test_unlike_runs_are_compared_by_throughput_and_flagged() -> None:
    (mlp,) = speedups([CPU_MLP, GPU_MLP], ["cpu", "cuda:0"])
    # Different batches: times are not comparable, rates are; the first shared unit is used.
    assert mlp.unit == "samples/s"
    assert mlp.value == pytest.approx((16384 / 0.004) / (512 / 0.02))
    assert mlp.note == "unlike runs: batch 512 vs 16384"


def test_tests_on_one_device_only_and_a_single_device_give_no_rows() -> None:
    assert speedups([CPU_MM, GPU_MLP], ["cpu", "cuda:0"]) == []
    assert speedups([CPU_MM, GPU_MM], ["cpu"]) == []
    assert speedup_table([CPU_MM], ["cpu", "cuda:0"]) == ""


def test_the_first_requested_device_is_the_base_and_records_without_shared_work_compare_times() -> None:
    a = record("test_t", "cpu", around(0.2), {"FLOP": 1.0})
    b = record("test_t", "cuda:0", around(0.1), {"samples": 1.0})
    (row,) = speedups([a, b], ["cuda:0", "cpu"])
    assert (row.base, row.device, row.unit) == ("cuda:0", "cpu", "time")
    assert row.value == pytest.approx(0.5)


def test_speedup_table_text() -> None:
    text = speedup_table([CPU_MM, GPU_MM, CPU_MLP, GPU_MLP], ["cpu", "cuda:0"])
    lines = text.splitlines()
    assert lines[0].split() == ["test", "devices", "speedup", "CI", "(>=90%)", "compared", "note"]
    assert any(line.startswith("test_mm ") and "cuda:0 vs cpu" in line and "100x" in line for line in lines)
    assert any("unlike runs: batch 512 vs 16384" in line for line in lines)


def test_device_free_key_removes_the_device_parameter_only() -> None:
    assert device_free_key(CPU_MM) == "suites/test_x.py::test_mm"
    named = record("test_mm", "cuda:0", around(1.0), {"FLOP": 1.0}, name="float32")
    assert device_free_key(named) == "suites/test_x.py::test_mm::float32"
    both = Record(test="suites/t.py::test_amp[cuda:1-mlp]", device="cuda:1", measurement=named.measurement, params={})
    assert device_free_key(both).startswith("suites/t.py::test_amp[mlp]")


def test_percent_of_peak_column_appears_only_with_peaks() -> None:
    peaks = {"cpu": Ceiling(40e9, "mm")}
    assert percent_of_peak(CPU_MM, peaks) == "50%"
    assert percent_of_peak(GPU_MM, peaks) == "-"  # no peak for that device
    no_flop = record("test_copy", "cpu", around(0.1), {"B": 1e9})
    assert percent_of_peak(no_flop, peaks) == "-"
    with_peaks = results_table([CPU_MM, no_flop], peaks=peaks).splitlines()
    assert "% peak" in with_peaks[0] and with_peaks[0].index("throughput") < with_peaks[0].index("% peak")
    assert " 50% " in with_peaks[2]
    assert "% peak" not in results_table([CPU_MM]).splitlines()[0]


def test_throttled_samples_are_flagged_with_their_count() -> None:
    clocks = ClockSummary.of([reading(1980)] * 18 + [reading(1980, 0x8)] * 3, 1980)
    record = dataclasses.replace(GPU_MM, measurement=GPU_MM.measurement.with_reading(CLOCKS, clocks))
    assert flags(record) == "throttled 3/21"
    assert results_table([record]).splitlines()[2].endswith(" throttled")  # spelt out under the table
    assert flag_legend([record]) == ["flags in full:", "  test_mm: throttled 3/21"]
    powered = ClockSummary.of([reading(1980, 0x4)] * 21, 1980)  # power-capped at full clock: not throttled
    record = dataclasses.replace(GPU_MM, measurement=GPU_MM.measurement.with_reading(CLOCKS, powered))
    assert flags(record) == "" and flags(GPU_MM) == ""


def reading(sm: int, reasons: int = 0) -> ClockReading:
    return ClockReading(sm_clock_mhz=sm, mem_clock_mhz=2619, temperature_c=60, power_w=500.0, reasons=reasons)


def test_ids_with_colons_and_brackets_in_their_parameters_stay_whole() -> None:
    m = record("test_mm", "cpu", around(0.1), {"FLOP": 1.0}).measurement
    for test, short in (
        ("suites/t.py::test_mm[cpu-x::y-[2]]", "test_mm[x::y-[2]]"),
        ("t.py::TestX::test_y[cpu-a]", "TestX::test_y[a]"),
        ("t.py::TestX::TestInner::test_y[cpu]", "TestX::TestInner::test_y"),
        ("t.py::TestX::test_y", "TestX::test_y"),
    ):
        named = dataclasses.replace(m, name=test)
        assert short_test(Record(test=test, device="cpu", measurement=named, params={})) == short


def test_too_few_samples_show_no_interval_in_the_table() -> None:
    one = record("test_one", "cpu", [0.3002], {"FLOP": 1e9})
    five = record("test_five", "cpu", [0.3, 0.301, 0.302, 0.303, 0.304], {"FLOP": 1e9})
    six = record("test_six", "cpu", [0.3, 0.301, 0.302, 0.303, 0.304, 0.305], {"FLOP": 1e9})
    lines = results_table([one, five, six]).splitlines()
    assert "- (1 sample)" in lines[2] and "- (5 samples)" in lines[3] and "+-0.8%" in lines[4]
    assert "+-0.0%" not in "\n".join(lines)


def test_the_table_keeps_class_names(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_cls="""
class TestA:
    def test_y(self, gpuperf):
        gpuperf.measure(lambda: None, items=1)


class TestB:
    def test_y(self, gpuperf):
        gpuperf.measure(lambda: None, items=1)
"""
    )
    result = pytester.runpytest(
        "-p",
        "no:randomly",
        "--gpuperf-device=cpu",
        "--gpuperf-min-time=0.01",
        "--gpuperf-max-time=0.1",
        "--gpuperf-warmup-time=0.01",
        "--gpuperf-memory=off",
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["TestA::test_y *cpu*", "TestB::test_y *cpu*"])


def test_header_line_names_devices_threads_and_torch() -> None:
    from types import SimpleNamespace

    from pytest_gpuperf.measuring import DeviceSlot, MeasureSettings

    torch_module = SimpleNamespace(
        __version__="2.11.0+cu130",
        get_num_threads=lambda: 8,
        cuda=SimpleNamespace(get_device_name=lambda index: f"GPU{index}"),
    )
    slots = [
        DeviceSlot("cpu", "cpu", None, True),
        DeviceSlot("cuda:1", "cuda", 1, True),
        DeviceSlot("mps", "mps", None, False, "no MPS"),
    ]
    line = header_line(slots, MeasureSettings(), torch_module)
    assert line == "gpuperf: devices cpu (1 thread), cuda:1 GPU1, mps (absent); torch 2.11.0+cu130"
    torch_threads = MeasureSettings().with_values({"threads": "torch"})
    assert header_line(slots[:1], torch_threads, torch_module) == "gpuperf: devices cpu (8 threads); torch 2.11.0+cu130"


_HEADER_TESTS = """
def test_measures(gpuperf):
    gpuperf.measure(lambda: None, items=1)


def test_plain():
    pass
"""


def test_the_header_line_shows_when_a_test_measures_and_not_under_q(pytester: pytest.Pytester) -> None:
    import torch

    pytester.makepyfile(test_h=_HEADER_TESTS)
    args = ("-p", "no:randomly", "--gpuperf-device=cpu", "--gpuperf-min-time=0.01", "--gpuperf-max-time=0.1")
    line = f"gpuperf: devices cpu (1 thread); torch {torch.__version__}"
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["collected 2 items", line])
    for quiet in (["-q"], ["--no-header"], ["-k", "plain"]):
        assert line not in pytester.runpytest(*args, *quiet).stdout.str(), quiet


# ---------------------------------------------------------------- "% peak" is a fraction of a ceiling (issue 21, 10)

#: A CPU run of the matmul suite: the reference peak is one paired measurement at n=1024 (100 GFLOP/s), and a
#: smaller bfloat16 matmul, whose operands fit the caches, ran at 106 GFLOP/s.
PEAK_ROW = record("test_matmul_peak", "cpu", around(2e9 / 100e9), {"FLOP": 2e9}, name="bfloat16")
HALF_ROW = record("test_matmul[bfloat16-half]", "cpu", around(2.5e8 / 106e9), {"FLOP": 2.5e8}, name="n=512")


def test_no_row_exceeds_a_measured_ceiling_and_the_line_names_the_best_row() -> None:
    # On main the column was each row against the reference peak alone: the half-size row read 106%.
    offered = {"cpu": Ceiling(100e9, "matmul bfloat16 n=1024, 100 GFLOP/s median")}
    peaks = ceilings([PEAK_ROW, HALF_ROW], offered)
    assert percent_of_peak(HALF_ROW, peaks) == "100%"
    assert percent_of_peak(PEAK_ROW, peaks) == "94%"
    assert peaks["cpu"].line("cpu") == (
        "% peak: of cpu's reference peak, the best FLOP/s measured in this run: "
        "test_matmul[bfloat16-half][cpu]::n=512, 106 GFLOP/s median"
    )
    # The reference peak stays the ceiling where it is the best figure of the session.
    assert ceilings([PEAK_ROW], offered) == offered
    assert ceilings([PEAK_ROW], {}) == {}, "no column without a reference peak offered"


def test_a_datasheet_ceiling_holds_and_a_row_above_it_is_marked_and_explained() -> None:
    datasheet = {"cpu": Ceiling(105e9, "vendor sheet: matmul_bfloat16 105 GFLOP/s", "datasheet")}
    peaks = ceilings([PEAK_ROW, HALF_ROW], datasheet)
    assert peaks == datasheet
    assert percent_of_peak(PEAK_ROW, peaks) == "95%"
    assert percent_of_peak(HALF_ROW, peaks) == "101%*"
    line = peaks["cpu"].line("cpu")
    assert line.startswith("% peak: of cpu's datasheet peak, vendor sheet: matmul_bfloat16 105 GFLOP/s;")
    assert "a row marked * ran above it" in line


def test_a_saved_run_shows_its_ceiling_from_its_records_and_its_datasheet_source() -> None:
    run = dataclasses.replace(
        make_run(PEAK_ROW, HALF_ROW), devices={"cpu": {"reference_peak": {"FLOP/s": 100e9, "how": "mm"}}}
    )
    assert peaks_of(run)["cpu"].flops_per_second == pytest.approx(HALF_ROW.measurement.throughput("FLOP").value)
    sheet = {"FLOP/s": 105e9, "how": "sheet", "source": "datasheet"}
    run = dataclasses.replace(run, devices={"cpu": {"reference_peak": sheet}})
    assert peaks_of(run) == {"cpu": Ceiling(105e9, "sheet", "datasheet")}
