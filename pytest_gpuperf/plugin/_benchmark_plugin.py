"""The plugin object that serves pytest-benchmark's ``benchmark`` fixture where pytest-benchmark is absent or blocked
(``-p no:benchmark``): registered by ``entry.py`` at every such start, so it holds only the hooks and the fixture;
what a ``benchmark`` test uses (its marker's reading, the fixture object, the stats, the JSON) is ``_benchmark.py``,
imported when a collected test first asks for ``benchmark`` (``bench/startup.py`` measures what a start costs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from ._markers import gpus_used

if TYPE_CHECKING:
    from ..measuring import AllCudaBackend, Backend, DeviceSlot
    from ._benchmark import BenchmarkFixture, ExportedBenchmark, MarkerSettings
    from ._session import GpuperfSession

__all__ = ["MARKER", "BenchmarkPlugin"]

MARKER: Final = (
    "benchmark(**settings): pytest-benchmark's marker, read by pytest-gpuperf's benchmark fixture: "
    "max_time, min_rounds and precision map to its settings, group is kept; the rest is listed as ignored"
)


class BenchmarkPlugin:
    """Registered by ``entry.py`` when pytest-benchmark is absent or blocked: the fixture, the marker's check,
    and the once-per-session list of marker keywords ignored."""

    def __init__(self, config: pytest.Config, session: Callable[[], GpuperfSession]) -> None:
        self._config = config
        self._session = session  # made on first use: a session of plain tests makes none
        #: keyword -> (values as written, the reason), in the order first seen
        self.ignored: dict[str, tuple[list[str], str]] = {}
        #: host-clock CUDA backends by device: ``cuda`` (every visible device), ``cuda:N`` (a bound process's)
        self._host_timed: dict[str, AllCudaBackend] = {}
        self._exported: dict[str, Any] = {}  # the run as pytest-benchmark's JSON, for --benchmark-json
        self._json_line = ""

    @property
    def session(self) -> GpuperfSession:
        return self._session()

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """A ``benchmark`` test's marker is checked at collection, as pytest-benchmark reads it only for a test that
        asks for the fixture (a plain test pays nothing here)."""
        if "benchmark" not in metafunc.fixturenames:
            return
        from ..measuring import SettingError
        from ._benchmark import gpuperf_marked, read_markers

        node = metafunc.definition
        try:
            measure = self.session.item_settings(node).measure
        except SettingError:
            return  # the session's own check of @pytest.mark.gpuperf reports it
        problem = ""
        try:
            read_markers(node).apply(measure, keep=gpuperf_marked(node))
        except SettingError as exc:
            problem = str(exc)
        if problem:  # failed outside the except block, so that the message is not printed twice (chained)
            pytest.fail(f"{metafunc.definition.nodeid}: {problem}", pytrace=False)

    @pytest.fixture
    def benchmark(self, request: pytest.FixtureRequest) -> Generator[BenchmarkFixture, None, None]:
        """pytest-benchmark's ``benchmark`` fixture on pytest-gpuperf's synchronized timing (``-p no:benchmark``)."""
        from ..measuring import DeviceError
        from ._benchmark import BenchmarkFixture, gpuperf_marked, read_markers, target_slot

        item = request.node
        marks = read_markers(item)
        self._note(marks)
        settings = marks.apply(self.session.item_settings(item).measure, keep=gpuperf_marked(item))
        try:
            slot = target_slot(item, self.session.inventory, self.session.bound_slot())
        except DeviceError as exc:
            pytest.fail(f"gpuperf: {exc}", pytrace=False)
        self.session.refuse_shared(slot)  # xdist workers timing on one device at once, as for `gpuperf` tests
        self._skip_multi_gpu(item, slot)
        fixture = BenchmarkFixture(item, self.session, self._backend(slot), slot, settings, marks.group)
        fixture.disabled = self.session.untimed
        yield fixture
        fixture.finish()

    def _backend(self, slot: DeviceSlot) -> Backend:
        """The CPU's and MPS's backend are the session's; on CUDA the host clock between synchronizations of every
        visible device the process uses (``cuda``: those it has a CUDA context on) or of the process's own GPU
        (``cuda:N``), the same timer either way, so that a record measured under ``-n`` compares with one measured
        without."""
        if slot.kind != "cuda":
            return self.session.backend(slot)
        backend = self._host_timed.get(slot.id)
        if backend is None:
            from ..measuring import AllCudaBackend

            devices = tuple(range(self.session.inventory.cuda_count)) if slot.index is None else (slot.index,)
            backend = self._host_timed[slot.id] = AllCudaBackend(devices, name=slot.id)
            self.session.book.describe_device(slot.id, backend.describe())
        return backend

    def _skip_multi_gpu(self, item: pytest.Item, slot: DeviceSlot) -> None:
        """A test marked ``gpuperf_requires(..., count=2)`` uses several GPUs: it skips in a process bound to one
        beside others, as a ``gpuperf`` test does (``_markers.unmet_requirement``)."""
        bound = self.session.binding
        if bound is None:
            return
        for marker in item.iter_markers("gpuperf_requires"):
            count = gpus_used(marker, slot)
            if count > 1 and bound.shared:
                pytest.skip(f"gpuperf: {bound.multi_gpu_refusal(count)}")

    def _note(self, marks: MarkerSettings) -> None:
        for keyword, value, why in marks.ignored:
            values, _ = self.ignored.setdefault(keyword, ([], why))
            if value not in values:
                values.append(value)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Refuse, before anything is measured, a ``--benchmark-json`` path holding a file that is not a
        pytest-benchmark JSON (``json_kind``)."""
        path = self._json_path()
        if path is not None:
            from ..results import output_problem
            from ._benchmark import json_kind

            problem = output_problem(path, json_kind())
            if problem:
                raise pytest.UsageError(f"--benchmark-json={path}: {problem}")

    def _json_path(self) -> Path | None:
        """``--benchmark-json``'s path, where this process writes it (the reporter of a timed run)."""
        from ._untimed import JSON_DEST

        given = self._config.getoption(JSON_DEST, None)
        if not given or not self.session.is_reporter or self.session.settings.measuring in ("untimed", "skip"):
            return None
        return Path(given)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """``--benchmark-json``: the run as pytest-benchmark's JSON (``results.to_pytest_benchmark``), made by the
        ``pytest_benchmark_generate_json`` hook (ours below, unless a suite's replaces or wraps it), then given to
        ``pytest_benchmark_update_json``, as pytest-benchmark does; written atomically."""
        path = self._json_path()
        if path is None:
            return
        from ..results import ResultsError, atomic_write_text, to_pytest_benchmark
        from ._benchmark import ExportedBenchmark, json_kind

        config = self._config
        exported = to_pytest_benchmark(self.session.run(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED))
        benchmarks = [ExportedBenchmark(entry) for entry in exported["benchmarks"]]
        self._exported = exported
        output = config.hook.pytest_benchmark_generate_json(
            config=config,
            benchmarks=benchmarks,
            include_data=True,
            machine_info=exported["machine_info"],
            commit_info=exported["commit_info"],
        )
        config.hook.pytest_benchmark_update_json(config=config, benchmarks=benchmarks, output_json=output)
        info = output.get("machine_info") if isinstance(output, dict) else None
        if isinstance(info, dict):  # how a later run knows the file as ours, to replace it
            info.setdefault("gpuperf", exported["machine_info"]["gpuperf"])
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        try:
            atomic_write_text(path, json.dumps(output, indent=2, default=str) + "\n", kind=json_kind())
        except ResultsError as exc:
            if reporter is not None:
                reporter.write_line(f"gpuperf: ERROR: --benchmark-json: {exc}", red=True)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        self._json_line = f"gpuperf: wrote {len(benchmarks)} benchmarks to {path} (pytest-benchmark's JSON)"

    @pytest.hookimpl(trylast=True)
    def pytest_benchmark_generate_json(
        self,
        config: pytest.Config,
        benchmarks: list[ExportedBenchmark],
        include_data: bool,
        machine_info: Any,
        commit_info: Any,
    ) -> dict[str, Any]:
        """pytest-benchmark's default JSON, from the run: the benchmarks without an error (as pytest-benchmark
        leaves them out; a suite's wrapper may clear ``has_error``), with the machine and commit info given."""
        return {
            **self._exported,
            "machine_info": machine_info,
            "commit_info": commit_info,
            "benchmarks": [bench.as_dict(include_data=include_data) for bench in benchmarks if not bench.has_error],
        }

    def pytest_gpuperf_fingerprint(self, fingerprint: dict[str, Any]) -> None:
        """pytest-benchmark's machine info and commit info hooks, where a suite implements them: what they make is
        kept in the run's fingerprint (``machine_info``, ``commit_info``), from which the pytest-benchmark export
        writes them back. Their starting points are derived from the fingerprint, as the export derives them.
        Nothing is added for a suite that implements none of them. The comparability rule ignores both keys."""
        from ..results import Fingerprint, pytest_benchmark_commit_info, pytest_benchmark_machine_info
        from ._benchmark import json_safe

        hook, config = self._config.hook, self._config
        view = Fingerprint.from_dict(fingerprint)
        for key, generate, update, derive in (
            (
                "machine_info",
                hook.pytest_benchmark_generate_machine_info,
                hook.pytest_benchmark_update_machine_info,
                pytest_benchmark_machine_info,
            ),
            (
                "commit_info",
                hook.pytest_benchmark_generate_commit_info,
                hook.pytest_benchmark_update_commit_info,
                pytest_benchmark_commit_info,
            ),
        ):
            if not (generate.get_hookimpls() or update.get_hookimpls()):
                continue
            info = generate(config=config)
            info = dict(info) if isinstance(info, Mapping) else derive(view)
            update(config=config, **{key: info})
            fingerprint.update({key: json_safe(info)})  # the hook adds keys in place

    @pytest.hookimpl(tryfirst=True)  # before the session's table, which may be registered after this plugin
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._json_line:
            terminalreporter.write_line(self._json_line)
        if not self.ignored or not self.session.is_reporter:
            return
        terminalreporter.write_sep("-", "gpuperf: @pytest.mark.benchmark keywords ignored")
        for keyword, (values, why) in self.ignored.items():
            shown = ", ".join(f"{keyword}={value}" for value in values)
            terminalreporter.write_line(f"{shown} ignored: {why}")
