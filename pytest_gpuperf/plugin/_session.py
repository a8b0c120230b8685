"""The session object: registered on the plugin manager, holds the run's state; its hooks are methods.

It resolves devices and backends, parametrizes tests by device, watches the machine's
load around each test that measures, and keeps the records in its record book
(``_records.py``; ``keep``: one ``pytest_gpuperf_measured`` per record kept, while a
test measured again by the gate adds to that round instead). At the end it builds the
run's one ``Run`` and writes every output from it: the gate's (run file, baseline,
verdicts, HTML report), then ``--gpuperf-json`` and ``--gpuperf-asv``; it prints the
results table.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ._gate import GatePlugin
from ._markers import bad_requirement, marked, unmet_requirement
from ._processes import binding, is_controller, local_world_size, worker_index, workers
from ._records import RecordBook
from ._settings import SettingError, Settings, user_settings
from ._xdist import send_to_controller, sharing

# What only a session that measures needs is imported where it is first used: pytest imports
# the plugin at every start, and most sessions run tests that never measure (bench/startup.py).
if TYPE_CHECKING:
    from .._progress import Progress
    from ..history import AsvTarget
    from ..measuring import (
        Backend,
        Binding,
        Coordinator,
        DeviceSlot,
        Inventory,
        Load,
        Measurement,
        MeasureSettings,
        Monitor,
        values,
    )
    from ..results import Evidence, Fingerprint, Record, Run

__all__ = ["AUTO_QUIET_WAIT", "PER_TEST_HOOKS", "GpuperfSession"]

#: ``--gpuperf-quiet-wait=auto``: seconds to wait for a quiet machine when saving or comparing.
AUTO_QUIET_WAIT: Final = 10.0


class GpuperfSession:
    """State of one pytest session: settings, devices, backends and the records measured."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        #: the one owner of the records, notes, reference peaks, device descriptions and failed tests
        self.book = RecordBook()
        self._backends: dict[str, Backend] = {}
        self._asv: AsvTarget | None = None
        self._asv_note = ""
        self._monitor: Monitor | None = None  # started by the first test that measures, stopped at the end
        #: fixtures that measure: a test asking for one waits for a quiet machine and has its load watched
        self._measuring_fixtures: set[str] = {"gpuperf"}
        self._waited = 0.0
        self._said_wait = False  # the first wait for a quiet machine says what it waits for (``_say_wait``)
        # Under torchrun every rank runs the tests; only rank 0 reports and writes.
        self.rank = int(os.environ.get("RANK", "0"))
        self._group_started = False  # a torch.distributed process group this session started (coordinator)
        self._json_written: int | None = None  # records written to --gpuperf-json (None: not written)
        self._json_note = ""  # why --gpuperf-json was not written, for the terminal summary
        self._sigterm: object | None = None  # SIGTERM's handler before this session's (_signals.py)
        # Under pytest-xdist workers run the tests and the controller reports and writes (_xdist.py).
        self.worker = worker_index(config)
        self.controller = is_controller(config)
        #: the gate's hooks, a plugin object of their own (registered next to this one by ``entry.py``)
        self.gate: GatePlugin = GatePlugin(
            settings,
            self.book,
            rootpath=config.rootpath,
            reporter=self.is_reporter,
            rank=self.rank,
            controller=self.controller,
            fingerprint=lambda: self.fingerprint,
            progress=self.progress,
            quiet_wait=self.quiet_wait,
        )

    @property
    def is_reporter(self) -> bool:
        """Does this process write results and print the table? Rank 0, and not an xdist worker."""
        return self.rank == 0 and self.worker is None

    def progress(self, prefix: str = "gpuperf") -> Progress:
        """Progress lines on pytest's terminal writer, each on a line of its own; silent under ``-q``, in an xdist
        worker (whose output nobody sees) and on ranks other than 0."""
        from .._progress import Progress

        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < 0 or not self.is_reporter:
            return Progress(None, prefix=prefix)

        capture = self.config.pluginmanager.get_plugin("capturemanager")

        def write(line: str) -> None:
            # Inside a test pytest captures the output: step out of it, as pytest's live logging does.
            quiet = capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext()
            with quiet:
                reporter.ensure_newline()  # pytest's progress line ends where it stands, then ours follows
                reporter.write_line(line)

        return Progress(write, prefix=prefix)

    # ------------------------------------------------------------ devices

    @functools.cached_property
    def inventory(self) -> Inventory:
        """The devices this machine has, probed on first use so that runs that never measure never import torch."""
        from ..measuring import probe_inventory

        return probe_inventory()

    @functools.cached_property
    def slots(self) -> list[DeviceSlot]:
        """Requested devices, resolved on this machine's inventory."""
        from ..measuring import resolve_devices

        return resolve_devices(self.settings.device, self.inventory)

    @functools.cached_property
    def binding(self) -> Binding | None:
        """The one GPU this process measures on (an xdist worker's, a torchrun rank's beside others, a confirmation
        run's), or None when it has the machine (``_processes.binding``; read on first use: it imports the core)."""
        from ..measuring import DeviceError

        try:
            return binding(self.config)
        except DeviceError as exc:
            raise pytest.UsageError(f"gpuperf: {exc}") from None

    def physical(self, slot: DeviceSlot) -> DeviceSlot:
        """The device a test parametrized on ``slot`` measures on (``measuring.bind``): for ``cuda``, an xdist
        worker's ``cuda:<worker index>``, a torchrun rank's ``cuda:LOCAL_RANK``, a confirmation run's record's GPU;
        an explicit ``cuda:N`` as named, or the test fails with the reason where other processes share it.

        Test ids keep the requested device, so that they and the baselines keyed by them are the
        same with and without torchrun or ``-n``; the records name the device measured on.
        """
        from ..measuring import DeviceError, bind

        self.refuse_shared(slot)
        try:
            return bind(slot, self.binding, self.inventory)
        except DeviceError as exc:
            why = str(exc)
        pytest.fail(f"gpuperf: {why}", pytrace=False)

    def refuse_shared(self, slot: DeviceSlot) -> None:
        """In an xdist worker, fail the test with the fix where the workers would measure on ``slot``'s device at once
        (``sharing``: the CPU, MPS, more workers than GPUs): the one rule of every fixture that measures, ``gpuperf``
        (``physical``) and ``benchmark``."""
        if self.worker is not None and slot.available and not self.untimed:  # untimed: nothing to disturb
            why = sharing([slot], max(workers(self.config), self.worker + 1), self.inventory)
            if why:
                pytest.fail(f"gpuperf: {why}", pytrace=False)

    def bound_slot(self) -> DeviceSlot | None:
        """The GPU of a process bound to one (``binding``), as a slot: where a step that names no device runs."""
        from ..measuring import DeviceSlot

        bound = self.binding
        if bound is None or bound.index >= self.inventory.cuda_count:
            return None
        return DeviceSlot(f"cuda:{bound.index}", "cuda", bound.index, True)

    def _make_current(self, item: pytest.Item) -> None:
        """In a process bound to one GPU, the measuring test's GPU is made current before its fixtures run, so that
        a step's own ``.cuda()`` and ``device="cuda"`` land on it, not on every worker's cuda:0."""
        from ..measuring import DeviceError, DeviceSlot, bind

        if self.binding is None:
            return
        requested = getattr(getattr(item, "callspec", None), "params", {}).get("gpuperf_device")
        if isinstance(requested, DeviceSlot):
            try:
                slot: DeviceSlot | None = bind(requested, self.binding, self.inventory)
            except DeviceError:
                return  # the fixture fails the test with the reason
        else:
            slot = self.bound_slot()
        if slot is None or slot.kind != "cuda" or slot.index is None:
            return
        import torch

        if torch.cuda.is_available():
            torch.cuda.set_device(slot.index)

    def coordinator(self, slot: DeviceSlot, what: str) -> Coordinator | None:
        """Under torchrun (2 or more ranks), the rank coordinator for a measurement named ``what``.

        The process group is started here when the test has not started one (and ended with
        the session). Every rank must measure the same thing at the same time, or the
        collectives inside the coordinator pair up wrongly and hang: the ranks first compare
        ``what`` and refuse, with the fix, when they differ.
        """
        from ..measuring import DistributedError, TorchDistCoordinator, World, backend_for_kind

        world = World.from_env(backend_for_kind(slot.kind))
        if world is None or world.size < 2:
            return None
        import torch.distributed as dist

        if world.backend == "nccl" and slot.index is not None:
            import torch

            torch.cuda.set_device(slot.index)  # NCCL's object collectives use the current device
        if not dist.is_initialized():
            dist.init_process_group(world.backend)
            self._group_started = True
        names: list[object] = [None] * world.size
        dist.all_gather_object(names, what)
        if len(set(map(str, names))) > 1:
            listed = "; ".join(f"rank {rank}: {name}" for rank, name in enumerate(names))
            raise DistributedError(
                f"the ranks are measuring different things at once ({listed}); every rank must run the same tests "
                "in the same order: run torchrun with -p no:randomly (or the same --randomly-seed on every rank)"
            )
        return TorchDistCoordinator(device="cpu" if world.backend == "gloo" else slot.id)

    def headline_threads(self, slot: DeviceSlot, settings: MeasureSettings) -> int | None:
        """The threads at which the speedup table compares a test's CPU side, when its record's are others; or None.

        Only in a session that measures the CPU beside another device (``--gpuperf-device=cpu,cuda``): there the
        headline is how much faster the GPU is than the CPU, and a CPU on its one regression-stable thread is not
        the CPU (docs/timing.md, "Threads on a CPU"). Not while a test is measured again, and not under xdist or
        torchrun, where the other workers or ranks share the cores, and not in a confirmation run's process (its
        records are evidence for the gate, which compares the stable thread count).
        """
        from ..gate import CONFIRMATION_ENV

        alone = local_world_size() == 1 and int(os.environ.get("WORLD_SIZE", "1")) == 1
        if slot.kind != "cpu" or self.book.repeating or self.worker is not None or not alone:
            return None
        if os.environ.get(CONFIRMATION_ENV):
            return None
        if not any(other.available and other.kind != "cpu" for other in self.slots):
            return None
        from ..measuring import affinity_cores

        cores = affinity_cores()
        threads = settings.threads_for("cpu")
        if threads is None:
            import torch

            threads = int(torch.get_num_threads())
        return cores if threads != cores else None

    def backend(self, slot: DeviceSlot) -> Backend:
        from ..measuring import backend_for

        if slot.id not in self._backends:
            self._backends[slot.id] = backend_for(slot)
            self.book.describe_device(slot.id, self._backends[slot.id].describe())
        return self._backends[slot.id]

    def declare_measuring_fixture(self, name: str) -> None:
        """A fixture that measures (``benchmark``): a test asking for it waits for a quiet machine and has its
        load watched, as one asking for ``gpuperf``."""
        self._measuring_fixtures.add(name)

    def measures(self, item: pytest.Item) -> bool:
        """Does ``item`` measure: does it ask for ``gpuperf``, ``gpuperf_device`` or a declared measuring fixture?"""
        return not ({"gpuperf_device"} | self._measuring_fixtures).isdisjoint(getattr(item, "fixturenames", ()))

    @property
    def untimed(self) -> bool:
        """``--gpuperf-measuring=untimed``: each test that measures runs its step once, and nothing is recorded."""
        return self.settings.measuring == "untimed"

    def item_settings(self, node: pytest.Item | pytest.Function) -> Settings:
        """Session settings with the test's ``@pytest.mark.gpuperf(...)`` keywords applied, farthest first."""
        settings = self.settings
        for marker in reversed(list(node.iter_markers("gpuperf"))):
            if marker.args:
                raise SettingError(
                    f"@pytest.mark.gpuperf takes keywords only, got positional {marker.args!r}; "
                    "write for example @pytest.mark.gpuperf(target=0.02)"
                )
            settings = settings.with_marker(marker.kwargs)
        return settings

    @functools.cached_property
    def fingerprint(self) -> Fingerprint:
        """The run's fingerprint, taken once, when first needed."""
        from ..results import Fingerprint, collect

        stored = collect(self.config.rootpath)
        self.config.hook.pytest_gpuperf_fingerprint(fingerprint=stored)  # adds keys in place, then it is frozen
        return Fingerprint.from_dict(stored)

    # ------------------------------------------------------------ records

    def evidence(
        self,
        item: pytest.Item,
        measurement: Measurement,
        *,
        tolerance: values.Tolerance | None = None,
        noise_floor: float | None = None,
    ) -> Evidence:
        """What the gate needs of a measurement just made: the test's own tolerances (its marker's, unless
        given for this measurement), the machine's load while it sampled, the wait for a quiet machine."""
        from ..results import Evidence

        settings = self.item_settings(item)
        keywords = {name for marker in item.iter_markers("gpuperf") for name in marker.kwargs}
        if tolerance is None and "tolerance" in keywords:
            tolerance = settings.tolerance
        if noise_floor is None and "noise_floor" in keywords:
            noise_floor = settings.noise_floor
        # The sampling part of the measurement, and the peak-memory call after it; not the warmup or setup.
        load = self._monitor.load_over(measurement.sampling_seconds) if self._monitor else None
        return Evidence(
            tolerance=tolerance,
            noise_floor=noise_floor,
            # Under torchrun the other local ranks, and under xdist the other workers (each on its own GPU), are
            # part of the run, not background load.
            load=load if local_world_size() == 1 and self.worker is None else None,
            quiet_wait_s=round(self._waited, 2) if self._waited else None,
        )

    def keep(self, item: pytest.Item, record: Record) -> None:
        """Keep a record in the book: one more of this session's, or a round of a test measured again.

        ``pytest_gpuperf_measured`` fires once per record kept as the session's, and not in the fresh processes of
        confirmation runs, whose records become evidence of the records of the session that started them.
        """
        from ..gate import CONFIRMATION_ENV

        if self.book.keep(record) and not os.environ.get(CONFIRMATION_ENV):
            self.config.hook.pytest_gpuperf_measured(item=item, record=record)

    def run(self, *, interrupted: bool = False) -> Run:
        """This session's Run, from the record book."""
        return self.book.run(
            created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            fingerprint=self.fingerprint,
            settings=self.settings.as_dict(),
            interrupted=interrupted,
        )

    # ------------------------------------------------------------ hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from .._signals import install

        # CI timeouts and cancels send SIGTERM: take the Ctrl-C path, so that the run is saved (interrupted).
        self._sigterm = install()
        if self.controller or local_world_size() > 1:
            self._refuse_shared_devices()
        if self.settings.missing_device == "error":
            missing = [s for s in self.slots if not s.available]
            if missing:
                reasons = "; ".join(s.reason for s in missing)
                raise pytest.UsageError(
                    f"--gpuperf-missing-device=error: {reasons}. Run on a machine with that device, "
                    "or pass --gpuperf-missing-device=skip to skip its tests"
                )
        if self.settings.json and self.is_reporter:
            _check_writable(Path(self.settings.json), "--gpuperf-json")
        if self.settings.asv and self.is_reporter:
            from ..history import AsvError, AsvTarget

            try:
                self._asv = AsvTarget.prepare(Path(self.settings.asv), self.settings.asv_machine, self.config.rootpath)
            except AsvError as exc:
                raise pytest.UsageError(f"--gpuperf-asv={self.settings.asv}: {exc}") from None

    def _refuse_shared_devices(self) -> None:
        """On the xdist controller, and on each torchrun rank beside others: refuse processes that would share a device
        (``sharing``) or an explicit ``cuda:N`` that other processes would measure on too (``bind``), when the session
        asks to measure (a device chosen, or results to save, compare or write); tests that do not measure may use
        -n freely, and a measuring test refuses in its worker or rank (``physical``)."""
        settings = self.settings
        if settings.measuring in ("untimed", "skip"):  # nothing is timed: -n is free, as under pytest-benchmark
            return
        asked = "device" in user_settings(self.config)
        if not (asked or settings.save or settings.compare or settings.json or settings.asv):
            return
        why = sharing(self.slots, workers(self.config), self.inventory) if self.controller else self._rank_problem()
        if why:
            raise pytest.UsageError(f"gpuperf: {why}")

    def _rank_problem(self) -> str | None:
        """Why this torchrun rank cannot measure on the devices asked for beside the other local ranks, or None."""
        from ..measuring import DeviceError, bind

        gpus = [slot for slot in self.slots if slot.available and slot.kind == "cuda"]
        if len(gpus) > 1:
            return (
                f"--gpuperf-device names {len(gpus)} GPUs ({', '.join(s.id for s in gpus)}), and each of torchrun's "
                f"{local_world_size()} local ranks measures on its own; name the kind alone, --gpuperf-device=cuda "
                f"(the rank with LOCAL_RANK=N then measures on cuda:N)"
            )
        for slot in gpus:
            try:
                bind(slot, self.binding, self.inventory)
            except DeviceError as exc:
                return str(exc)
        return None

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        """One line naming the devices, the CPU's threads and torch, as pytest-benchmark's header does.

        Only when a selected test measures (torch is imported for it), and not under ``-q`` or
        ``--no-header``, as pytest's own header.
        """
        if not self.is_reporter or config.get_verbosity() < 0 or config.getoption("no_header", False):
            return []
        if not any({"gpuperf", "gpuperf_device"} & set(getattr(item, "fixturenames", ())) for item in items):
            return []
        import torch

        from ._summary import header_line

        return [header_line(self.slots, self.settings.measure, torch)]

    def marker_problem(self, node: pytest.Item | pytest.Function) -> str:
        """What is wrong with a test's ``gpuperf`` and ``gpuperf_requires`` markers, or ''."""
        try:
            self.item_settings(node)
        except SettingError as exc:
            return str(exc)
        return next((why for why in map(bad_requirement, node.iter_markers("gpuperf_requires")) if why), "")

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Each device a test is for; a test with a bad marker is still collected (its setup errors with the
        reason, ``pytest_runtest_setup``), so that one misspelt keyword does not stop its whole module."""
        if "gpuperf_device" not in metafunc.fixturenames:
            return
        requires = list(metafunc.definition.iter_markers("gpuperf_requires"))
        if any(bad_requirement(marker) for marker in requires):
            requires = []
        bound = self.binding if requires else None
        params = []
        for slot in self.slots:
            whys = (
                [slot.reason]
                if not slot.available
                else [unmet_requirement(m, slot, self.inventory, bound) for m in requires]
            )
            marks = [pytest.mark.skip(reason=f"gpuperf: {why}") for why in whys if why]
            params.append(pytest.param(slot, marks=marks, id=slot.id))
        metafunc.parametrize("gpuperf_device", params, indirect=True)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Register the hooks every test passes through (``PerTestHooks``) where a collected test measures or carries
        one of our markers: a session of plain tests pays nothing for them per test."""
        if any(self.measures(item) or marked(item) for item in session.items):
            self.config.pluginmanager.register(PerTestHooks(self), PER_TEST_HOOKS)

    def before_setup(self, item: pytest.Item) -> None:
        """Before a test's setup: a test's bad marker fails it (its message once, not chained); a measuring test's
        GPU is made current."""
        if marked(item):
            problem = self.marker_problem(item)
            if problem:  # an error of this test alone, its message once (not chained)
                pytest.fail(f"{item.nodeid}: {problem}", pytrace=False)
        if self.measures(item):
            self._make_current(item)

    def before_call(self, item: pytest.Item) -> None:
        """Before a measuring test's call: wait for the cores it needs (``--gpuperf-quiet-wait``), then watch the
        load from its start (``Monitor.start``; the session's monitor runs on until the end)."""
        self._waited = 0.0
        if self.untimed or self._measuring_fixtures.isdisjoint(getattr(item, "fixturenames", ())):
            return
        from ..measuring import Monitor, wait_for_quiet

        timeout = self.quiet_wait()
        if timeout > 0:
            needed = self._needed_cores(item)
            self._waited, _ = wait_for_quiet(needed, timeout, on_busy=lambda load: self._say_wait(load, needed))
        self._monitor = self._monitor or Monitor()
        try:
            self._monitor.start()
        except RuntimeError as exc:
            why = str(exc)
        else:
            return
        # this test's alone, one line, outside the except block (not chained)
        pytest.fail(f"gpuperf: {why}; this test's measurement failed, the next starts clean", pytrace=False)

    def reported(self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
        """A test's report, made: a failed test that the load monitor saw starved of cores says so under its failure,
        as a throttled GPU is flagged (its bound may have failed on the machine's load, not on the code); the gate
        marks its records."""
        if call.when == "call" and report.failed and not self.book.repeating:
            from ..results import starved_message

            lines = [starved_message(r) for r in self.book.records if r.test == item.nodeid]
            if any(lines):
                report.sections.append(("gpuperf: starved of CPU", "\n".join(line for line in lines if line)))
        self.gate.reported(item, call, report)

    def quiet_wait(self) -> float:
        wait = self.settings.quiet_wait
        if wait is None:
            wait = AUTO_QUIET_WAIT if (self.settings.save or self.settings.compare) else 0.0
        # Under torchrun and xdist the other ranks or workers are the run itself: waiting for them to go quiet
        # would only wait.
        return wait if local_world_size() == 1 and self.worker is None else 0.0

    def _say_wait(self, load: Load, needed: float) -> None:
        """Once a session, where a test first waits for a quiet machine: what for, and how to turn it off."""
        if self._said_wait:
            return
        self._said_wait = True
        cores = f"{needed:g} core{'s' if needed != 1 else ''}"
        self.progress().say(
            f"the machine is busy ({load.background_cores:.1f} of {load.cpus} CPUs used by other processes): "
            f"before each test that measures, waiting up to {self.quiet_wait():g} s for the {cores} it needs to be "
            "free; --gpuperf-quiet-wait=0 turns the wait off"
        )

    def _needed_cores(self, item: pytest.Item) -> float:
        from ..measuring import needed_cores

        slot = getattr(getattr(item, "callspec", None), "params", {}).get("gpuperf_device")
        kind = getattr(slot, "kind", "cpu")
        threads = self.item_settings(item).measure.threads_for(kind)
        if threads is None:
            torch: Any = sys.modules.get("torch")
            threads = torch.get_num_threads() if torch is not None else (os.cpu_count() or 1)
        return needed_cores(kind, threads)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        records = self.book.records
        if self._json_note and self.is_reporter:
            terminalreporter.write_line(self._json_note)
        if not records or not self.is_reporter:
            return
        from ..results import ceilings, table_lines, terminal_width, wrap_line
        from ._summary import speedup_lines, speedup_table

        terminalreporter.write_sep("=", "gpuperf results")
        # pytest's own width (COLUMNS too) where its output is a terminal (pytester's inner runs write to a buffer).
        width = self.config.get_terminal_writer().fullwidth if terminal_width(bool(terminalreporter.isatty)) else None
        for line in table_lines(records, ceilings(records, self.book.reference_peaks), width=width):
            terminalreporter.write_line(line)
        book = self.book
        devices = [slot.id for slot in self.slots if slot.available]
        speedups = speedup_table(records, devices, headline=book.headline, descriptions=book.devices)
        if speedups:
            terminalreporter.write_sep("-", "gpuperf speedup of each device against the first")
            terminalreporter.write_line(speedups)
            for line in speedup_lines(records, book.headline, book.headline_seconds):
                terminalreporter.write_line(line)
        if self.book.notes:
            from .._escape import printable

            terminalreporter.write_sep("-", "gpuperf notes")
            for nodeid, text in self.book.notes:  # a test's own text: printable, wrapped too
                for line in wrap_line(printable(f"{nodeid}: {text}"), width):
                    terminalreporter.write_line(printable(line))
        if self.settings.json and self._json_written is not None:
            terminalreporter.write_line(f"gpuperf: wrote {self._json_written} records to {self.settings.json}")
        if self._asv_note:
            terminalreporter.write_line(self._asv_note)

    def pytest_unconfigure(self) -> None:
        from .._signals import restore

        restore(self._sigterm)
        if self._monitor is not None:
            self._monitor.stop()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """The end: the run's one Run, built once, and every output written from it, in this order: the gate's (the
        run file, the baseline, the verdicts, the HTML report), then ``--gpuperf-json`` and ``--gpuperf-asv``.

        An xdist worker sends its book to the controller instead, which writes for the whole run.
        """
        self._end_process_group()
        if self.worker is not None:
            send_to_controller(self.config, self.book)
            return
        wanted = self.gate.writes or self.settings.json or self._asv is not None
        if not self.is_reporter or not wanted:
            return
        run = self.run(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
        self._save(session, run)

    def _save(self, session: pytest.Session, run: Run) -> None:
        """Every output, with Ctrl-C and SIGTERM held until done (``interrupts_deferred``): a first one lets the save
        complete, a second abandons it, each file left whole as it was (written atomically); either way the
        session ends as interrupted (exit 2) with one line, not a traceback and the "tests failed" exit 1."""
        from .._signals import interrupts_deferred

        # pytest's progress line ends here, so that what is printed while saving starts a line of its own (torch's
        # profiler on a full disk prints "ERROR: ... Failed to write to log file!" as it writes a trace).
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
        try:
            with interrupts_deferred("saving the results") as held:
                self.gate.finish(session, run)
                self._write_results(session, run)
        except KeyboardInterrupt:
            line = (
                "gpuperf: interrupted twice while saving: the save was abandoned; "
                "each file being written was left as it was"
            )
        else:
            if held.signal is None:
                return
            line = (
                f"gpuperf: {held.signal} received while saving: the save was completed first, then the session stopped"
            )
        _say(session, line)
        session.exitstatus = pytest.ExitCode.INTERRUPTED

    def _end_process_group(self) -> None:
        if self._group_started:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self._group_started = False

    def _write_results(self, session: pytest.Session, run: Run) -> None:
        """``--gpuperf-json`` and ``--gpuperf-asv``; a file that cannot be written is an internal error."""
        if not (self.settings.json or self._asv):
            return
        from ..results import ResultsError, save_run

        try:
            if self.settings.json and run.records:
                save_run(Path(self.settings.json), run)
                self._json_written = len(run.records)
            elif self.settings.json:  # a --co, or a -k that selected no measuring test: an earlier file is kept
                self._json_note = f"gpuperf: nothing was measured, so {self.settings.json} was left as it was"
            if self._asv is not None and run.records:
                self._asv_note = self._asv.write(run)
        except ResultsError as exc:
            _say(session, f"gpuperf: ERROR: {exc}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def _say(session: pytest.Session, line: str) -> None:
    """One red line at the end of the session, on a line of its own (not on the end of pytest's progress line)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(line, red=True)
    else:
        session.config.get_terminal_writer().line(line, red=True)


def _check_writable(path: Path, option: str) -> None:
    """Refuse at start, before anything is measured, a results path that cannot be written, or that holds a file
    that is not a results file of ours; and remove what a killed writer of that folder left (a SIGKILLed
    session's temporary file), so that it does not wait for the end of this session."""
    from ..results import RESULTS_OUTPUT, output_problem, remove_stale_temporaries

    problem = output_problem(path, RESULTS_OUTPUT)
    if problem:
        raise pytest.UsageError(f"{option}={path}: {problem}")
    if path.parent.is_dir():
        remove_stale_temporaries(path.parent)


#: The name ``PerTestHooks`` is registered under.
PER_TEST_HOOKS: Final = "gpuperf-test-hooks"


class PerTestHooks:
    """The hooks every test of a session passes through, for ``GpuperfSession`` (its setup, call and report) and
    its gate (teardown): registered after collection only where a test measures or carries our markers, as each
    costs every test of the session (500 plain tests: about 9M instructions each)."""

    def __init__(self, session: GpuperfSession) -> None:
        self._session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self._session.before_setup(item)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self._session.before_call(item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        report = yield
        self._session.reported(item, call, report)
        return report

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        self._session.gate.after_teardown(item)
