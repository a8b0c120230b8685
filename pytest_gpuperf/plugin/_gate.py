"""The pre-merge gate inside pytest: save every run, keep named baselines, compare, set the exit status.

The session object's second plugin object (``GpuperfSession.gate``, registered next to it by
``entry.py``); its hooks are methods. The records it judges and adds to are the session's
record book's (``_records.py``). What it does over a session:

- start: refuse, before anything is measured, a results directory that cannot be
  written (when saving), a baseline that does not exist, cannot be read, or was
  measured on other hardware or software (``results.check_comparable``);
- after a failed test (out of memory above all): release what its traceback holds,
  so the next tests get the memory back;
- after the last test: run every measured test again ``--gpuperf-rounds`` - 1 times in
  this process (``Evidence.rounds`` of each record, at least ``ROUND_SPACING`` seconds
  apart), then, when comparing, run the tests whose records look slower again in a fresh
  process, ``--gpuperf-confirm`` times at most (``gate._confirm``; ``Evidence.runs``), so
  that neither a transient nor one slow session of the machine can decide a verdict;
- end (``finish``, called by the session with the run's one Run): save the run under
  ``runs/`` (also when interrupted), add it to ``--gpuperf-save``'s baseline (not when
  interrupted), compare with ``--gpuperf-compare``'s baseline and set
  ``session.exitstatus`` when a verdict in ``--gpuperf-fail-on`` occurs, write
  ``--gpuperf-html``; the terminal summary shows the table.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from _pytest.runner import runtestprotocol  # the documented way to run an item again (pytest-rerunfailures)

from ..measuring import counted
from ._processes import local_world_size

#: The node id of the failed report that a failing gate adds (JUnit XML and pytest's summary show it).
GATE_NODEID: Final = "gpuperf-gate"
#: Marks the report of a test that failed in an extra round (``--gpuperf-rounds``): "<node id> [gpuperf round N]".
ROUND_MARK: Final = "[gpuperf round "

# The results and gate packages are imported where first used: most pytest sessions neither
# save nor compare, and the plugin is imported at every pytest start (bench/startup.py).
if TYPE_CHECKING:
    from .._progress import Progress
    from ..gate import GateResult, Policy
    from ..measuring import Measurement
    from ..results import Baseline, Fingerprint, Record, ResultsDir, Run, SaveOutcome, TraceSpool
    from ._records import RecordBook
    from ._settings import Settings

__all__ = ["ROUND_SPACING", "GatePlugin", "is_out_of_memory", "release_failed_test_memory"]

#: Seconds between two rounds of one test: the machine's states last seconds, rounds should sample several.
ROUND_SPACING: Final = 1.0
_OOM_TEXTS: Final = ("out of memory", "can't allocate memory", "not enough memory")


def _tests(count: int) -> str:
    return counted(count, "test")


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


class GatePlugin:
    """The gate's hooks, given what they need of the session (``GpuperfSession``); ``reporter``: this process writes
    and reports (rank 0, not an xdist worker)."""

    def __init__(
        self,
        settings: Settings,
        book: RecordBook,
        *,
        rootpath: Path,
        reporter: bool,
        rank: int,
        controller: bool,
        fingerprint: Callable[[], Fingerprint],
        progress: Callable[[], Progress],
        quiet_wait: Callable[[], float],
    ) -> None:
        self.settings = settings
        self._book = book
        self._root = rootpath
        # Untimed, or with the tests that measure skipped, there is nothing to save or compare (_untimed.py).
        self._active = reporter and settings.measuring not in ("untimed", "skip")
        self._rank, self._controller = rank, controller
        self._fingerprint, self._progress, self._quiet_wait = fingerprint, progress, quiet_wait
        self.store: ResultsDir | None = None
        self.baseline: Baseline | None = None
        self.result: GateResult | None = None
        self._release_after: str | None = None
        self._confirmed: dict[str, int] = {}  # test node id -> confirmation runs measured
        self._last_round: dict[str, float] = {}  # test node id -> when its last round ended
        self._lines: list[tuple[str, bool]] = []  # (text, is_error) for the terminal summary
        self._run_file: Path | None = None  # this run's file under runs/ (its stem names its traces' folder)
        self._trace_lines: list[str] = []  # under the gate's table: where each traced row's traces are
        self._spool: TraceSpool | None = None  # the copies of the records' traces, where the end writes traces

    # ------------------------------------------------------------ start

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self._active and self.settings.html:
            from ..report import REPORT_OUTPUT
            from ..results import output_problem

            problem = output_problem(Path(self.settings.html), REPORT_OUTPUT)
            if problem:
                raise pytest.UsageError(f"--gpuperf-html={self.settings.html}: {problem}")
        if not self._active or not (self.settings.save or self.settings.compare):
            return
        from .._escape import printable
        from ..results import StorageError

        config = session.config
        self.store = self._store()
        if self.settings.save:
            from ..results import collect

            option = f"--gpuperf-save={self.settings.save}"
            try:
                self.store.check_writable()
                # An unreadable baseline, or one of other code without --gpuperf-replace, stops us before measuring.
                fingerprint = collect(config.rootpath) if self.store.baseline_path(self.settings.save).exists() else {}
                self.store.check_save(self.settings.save, fingerprint, replace=self.settings.replace)
            except StorageError as exc:
                raise pytest.UsageError(printable(f"{option}: {exc}")) from None
        if self.settings.compare:
            self.baseline = self._load_baseline(self.settings.compare, config.invocation_params.dir)

    def _store(self) -> ResultsDir:
        from ..results import ResultsDir

        return ResultsDir(self._root / self.settings.results_dir)

    def _load_baseline(self, name: str, cwd: Path) -> Baseline:
        from .._escape import printable
        from ..results import Incomparable, ResultsError, check_comparable

        option = f"--gpuperf-compare={name}"
        assert self.store is not None
        try:
            baseline = self.store.load(name, cwd)
            check_comparable(
                (r.fingerprint for r in baseline.runs), [self._fingerprint()], self.settings.allow_mismatch
            )
        except ResultsError as exc:  # its text names what the file holds: printable (``_escape.py``)
            raise pytest.UsageError(printable(f"{option}: {exc}")) from None
        except Incomparable as exc:
            raise pytest.UsageError(
                printable(
                    f"{option}: {baseline.path} was measured on other hardware or software ({exc.what}), so its "
                    "records cannot be compared with this run. Record a baseline on this machine "
                    f"(pytest --gpuperf-save=NAME on the base commit), or pass --gpuperf-allow-mismatch={exc.keys} "
                    f"to compare anyway{baseline.unrecorded()}"
                )
            ) from None
        return baseline

    # ------------------------------------------------------------ failed tests

    def reported(self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
        """A test's report, made (``GpuperfSession.reported``, from ``PerTestHooks``' one report wrapper): a failed
        test's records are marked failed, and its memory released after its teardown."""
        if call.when == "call" and not self._book.repeating:
            if report.failed and call.excinfo is not None:
                oom = is_out_of_memory(call.excinfo.value)
                self._book.fail(item.nodeid, "ran out of memory" if oom else "failed")
                self._release_after = item.nodeid
            elif report.passed:
                self._book.passed(item.nodeid)

    def after_teardown(self, item: pytest.Item) -> None:
        """After a test's teardown (the last of its hooks): a failed test's memory is released."""
        if self._release_after == item.nodeid:
            self._release_after = None
            release_failed_test_memory()

    # ------------------------------------------------------------ records

    def kept(self, key: str, measurement: Measurement) -> Measurement:
        """``measurement``, to be recorded under ``key``, as the session keeps it: its work profile without the
        profiler that took it (every event of the profiled calls), its trace first copied into the session's spool
        where the end writes traces (saving a baseline, comparing, ``--gpuperf-trace=all``: ``results.TraceSpool``).
        A round of a test measured again becomes evidence, which keeps no profile."""
        from ..results import TraceSpool, released

        level = self.settings.trace
        traced = level != "off" and (self.settings.save or self.baseline is not None or level == "all")
        if not self._active or not traced or self._book.repeating:
            return released(measurement)
        if self._spool is None:
            self.store = self.store or self._store()
            self._spool = TraceSpool(self.store)
        return self._spool.keep(key, measurement)

    def pytest_unconfigure(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def pytest_gpuperf_measured(self, item: pytest.Item, record: Record) -> None:
        self._last_round[item.nodeid] = time.monotonic()

    # ------------------------------------------------------------ rounds and confirmation runs

    # Outermost (tryfirst), so that pytest's terminal reporter has ended its progress line with [100%] when the
    # rounds and confirmation runs say what they do.
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        alone = local_world_size() == 1 and int(os.environ.get("WORLD_SIZE", "1")) == 1
        if not alone or self._rank != 0 or session.shouldfail or session.shouldstop:
            return result
        # Extra rounds where the tests ran (a worker under xdist); confirmation where the gate runs.
        if not self._controller and self.settings.rounds > 1:
            measured = {record.test for record in self._book.records}
            items = [item for item in session.items if item.nodeid in measured]
            progress = self._progress()
            for extra in range(2, self.settings.rounds + 1):
                progress.step(f"measuring {_tests(len(items))} again", extra, self.settings.rounds, "round")
                for item in items:
                    self._measure_again(item, extra)
        if self._active and self.baseline is not None and not session.config.option.collectonly:
            self._confirm(session)
            self._give_verdicts(session)
        return result

    def _give_verdicts(self, session: pytest.Session) -> None:
        """The gate's verdicts once every record is in; a failing gate is reported as a failed test ``gpuperf-gate``,
        so that JUnit XML, pytest's summary and anything else that reads test reports see it."""
        from ..gate import gate_lines, why_lines

        self.result = self._compare_now()
        if self.result.failed:
            # The verdict first: pytest's short summary shows a report's first line (cut to the terminal's width).
            lines = gate_lines(self.result)
            verdict = [line for line in lines if line.startswith("gpuperf gate: FAILED")]
            report = pytest.TestReport(
                nodeid=GATE_NODEID,
                location=(GATE_NODEID, None, "gpuperf gate"),
                keywords={},
                outcome="failed",
                longrepr="\n".join(
                    [*verdict, *(line for line in lines if line not in verdict), *why_lines(self.result)]
                ),
                when="call",
            )
            session.config.hook.pytest_runtest_logreport(report=report)

    def _measure_again(self, item: pytest.Item, round_number: int) -> None:
        """One more round of ``item`` in this process, added to the evidence of its records.

        A round in which the test fails keeps nothing of its measurements, and is reported as a
        failed test of its own (``<node id> [gpuperf round N]``), so that the session fails.
        """
        wait = self._last_round.get(item.nodeid, 0.0) + ROUND_SPACING - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        with self._book.measuring_again() as fresh:
            reports = runtestprotocol(item, log=False, nextitem=None)
        self._last_round[item.nodeid] = time.monotonic()
        failed = [report for report in reports if report.failed]
        if failed:
            for report in failed:
                report.nodeid = f"{item.nodeid} {ROUND_MARK}{round_number}]"
                item.config.hook.pytest_runtest_logreport(report=report)
            self._book.fail(item.nodeid, f"failed in round {round_number}")
            return
        self._book.add_repeats(fresh.records, as_runs=False)

    def _confirm(self, session: pytest.Session) -> None:
        from ..gate import run_confirmation
        from ..results import ResultsError

        config = session.config
        progress = self._progress()
        total = self.settings.confirm
        for number in range(1, total + 1):
            suspects = self._suspects()
            if not suspects:
                return
            short = "" if self.settings.detect is None else f" or cannot yet see {self.settings.detect * 100:g}%"
            what = f"confirming {_tests(len(suspects))} that looked slower{short} in a fresh process"
            progress.step(what, number, total if number == total else f"at most {total}", "run")
            try:
                fresh = run_confirmation(
                    config.rootpath,
                    config.invocation_params.args,
                    self.settings.flags(),
                    suspects,
                    self._quiet_wait(),
                    devices={record.test: record.device for record in self._book.records},  # measured there again
                )
            except ResultsError as exc:
                self._lines.append((f"gpuperf: could not confirm {', '.join(suspects)}: {exc}", True))
                return
            self._book.add_repeats(fresh, as_runs=True)
            for nodeid in suspects:
                self._confirmed[nodeid] = self._confirmed.get(nodeid, 0) + 1

    def _compare_now(self, run: Run | None = None) -> GateResult:
        """The baseline against ``run``, else this session's records as they are now (for suspects, the verdicts)."""
        from ..gate import compare_runs

        assert self.baseline is not None
        if run is None:
            run = self._book.run(created="", fingerprint=self._fingerprint(), settings={})
        return compare_runs(self.baseline.runs, [run], self._policy(), failures=self._book.failures)

    def _suspects(self) -> list[str]:
        """Tests with a record that could fail the gate (by its time, or by a count or its memory: a count that
        differs in the fresh process is then varying), or looks slower without a verdict yet, or cannot yet see the
        ``--gpuperf-detect`` goal, in run order."""
        from ..gate import Verdict

        rows = self._compare_now().rows
        fail_on, goal = self.settings.fail_on, self.settings.detect
        tests = {
            row.test
            for row in rows
            if row.estimate is not None
            and (
                row.verdict.value in fail_on
                or row.work_failing(frozenset(fail_on))
                or row.verdict in (Verdict.UNATTRIBUTED, Verdict.SAME_WORK)
                or (row.verdict is Verdict.INCONCLUSIVE and row.estimate.value > 1.0)
                or (goal is not None and ((seen := row.detectable) is None or seen > goal))
            )
        }
        return list(dict.fromkeys(record.test for record in self._book.records if record.test in tests))

    # ------------------------------------------------------------ end

    @property
    def writes(self) -> bool:
        """Does the end of this session write a run file, a baseline, verdicts or an HTML report (``finish``)?"""
        return bool(self._book.records or self.settings.save or self.baseline or self.settings.html)

    def finish(self, session: pytest.Session, run: Run) -> None:
        """The gate's end, from the run's one Run (``GpuperfSession.pytest_sessionfinish``): the run file, the
        baseline, the verdicts and the HTML report, and the exit status they call for."""
        if not self._active or not self.writes:
            return
        self.store = self.store or self._store()
        save_status = self._save(run)
        if self.baseline is not None and not session.config.option.collectonly:  # --co runs no test: no verdict
            if self.result is None:  # not judged at the end of the test loop (interrupted, stopped)
                self.result = self._compare_now(run)
            if self.result.failed and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._write_traces(run)
        html = self.settings.html
        if html and not self._write_html(run, Path(html)) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        if save_status is not None and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = save_status

    def _save(self, run: Run) -> pytest.ExitCode | None:
        """Write the run file and, when asked, the baseline; the exit status a failed save calls for, else None: 3
        for a run file or a baseline not written (a run that was not saved fails the session, as any output not
        written does), 4 when the baseline holds other code and --gpuperf-replace was not given (bad input, as at
        the start)."""
        from ..results import ReplaceRefused, StorageError

        assert self.store is not None
        status = None
        if run.records:
            try:
                path = self._run_file = self.store.save_run(run)
                note = " (interrupted: the records measured before)" if run.interrupted else ""
                self._lines.append((f"gpuperf: saved {len(run.records)} records to {path}{note}", False))
            except StorageError as exc:
                self._lines.append((f"gpuperf: ERROR: this run was not saved: {exc}", True))
                status = pytest.ExitCode.INTERNAL_ERROR
        name = self.settings.save
        if not name:
            return status
        if run.interrupted:
            self._lines.append((f"gpuperf: interrupted, so baseline {name!r} was left as it was", True))
            return status
        if not run.records:
            self._lines.append((f"gpuperf: nothing was measured, so baseline {name!r} was left as it was", True))
            return status
        try:
            outcome = self.store.save_baseline(name, run, replace=self.settings.replace)
        except StorageError as exc:
            self._lines.append((f"gpuperf: ERROR: baseline {name!r} not saved: {exc}", True))
            return pytest.ExitCode.USAGE_ERROR if isinstance(exc, ReplaceRefused) else pytest.ExitCode.INTERNAL_ERROR
        self._lines.append((f"gpuperf: {outcome.describe(name)}", False))
        self._save_baseline_traces(run, outcome)
        return status

    def _save_baseline_traces(self, run: Run, outcome: SaveOutcome) -> None:
        """Keep each record's trace beside the saved baseline (gzipped, one per test: the newest save's), so that a
        later comparison can show the base's trace of a failing row (``results/_traces.py``)."""
        from ..results import ResultsError, baseline_traces_dir, save_baseline_traces

        if self.settings.trace == "off":
            return
        profiles = [(record.key, record.measurement.profile) for record in run.records]
        try:
            kept = save_baseline_traces(outcome.path, profiles, fresh=bool(outcome.replaced))
        except ResultsError as exc:
            self._lines.append((f"gpuperf: the baseline's traces were not kept: {exc}", True))
            return
        if kept:
            folder = baseline_traces_dir(outcome.path)
            self._lines.append((f"gpuperf: kept the traces of {_tests(kept)} beside the baseline, in {folder}", False))

    def _write_traces(self, run: Run) -> None:
        """``--gpuperf-trace``: the traces of the gate's failing rows (base's from beside the baseline, head's from
        this run's profiles), or of every test measured (``all``, the folder said once), in ``traces/<run id>/``."""
        from ..gate import baseline_side, rows_to_trace, trace_records, trace_rows
        from ..results import ResultsError

        level = self.settings.trace
        result, baseline = self.result, self.baseline
        rows = [] if result is None or baseline is None else rows_to_trace(result, level)
        if not rows and not (level == "all" and run.records):
            return
        assert self.store is not None
        try:
            folder = self.store.traces_of(self._run_file.stem if self._run_file else None)
        except ResultsError as exc:
            self._lines.append((f"gpuperf: no traces written: {exc}", True))
            return
        if result is None or baseline is None:
            written, failures = trace_records(run.records, folder)
        else:
            traced = trace_rows(rows, folder, baseline_side(baseline.path))
            failing = {row.key for row in result.failing}
            self._trace_lines += [t.line() for t in traced if t.key in failing]  # each says why a trace is not there
            written = sum(t.head is not None for t in traced)
            failures = [t.failure() for t in traced if t.key not in failing and t.failure()]
        if level == "all" and written:
            self._lines.append((f"gpuperf: wrote the traces of {_tests(written)} to {folder}", False))
        if failures:  # a full disk: said, and never announced as written
            self._lines.append(
                (f"gpuperf: the traces of {_tests(len(failures))} were not written: {failures[0]}", True)
            )

    def _write_html(self, run: Run, path: Path) -> bool:
        """``--gpuperf-html``: the report of this run, with the gate's verdicts when comparing; False if not written."""
        from ..report import compare, render, write
        from ..results import ResultsError

        if not run.records:  # a --co, or a -k that selected no measuring test: an earlier report is kept
            self._lines.append((f"gpuperf: nothing was measured, so the HTML report {path} was left as it was", False))
            return True
        comparison = None
        if self.baseline is not None and self.result is not None:
            comparison = compare(self.baseline, run, self._policy(), self.result)
        try:
            write(path, render(run, comparison))
        except ResultsError as exc:
            self._lines.append((f"gpuperf: ERROR: the HTML report was not written: {exc}", True))
            return False
        records = len(run.records)
        self._lines.append((f"gpuperf: wrote the HTML report of {counted(records, 'record')} to {path}", False))
        return True

    def _policy(self) -> Policy:
        from ..gate import Policy

        s = self.settings
        return Policy(
            tolerance=s.tolerance,
            noise_floor=s.noise_floor,
            fail_on=frozenset(s.fail_on),
            allow_mismatch=frozenset(s.allow_mismatch),
            detect=s.detect,
        )

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self._active:
            return
        if self.result is not None and self.baseline is not None:
            from ..gate import baseline_noise, gate_lines, gate_table, report_to_github, why_lines

            terminalreporter.write_sep("=", "gpuperf gate")
            terminalreporter.write_line(f"against {self.baseline.describe()}")
            noise = baseline_noise(self.baseline.runs, self._policy())
            if noise is not None:
                terminalreporter.write_line(noise.describe(self.settings.tolerance, self.result.rows))
            terminalreporter.write_line(gate_table(self.result))
            for line in why_lines(self.result):
                terminalreporter.write_line(line)
            for line in self._trace_lines:  # under the table and the why, where its failing rows are
                terminalreporter.write_line(line)
            for line in gate_lines(self.result):
                failed = line.startswith("gpuperf gate: FAILED")
                terminalreporter.write_line(line, red=failed, bold=failed)
            for warning in report_to_github(
                self.result,
                title="pytest --gpuperf-compare",
                context=f"against {self.baseline.describe()}",
                root=self._root,
                out=terminalreporter.write_line,
            ):
                self._lines.append((warning, True))
        if self._confirmed:
            rounds = sum(self._confirmed.values())
            terminalreporter.write_line(
                f"gpuperf: measured {len(self._confirmed)} test(s) that looked slower"
                + ("" if self.settings.detect is None else " or could not yet see the goal")
                + " again "
                f"({rounds} confirmation run(s) in fresh processes)"
            )
        for text, is_error in self._lines:
            terminalreporter.write_line(text, red=is_error)


class ReportStatus:
    """The status of the gate's report and of a failed extra round: failed, without a character on pytest's progress
    line (their tests already have theirs). A plugin of its own, registered only in a session that can make them
    (``makes_reports``): the hook is asked three times a test."""

    @staticmethod
    def makes_reports(settings: Settings) -> bool:
        """Can a session of ``settings`` make such a report: does it compare (the gate's) or measure rounds?"""
        return bool(settings.compare) or settings.rounds > 1

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        if report.nodeid == GATE_NODEID or (ROUND_MARK in report.nodeid and report.failed):
            return "failed", "", "FAILED"
        return None
