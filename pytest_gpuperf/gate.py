"""The pre-merge gate inside pytest: save every run, keep named baselines, compare, set the exit status.

Registered next to the session object (``plugin.py``); its hooks are methods. What it does
over a session:

- start: refuse, before anything is measured, a results directory that cannot be
  written (when saving), a baseline that does not exist, cannot be read, or was
  measured on other hardware or software (``fingerprint.py``'s rule);
- before each test that measures: wait (``--gpuperf-quiet-wait``) until other
  processes leave the cores the measurement needs, then watch the machine's
  background load until each measurement ends and store it with the record;
- after a failed test (out of memory above all): release what its traceback holds,
  so the next tests get the memory back;
- after the last test: run every measured test again ``--gpuperf-rounds`` - 1 times in
  this process (``gate["rounds"]`` of each record, at least ``ROUND_SPACING`` seconds
  apart), then, when comparing, run the tests whose records look slower again in a fresh
  process, ``--gpuperf-confirm`` times at most (``confirm.py``; ``gate["runs"]``), so that
  neither a transient nor one slow session of the machine can decide a verdict;
- end: save the run under ``runs/`` (also when interrupted), add it to ``--gpuperf-save``'s
  baseline (not when interrupted), compare with ``--gpuperf-compare``'s baseline and set
  ``session.exitstatus`` when a verdict in ``--gpuperf-fail-on`` occurs; the terminal
  summary shows the table.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any, Final

import pytest
from _pytest.runner import runtestprotocol  # the documented way to run an item again (pytest-rerunfailures)

from . import confirm, contention, fingerprint
from .compare import Estimate, GateResult, Policy, Verdict, compare_runs
from .gate_report import gate_lines, gate_table
from .records import Record, ResultsError, Run
from .session import GpuperfSession
from .storage import Baseline, ResultsDir, StorageError

__all__ = ["AUTO_QUIET_WAIT", "ROUND_SPACING", "GatePlugin", "is_out_of_memory", "release_failed_test_memory"]

#: ``--gpuperf-quiet-wait=auto``: seconds to wait for a quiet machine when saving or comparing.
AUTO_QUIET_WAIT: Final = 10.0
#: Seconds between two rounds of one test: the machine's states last seconds, rounds should sample several.
ROUND_SPACING: Final = 1.0
_OOM_TEXTS: Final = ("out of memory", "can't allocate memory", "not enough memory")


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (CUDA), the CPU allocator's failure, or MemoryError."""
    if isinstance(exc, MemoryError) or any(t.__name__ == "OutOfMemoryError" for t in type(exc).__mro__):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(t in text for t in _OOM_TEXTS)


def release_failed_test_memory() -> None:
    """Drop the last failure's traceback (pytest keeps it in ``sys.last_*`` for post-mortem debugging until the
    next test's call), collect, and return cached CUDA blocks: the failed test's tensors are free again."""
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)
    gc.collect()
    torch: Any = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _local_ranks() -> int:
    try:
        return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _looks_worse(verdict: Verdict, estimate: Estimate | None, fail_on: tuple[str, ...]) -> bool:
    """Could another round change this verdict for the better? Not for new, missing or incomparable records."""
    if estimate is None:
        return False
    return verdict.value in fail_on or (verdict is Verdict.INCONCLUSIVE and estimate.ratio > 1.0)


