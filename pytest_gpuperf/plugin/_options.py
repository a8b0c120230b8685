"""Every option of the plugin, declared once: its ``--gpuperf-*`` flag, ini key, default, parser and help.

``entry.py`` turns this table into options and ini keys; ``Settings.resolve`` reads
them back. The parsers are the measuring core's (``measuring.values``), shared with
the ``pytest-gpuperf`` command line; the measuring settings (``MEASURE_FIELDS``) are
parsed by the core's own table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import pytest

from ..gate import DEFAULT_FAIL_ON, MORE_WORK, VERDICTS, WORK_NAMES
from ..measuring import MEASURE_FIELDS, SIZES, SettingError, values

__all__ = ["BY_FIELD", "OPTIONS", "OptionSpec", "add_ini", "given_values"]


def _checked(raw: object, check: Callable[[str], Any]) -> Any:
    """``check`` (the gate's or the results' own validator, raising ValueError with the fix) as a parser."""
    try:
        return check(str(raw))
    except ValueError as exc:
        raise SettingError(str(exc)) from None


def _devices(raw: object) -> tuple[str, ...]:
    from ..measuring import parse_device_option  # where a device is given: the devices' module is not loaded at start

    return tuple(_checked(raw, parse_device_option))  # a DeviceError is a ValueError


# The gate's and the results' validators are imported when a value is parsed, not with the
# plugin: pytest imports the plugin at every start, and most sessions never compare.


def _optional_name(raw: object) -> str | None:
    text = values.given_text("a baseline name such as main")(raw)
    if text is None:
        return None
    from ..results import check_name

    name: str = _checked(text, check_name)
    return name


def _mismatch_keys(raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    from ..results import parse_mismatch_keys

    return tuple(_checked(raw, parse_mismatch_keys))


def _verdicts(raw: object) -> tuple[str, ...]:
    from ..gate import parse_verdicts

    return tuple(_checked(raw, parse_verdicts))


@dataclass(frozen=True)
class OptionSpec:
    """One setting: its field, its ``--gpuperf-*`` flag and ini key, default, parser and help."""

    field: str
    default: str | None
    parse: Callable[[object], Any]
    help: str
    metavar: str = "VALUE"
    marker: bool = True  # may @pytest.mark.gpuperf(...) set it per test?
    switch: bool = False  # a flag given without a value (its ini form takes on/off)

    @property
    def flag(self) -> str:
        return "--gpuperf-" + self.field.replace("_", "-")

    @property
    def ini(self) -> str:
        return "gpuperf_" + self.field


OPTIONS: Final[tuple[OptionSpec, ...]] = (
    OptionSpec(
        "device",
        "auto",
        _devices,
        "devices to run on: cpu, cuda, cuda:N, mps, auto (cuda, else mps, else cpu), all, or a comma list "
        "(default: auto)",
        "DEVICES",
        marker=False,
    ),
    OptionSpec(
        "missing_device",
        "skip",
        values.choice("skip", "error"),
        "what to do when a requested device is absent: skip its tests with the reason, or error "
        "(for GPU CI machines where a missing GPU must not pass; default: skip)",
        "skip|error",
        marker=False,
    ),
    OptionSpec(
        "target",
        "1%",
        MEASURE_FIELDS["target"],
        "stop sampling when the 95% CI of the median is within this relative half-width (default: 1%)",
        "FRACTION",
    ),
    OptionSpec(
        "min_time",
        "0.1",
        MEASURE_FIELDS["min_time"],
        "minimum measuring time per measurement, from the first call's end (default: 0.1 s)",
        "TIME",
    ),
    OptionSpec(
        "max_time",
        "5",
        MEASURE_FIELDS["max_time"],
        "time cap per measurement from its first call's end: warmup, samples, memory probe (default: 5 s)",
        "TIME",
    ),
    OptionSpec(
        "warmup_time",
        "1",
        MEASURE_FIELDS["warmup_time"],
        "warmup time cap per measurement, at most half of max-time; warmup stops earlier once block times stop "
        "falling (default: 1 s)",
        "TIME",
    ),
    OptionSpec(
        "min_samples",
        "10",
        MEASURE_FIELDS["min_samples"],
        "minimum number of samples per measurement (default: 10)",
        "N",
    ),
    OptionSpec(
        "threads",
        "auto",
        MEASURE_FIELDS["threads"],
        "CPU threads torch may use while measuring: a count, auto (1 on a CPU device, torch's default on a GPU) "
        "or torch (torch's default everywhere); the count in effect is recorded with every result (default: auto)",
        "N|auto|torch",
    ),
    OptionSpec(
        "inconclusive",
        "warn",
        MEASURE_FIELDS["inconclusive"],
        "what an assertion does when the CI straddles its bound: warn, or fail (default: warn)",
        "warn|fail",
    ),
    OptionSpec(
        "memory",
        "on",
        MEASURE_FIELDS["memory"],
        "measure the memory of a call after timing: its high-water mark on cuda; on cpu its transient part and "
        "the process's RSS high-water mark (default: on)",
        "on|off",
    ),
    OptionSpec(
        "mode",
        "warm",
        MEASURE_FIELDS["mode"],
        "timing mode: warm (calls back to back), cold (caches flushed before each call, the flush not timed) "
        "or graph (the step captured in a CUDA graph and its replays timed; cuda only); recorded with every "
        "result (default: warm)",
        "warm|cold|graph",
    ),
    OptionSpec(
        "per_call",
        "off",
        MEASURE_FIELDS["per_call"],
        "time every call alone (blocks of one call), so the results give per-call percentiles p50, p90 and p99 "
        "and assert_latency(percentile=...) can judge them; costs a timer read per call (on CUDA an event pair "
        "and a synchronization)",
        "",
        switch=True,
    ),
    OptionSpec(
        "throttle_threshold",
        "0.75",
        MEASURE_FIELDS["throttle_threshold"],
        "flag a GPU sample as throttled when its SM clock read after it fell below this fraction of the "
        "measurement's median SM clock, or a slowdown reason (thermal, power brake) was set; a power cap or "
        "locked clocks alone are the GPU's normal state (default: 0.75)",
        "FRACTION",
    ),
    OptionSpec(
        "profile",
        "full",
        MEASURE_FIELDS["profile"],
        "after timing, profile a few more calls of the step outside the samples (torch.profiler, within 3% of "
        "the measuring time, at most 5 calls; fewer, FLOPs only or none where its floor would not fit, as "
        "profile.reduced says): aten ops, on cuda kernels and host-device synchronizations, "
        "FLOPs, bytes allocated and copied, torch.compile's graph breaks and compiles; counts: one call, "
        "counts only; off: none (default: full)",
        "full|counts|off",
    ),
    OptionSpec(
        "trace",
        "failing",
        values.choice("failing", "all", "off"),
        "write the trace of the profiled calls (Chrome JSON: open it in https://ui.perfetto.dev or chrome://tracing) "
        "of each failing row of the gate, base's and head's, or of every test measured (all), or none; under the "
        "results directory's traces/, a saved baseline's gzipped beside it (default: failing)",
        "failing|all|off",
        marker=False,
    ),
    OptionSpec(
        "size",
        "auto",
        values.choice(*SIZES),
        "workload size preset for the suites: auto (small on cpu and mps; on cuda, large with 24 GiB of memory or "
        "more, else medium), small, medium, large (default: auto)",
        "PRESET",
        marker=False,
    ),
    OptionSpec(
        "json",
        None,
        values.given_text("a file path such as results.json"),
        "write every record of this run to PATH as versioned JSON (atomically)",
        "PATH",
        marker=False,
    ),
    OptionSpec(
        "html",
        None,
        values.given_text("a file path such as report.html"),
        "write this run as one self-contained HTML file at PATH at the end of the session (atomically): every "
        "record's samples as a strip plot, its median and interval, throughput, % of peak and flags, and with "
        "--gpuperf-compare the gate's verdicts, largest slowdown first (docs/report.md)",
        "PATH",
        marker=False,
    ),
    OptionSpec(
        "asv",
        None,
        values.given_text("an asv results directory such as .asv/results"),
        "also write this run as asv results for the checked-out commit into the asv results directory DIR "
        "(machine.json, benchmarks.json, per-commit results), for asv publish and asv compare",
        "DIR",
        marker=False,
    ),
    OptionSpec(
        "asv_machine",
        None,
        values.given_text("a machine name"),
        "machine name for --gpuperf-asv results (default: the host name)",
        "NAME",
        marker=False,
    ),
    OptionSpec(
        "results_dir",
        ".gpuperf",
        values.given_text("a directory such as .gpuperf"),
        "directory for every run's results (runs/) and named baselines (baselines/), relative to the rootdir "
        "(default: .gpuperf)",
        "DIR",
        marker=False,
    ),
    OptionSpec(
        "save",
        None,
        _optional_name,
        "save this run as baseline NAME: one more run if NAME is new or holds runs of the same code on this "
        "machine; a baseline of other code or another machine is refused unless --gpuperf-replace is given",
        "NAME",
        marker=False,
    ),
    OptionSpec(
        "replace",
        "off",
        values.on_off,
        "let --gpuperf-save replace a baseline holding runs of other code or another machine; the old file is "
        "kept beside it as NAME.json.<time>.bak",
        "",
        marker=False,
        switch=True,
    ),
    OptionSpec(
        "compare",
        None,
        values.given_text("a baseline name or a results file path"),
        "compare this run with baseline NAME (or a run id as pytest-gpuperf runs prints it, or a results file PATH); "
        "the gate fails the session on a "
        "significant slowdown beyond the tolerance",
        "NAME|PATH",
        marker=False,
    ),
    OptionSpec(
        "tolerance",
        "5%",
        values.fraction,
        "a record is slower (or faster) only when the change is significant and beyond this ratio (default: 5%)",
        "FRACTION",
    ),
    OptionSpec(
        "noise_floor",
        "2%",
        values.fraction,
        "run-to-run noise assumed until a baseline's runs show more (docs/how-the-gate-decides.md says how "
        "much it weighs; default: 2%)",
        "FRACTION",
    ),
    OptionSpec(
        "fail_on",
        ",".join(DEFAULT_FAIL_ON),
        _verdicts,
        "what fails the session when comparing, a comma list (or none) of verdicts: "
        f"{', '.join(VERDICTS)} (unattributed: slower, measured while busy or on a throttled GPU; same-work: "
        "unattributed with every count identical), and of what a step's work can grow in, each failing where it "
        f"went up: {', '.join(WORK_NAMES)}, or {MORE_WORK}: any of them, on a row not measured unchanged or faster "
        f"(default: {','.join(DEFAULT_FAIL_ON)})",
        "VERDICTS",
        marker=False,
    ),
    OptionSpec(
        "allow_mismatch",
        None,
        _mismatch_keys,
        "compare across these fingerprint differences anyway (for example torch_minor,threads), or all "
        "(default: none; differing hardware or torch refuses the comparison)",
        "KEYS",
        marker=False,
    ),
    OptionSpec(
        "quiet_wait",
        "auto",
        values.quiet_wait,
        "before each test that measures, wait up to this long for other processes to leave the cores it needs; "
        "auto: 10 s when saving or comparing, else off; the first test that waits says so in one line",
        "TIME",
        marker=False,
    ),
    OptionSpec(
        "confirm",
        "4",
        values.confirmations,
        "when comparing, measure the tests whose records look slower again, in a fresh process, up to N times "
        "before judging them (default: 4; 0: judge this session's measurements alone)",
        "N",
        marker=False,
    ),
    OptionSpec(
        "rounds",
        "1",
        values.rounds,
        "measure every test N times in this session: the first as usual, the other N-1 rounds after all tests, "
        "spaced in time; a baseline's rounds count inside its run (default: 1)",
        "N",
        marker=False,
    ),
    OptionSpec(
        "measuring",
        "on",
        values.choice("on", "untimed", "skip", "only"),
        "the tests that measure (gpuperf, benchmark): on (measure), untimed (run each as a plain test: its step "
        "once, nothing timed, recorded or saved; a gpuperf test is then skipped, as what it asserts needs a "
        "measurement), skip (skip them) or only (skip the other tests); pytest-benchmark's --benchmark-disable, "
        "--benchmark-skip and --benchmark-only map to untimed, skip and only where our benchmark fixture serves "
        "(default: on)",
        "on|untimed|skip|only",
        marker=False,
    ),
)

BY_FIELD: Final = {spec.field: spec for spec in OPTIONS}


def given_values(config: pytest.Config) -> tuple[dict[str, object], dict[str, object]]:
    """Every option's command-line value and ini value, by field, as given (None, or '' in ini, where not)."""
    cli = {spec.field: config.getoption(f"gpuperf_{spec.field}") for spec in OPTIONS}
    ini = {spec.field: config.getini(spec.ini) for spec in OPTIONS}
    return cli, ini


def add_ini(parser: pytest.Parser, spec: OptionSpec) -> None:
    """Declare ``spec``'s ini key. Its value may be a TOML number or boolean, not only a string.

    pytest 9's native ``[tool.pytest]`` table gives values their TOML types, and a plain
    string ini key refuses ``gpuperf_max_time = 0.5`` ("expects a string, got float"). The
    option's own parser takes any of them. INI files and ``-o`` keep giving strings (str
    is the union's first member). A pytest without union ini types gets a string key.
    """
    try:
        parser.addini(spec.ini, help=f"ini form of {spec.flag}", type=str | int | float | bool, default=None)
    except (AssertionError, TypeError, ValueError):  # pytest before union ini types: "string" only
        parser.addini(spec.ini, help=f"ini form of {spec.flag}", default=None)
