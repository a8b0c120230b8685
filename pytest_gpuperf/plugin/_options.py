"""Every option of the plugin, declared once: its ``--gpuperf-*`` flag, ini key, default and help.

``entry.py`` turns this table into options and ini keys at every start; ``_settings.py`` holds each
option's parser (``PARSERS``, by field) and reads the values back when a session is made. The table
imports nothing of the package, so that a session of plain tests loads none of the parsers, the
measuring core's settings or the gate's verdicts (``bench/startup.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import pytest

__all__ = ["BY_FIELD", "OPTIONS", "OptionSpec", "add_ini", "chosen", "given_values", "in_ini"]


@dataclass(frozen=True)
class OptionSpec:
    """One setting: its field, its ``--gpuperf-*`` flag and ini key, default and help (its parser: ``PARSERS``)."""

    field: str
    default: str | None
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
        "devices to run on: cpu, cuda, cuda:N, mps, auto (cuda, else mps, else cpu), all, or a comma list "
        "(default: auto)",
        "DEVICES",
        marker=False,
    ),
    OptionSpec(
        "missing_device",
        "skip",
        "what to do when a requested device is absent: skip its tests with the reason, or error "
        "(for GPU CI machines where a missing GPU must not pass; default: skip)",
        "skip|error",
        marker=False,
    ),
    OptionSpec(
        "target",
        "1%",
        "stop sampling when the 95% CI of the median is within this relative half-width (default: 1%)",
        "FRACTION",
    ),
    OptionSpec(
        "min_time",
        "0.1",
        "minimum measuring time per measurement, from the first call's end (default: 0.1 s)",
        "TIME",
    ),
    OptionSpec(
        "max_time",
        "5",
        "time cap per measurement from its first call's end: warmup, samples, memory probe (default: 5 s)",
        "TIME",
    ),
    OptionSpec(
        "warmup_time",
        "1",
        "warmup time cap per measurement, at most half of max-time; warmup stops earlier once block times stop "
        "falling (default: 1 s)",
        "TIME",
    ),
    OptionSpec(
        "min_samples",
        "10",
        "minimum number of samples per measurement (default: 10)",
        "N",
    ),
    OptionSpec(
        "threads",
        "auto",
        "CPU threads torch may use while measuring: a count, auto (1 on a CPU device, torch's default on a GPU) "
        "or torch (torch's default everywhere); the count in effect is recorded with every result (default: auto)",
        "N|auto|torch",
    ),
    OptionSpec(
        "inconclusive",
        "warn",
        "what an assertion does when the CI straddles its bound: warn, or fail (default: warn)",
        "warn|fail",
    ),
    OptionSpec(
        "memory",
        "on",
        "measure the memory of a call after timing: its high-water mark on cuda; on cpu its transient part and "
        "the process's RSS high-water mark (default: on)",
        "on|off",
    ),
    OptionSpec(
        "mode",
        "warm",
        "timing mode: warm (calls back to back), cold (caches flushed before each call, the flush not timed) "
        "or graph (the step captured in a CUDA graph and its replays timed; cuda only); recorded with every "
        "result (default: warm)",
        "warm|cold|graph",
    ),
    OptionSpec(
        "per_call",
        "off",
        "time every call alone (blocks of one call), so the results give per-call percentiles p50, p90 and p99 "
        "and assert_latency(percentile=...) can judge them; costs a timer read per call (on CUDA an event pair "
        "and a synchronization)",
        "",
        switch=True,
    ),
    OptionSpec(
        "throttle_threshold",
        "0.75",
        "flag a GPU sample as throttled when its SM clock read after it fell below this fraction of the "
        "measurement's median SM clock, or a slowdown reason (thermal, power brake) was set; a power cap or "
        "locked clocks alone are the GPU's normal state (default: 0.75)",
        "FRACTION",
    ),
    OptionSpec(
        "profile",
        "full",
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
        "write the trace of the profiled calls (Chrome JSON: open it in https://ui.perfetto.dev or chrome://tracing) "
        "of each failing row of the gate, base's and head's, or of every test measured (all), or none; under the "
        "results directory's traces/, a saved baseline's gzipped beside it (default: failing)",
        "failing|all|off",
        marker=False,
    ),
    OptionSpec(
        "size",
        "auto",
        "workload size preset for the suites: auto (small on cpu and mps; on cuda, large with 24 GiB of memory or "
        "more, else medium), small, medium, large (default: auto)",
        "PRESET",
        marker=False,
    ),
    OptionSpec(
        "json",
        None,
        "write every record of this run to PATH as versioned JSON (atomically)",
        "PATH",
        marker=False,
    ),
    OptionSpec(
        "html",
        None,
        "write this run as one self-contained HTML file at PATH at the end of the session (atomically): every "
        "record's samples as a strip plot, its median and interval, throughput, % of peak and flags, and with "
        "--gpuperf-compare the gate's verdicts, largest slowdown first (docs/report.md)",
        "PATH",
        marker=False,
    ),
    OptionSpec(
        "asv",
        None,
        "also write this run as asv results for the checked-out commit into the asv results directory DIR "
        "(machine.json, benchmarks.json, per-commit results), for asv publish and asv compare",
        "DIR",
        marker=False,
    ),
    OptionSpec(
        "asv_machine",
        None,
        "machine name for --gpuperf-asv results (default: the host name)",
        "NAME",
        marker=False,
    ),
    OptionSpec(
        "results_dir",
        ".gpuperf",
        "directory for every run's results (runs/) and named baselines (baselines/), relative to the rootdir "
        "(default: .gpuperf)",
        "DIR",
        marker=False,
    ),
    OptionSpec(
        "save",
        None,
        "save this run as baseline NAME: one more run if NAME is new or holds runs of the same code on this "
        "machine; a baseline of other code or another machine is refused unless --gpuperf-replace is given",
        "NAME",
        marker=False,
    ),
    OptionSpec(
        "replace",
        "off",
        "let --gpuperf-save replace a baseline holding runs of other code or another machine; the old file is "
        "kept beside it as NAME.json.<time>.bak",
        "",
        marker=False,
        switch=True,
    ),
    OptionSpec(
        "compare",
        None,
        "compare this run with baseline NAME (or a run id as pytest-gpuperf runs prints it, or a results file PATH); "
        "the gate fails the session on a "
        "significant slowdown beyond the tolerance",
        "NAME|PATH",
        marker=False,
    ),
    OptionSpec(
        "tolerance",
        "5%",
        "a record is slower (or faster) only when the change is significant and beyond this ratio, and unchanged "
        "only where its evidence can see it; auto: each record's own smallest detectable change, at least 2% "
        "(auto:3% for at least 3%) (default: 5%)",
        "FRACTION|auto",
    ),
    OptionSpec(
        "noise_floor",
        "2%",
        "run-to-run noise assumed until a baseline's runs show more (docs/how-the-gate-decides.md says how "
        "much it weighs; default: 2%)",
        "FRACTION",
    ),
    OptionSpec(
        "fail_on",
        "slower,unattributed,more-work",
        # the gate's names (gate.VERDICTS, gate.WORK_NAMES, gate.MORE_WORK), written out so that every start need
        # not load the gate; tests/plugin/test_user_settings.py checks the help names each of them
        "what fails the session when comparing, a comma list (or none) of verdicts: slower, unattributed, "
        "same-work, faster, unchanged, inconclusive, incomparable, new, missing (unattributed: slower, measured "
        "while busy or on a throttled GPU; same-work: unattributed with every count identical), and of what a "
        "step's work can grow in, each failing where it went up: ops, kernels, runtime, syncs, flops, allocated, "
        "copied, compiles, memory, or more-work: any of them, on a row not measured unchanged or faster "
        "(default: slower,unattributed,more-work)",
        "VERDICTS",
        marker=False,
    ),
    OptionSpec(
        "allow_mismatch",
        None,
        "compare across these fingerprint differences anyway (for example torch_minor,threads), or all "
        "(default: none; differing hardware or torch refuses the comparison)",
        "KEYS",
        marker=False,
    ),
    OptionSpec(
        "quiet_wait",
        "auto",
        "before each test that measures, wait up to this long for other processes to leave the cores it needs; "
        "auto: 10 s when saving or comparing, else off; the first test that waits says so in one line",
        "TIME",
        marker=False,
    ),
    OptionSpec(
        "confirm",
        "4",
        "when comparing, measure the tests whose records look slower again, in a fresh process, up to N times "
        "before judging them (default: 4; 0: judge this session's measurements alone)",
        "N",
        marker=False,
    ),
    OptionSpec(
        "detect",
        None,
        "when comparing, also measure again (as --gpuperf-confirm does, up to its N fresh processes) every test whose "
        "runs cannot yet see a change of FRACTION (3% or 0.03) at 80% power; a test still short of it says what it "
        "can see (default: none)",
        "FRACTION",
        marker=False,
    ),
    OptionSpec(
        "rounds",
        "1",
        "measure every test N times in this session: the first as usual, the other N-1 rounds after all tests, "
        "spaced in time; a baseline's rounds count inside its run (default: 1)",
        "N",
        marker=False,
    ),
    OptionSpec(
        "measuring",
        "on",
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


def chosen(cli: Mapping[str, object], ini: Mapping[str, object]) -> frozenset[str]:
    """The fields that ``Settings.resolve`` takes from ``cli`` or ``ini`` rather than from the defaults."""
    return frozenset(spec.field for spec in OPTIONS if cli.get(spec.field) is not None or in_ini(ini.get(spec.field)))


def in_ini(raw: object) -> bool:
    """Set in an ini file: pytest gives None for a key not written, and '' or [] for one written empty."""
    return raw not in (None, "", [])


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