class GatePlugin:
    def __init__(self, session: GpuperfSession) -> None:
        self.session = session
        self.store: ResultsDir | None = None
        self.baseline: Baseline | None = None
        self.result: GateResult | None = None
        #: test node id -> "failed" / "ran out of memory", to explain missing records
        self.failures: dict[str, str] = {}
        self._existing: list[Run] = []
        self._monitor = contention.Monitor()
        self._waited = 0.0
        self._release_after: str | None = None
        self._rerunning = False
        self._confirmed: dict[str, int] = {}  # test node id -> confirmation rounds measured
        self._last_round: dict[str, float] = {}  # test node id -> when its last round ended
        self._lines: list[tuple[str, bool]] = []  # (text, is_error) for the terminal summary

    @property
    def settings(self) -> Any:
        return self.session.settings

    @property
    def _active(self) -> bool:
        return self.session.rank == 0

    # ------------------------------------------------------------ start

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if not self._active:
            return
        config = session.config
        self.store = ResultsDir(config.rootpath / self.settings.results_dir)
        if self.settings.save:
            option = f"--gpuperf-save={self.settings.save}"
            try:
                self.store.check_writable()
                self._existing = self.store.existing(self.settings.save)
            except StorageError as exc:
                raise pytest.UsageError(f"{option}: {exc}") from None
        if self.settings.compare:
            self.baseline = self._load_baseline(config.invocation_params.dir)

    def _load_baseline(self, cwd: Path) -> Baseline:
        option = f"--gpuperf-compare={self.settings.compare}"
        assert self.store is not None
        try:
            baseline = self.store.load(self.settings.compare, cwd)
        except ResultsError as exc:
            raise pytest.UsageError(f"{option}: {exc}") from None
        current = self.session.fingerprint()
        allow = self.settings.allow_mismatch
        for run in baseline.runs:
            blocking = [d for d in fingerprint.differences(run.fingerprint, current, allow) if d.blocking]
            if blocking:
                what = "; ".join(str(d) for d in blocking)
                keys = ",".join(d.key for d in blocking)
                raise pytest.UsageError(
                    f"{option}: {baseline.path} was measured on other hardware or software ({what}), "
                    "so its records cannot be compared with this run. Record a baseline on this machine "
                    f"(pytest --gpuperf-save=NAME on the base commit), or pass --gpuperf-allow-mismatch={keys} "
                    "to compare anyway"
                )
        return baseline

    # ------------------------------------------------------------ around each test

    def _needed_cores(self, item: pytest.Item) -> float:
        slot = getattr(getattr(item, "callspec", None), "params", {}).get("gpuperf_device")
        device = getattr(slot, "id", "cpu")
        threads = self.session.item_settings(item).threads
        if threads is None:
            torch: Any = sys.modules.get("torch")
            threads = torch.get_num_threads() if torch is not None else (os.cpu_count() or 1)
        return contention.needed_cores(device, threads)

    def _quiet_wait(self) -> float:
        wait: float | None = self.settings.quiet_wait
        if wait is None:
            wait = AUTO_QUIET_WAIT if (self.settings.save or self.settings.compare) else 0.0
        return wait if _local_ranks() == 1 else 0.0

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        self._waited = 0.0
        if "gpuperf" not in getattr(item, "fixturenames", ()):
            return (yield)
        timeout = self._quiet_wait()
        if timeout > 0:
            self._waited, _ = contention.wait_for_quiet(self._needed_cores(item), timeout)
        self._monitor.start()
        try:
            return (yield)
        finally:
            self._monitor.stop()

    def pytest_gpuperf_measured(self, item: pytest.Item, record: Record) -> None:
        self._last_round[item.nodeid] = time.monotonic()
        # The sampling part of the measurement, and the peak-memory call after it; not the warmup or setup.
        load = self._monitor.load_over(record.measurement.sampling_seconds)
        settings = self.session.item_settings(item)
        # A test's own tolerance (its marker) travels with the record; the session's is in the run's settings.
        for name in ("tolerance", "noise_floor"):
            if any(name in marker.kwargs for marker in item.iter_markers("gpuperf")):
                record.gate[name] = getattr(settings, name)
        # Under torchrun the other local ranks are part of the measurement, not background load.
        if load is not None and _local_ranks() == 1:
            record.gate["load"] = load.to_dict()
        if self._waited:
            record.gate["quiet_wait_s"] = round(self._waited, 2)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        report = yield
        if call.when == "call" and report.failed and call.excinfo is not None and not self._rerunning:
            oom = is_out_of_memory(call.excinfo.value)
            self.failures[item.nodeid] = "ran out of memory" if oom else "failed"
            self._release_after = item.nodeid
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        if self._release_after == item.nodeid:
            self._release_after = None
            release_failed_test_memory()

    # ------------------------------------------------------------ rounds and confirmation runs

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        alone = _local_ranks() == 1 and int(os.environ.get("WORLD_SIZE", "1")) == 1
        if not (self._active and alone) or session.shouldfail or session.shouldstop:
            return result
        measured = {record.test for record in self.session.records}
        for _ in range(self.settings.rounds - 1):
            for item in [item for item in session.items if item.nodeid in measured]:
                self._measure_again(item)
        if self.baseline is not None:
            self._confirm(session)
        return result

    def _confirm(self, session: pytest.Session) -> None:
        originals = {record.key: record for record in self.session.records}
        for _ in range(self.settings.confirm):
            suspects = [item.nodeid for item in self._suspects(session)]
            if not suspects:
                return
            try:
                fresh = confirm.run(session.config, self.settings, suspects, self._quiet_wait())
            except ResultsError as exc:
                self._lines.append((f"gpuperf: could not confirm {', '.join(suspects)}: {exc}", True))
                return
            confirm.attach(originals, fresh)
            for nodeid in suspects:
                self._confirmed[nodeid] = self._confirmed.get(nodeid, 0) + 1

    def _suspects(self, session: pytest.Session) -> list[pytest.Item]:
        """Tests with a record that looks slower (or would fail the gate) against the baseline."""
        assert self.baseline is not None
        run = Run(created="", fingerprint=self.session.fingerprint(), settings={}, records=self.session.records)
        result = compare_runs(self.baseline.runs, [run], self._policy())
        fail_on = self.settings.fail_on
        tests = {row.test for row in result.rows if _looks_worse(row.verdict, row.estimate, fail_on)}
        return [item for item in session.items if item.nodeid in tests]

    def _measure_again(self, item: pytest.Item) -> None:
        wait = self._last_round.get(item.nodeid, 0.0) + ROUND_SPACING - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        records = self.session.records
        before = len(records)
        self._rerunning = True
        try:
            runtestprotocol(item, log=False, nextitem=None)
        finally:
            self._rerunning = False
        fresh = records[before:]
        del records[before:]
        originals = {r.key: r for r in records[:before]}
        for record in fresh:
            original = originals.get(record.key)
            if original is None:
                continue
            round_ = {"samples": list(record.measurement.samples), "load": record.gate.get("load")}
            if "quiet_wait_s" in record.gate:
                round_["quiet_wait_s"] = record.gate["quiet_wait_s"]
            original.gate.setdefault("rounds", []).append(round_)
        self._last_round[item.nodeid] = time.monotonic()

    # ------------------------------------------------------------ end

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self._active or self.store is None:
            return
        if not self.session.records and not (self.settings.save or self.baseline):
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        run = dataclasses.replace(self.session.run(), interrupted=interrupted)
        failed_to_save = self._save(run, interrupted)
        if self.baseline is not None:
            self.result = compare_runs(self.baseline.runs, [run], self._policy(), failures=self.failures)
            if self.result.failed and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if failed_to_save and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def _save(self, run: Run, interrupted: bool) -> bool:
        """Save the run, and the baseline when asked; return True if a requested baseline was not saved."""
        assert self.store is not None
        if run.records:
            try:
                path = self.store.save_run(run)
                note = " (interrupted: the records measured before)" if interrupted else ""
                self._lines.append((f"gpuperf: saved {len(run.records)} records to {path}{note}", False))
            except StorageError as exc:
                self._lines.append((f"gpuperf: could not save this run: {exc}", True))
        name = self.settings.save
        if not name:
            return False
        if interrupted:
            self._lines.append((f"gpuperf: interrupted, so baseline {name!r} was left as it was", True))
            return False
        if not run.records:
            self._lines.append((f"gpuperf: nothing was measured, so baseline {name!r} was left as it was", True))
            return False
        try:
            outcome = self.store.save_baseline(name, run, self._existing)
        except StorageError as exc:
            self._lines.append((f"gpuperf: ERROR: baseline {name!r} not saved: {exc}", True))
            return True
        self._lines.append((f"gpuperf: {outcome.describe(name)}", False))
        return False

    def _policy(self) -> Policy:
        s = self.settings
        return Policy(
            tolerance=s.tolerance,
            noise_floor=s.noise_floor,
            fail_on=frozenset(s.fail_on),
            allow_mismatch=frozenset(s.allow_mismatch),
        )

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self._active:
            return
        if self.result is not None and self.baseline is not None:
            terminalreporter.write_sep("=", "gpuperf gate")
            terminalreporter.write_line(f"against {self.baseline.describe()}")
            terminalreporter.write_line(gate_table(self.result))
            for line in gate_lines(self.result):
                failed = line.startswith("gpuperf gate: FAILED")
                terminalreporter.write_line(line, red=failed, bold=failed)
        if self._confirmed:
            rounds = sum(self._confirmed.values())
            terminalreporter.write_line(
                f"gpuperf: measured {len(self._confirmed)} test(s) that looked slower again "
                f"({rounds} confirmation run(s) in fresh processes)"
            )
        for text, is_error in self._lines:
            terminalreporter.write_line(text, red=is_error)
