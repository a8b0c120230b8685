"""The session object: registered on the plugin manager, holds the run's state; its hooks are methods."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from . import asv, fingerprint
from .devices import KINDS, Backend, DeviceSlot, Inventory, backend_for, probe_inventory, resolve_devices
from .records import Record, ResultsError, Run, save_run
from .report import results_table, speedup_table
from .settings import SettingError, Settings

__all__ = ["SESSION_KEY", "GpuperfSession", "ReferencePeak"]


@dataclass(frozen=True)
class ReferencePeak:
    """A device's measured matmul peak, the 100% of the report's "% peak" column."""

    flops_per_second: float
    how: str  # what was measured, e.g. "matmul bfloat16 n=16384"


class GpuperfSession:
    """State of one pytest session: settings, devices, backends and the records measured."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.records: list[Record] = []
        self._inventory: Inventory | None = None
        self._slots: list[DeviceSlot] | None = None
        self._backends: dict[str, Backend] = {}
        self._fingerprint: dict[str, Any] | None = None
        self._device_descriptions: dict[str, dict[str, Any]] = {}
        #: device id -> its reference peak, measured once per session by the suites (see suites/test_matmul.py)
        self.reference_peaks: dict[str, ReferencePeak] = {}
        #: (test node id, text) lines for the terminal summary: ratios, and why something was not asserted
        self.notes: list[tuple[str, str]] = []
        self._asv: asv.AsvTarget | None = None
        self._asv_note = ""
        # Under torchrun every rank runs the tests; only rank 0 reports and writes.
        self.rank = int(os.environ.get("RANK", "0"))

    # ------------------------------------------------------------ devices

    @property
    def slots(self) -> list[DeviceSlot]:
        """Requested devices, resolved on first use so that runs that never measure never import torch."""
        if self._slots is None:
            self._inventory = probe_inventory()
            self._slots = resolve_devices(self.settings.device, self._inventory)
        return self._slots

    def backend(self, slot: DeviceSlot) -> Backend:
        if slot.id not in self._backends:
            self._backends[slot.id] = backend_for(slot)
            self._device_descriptions[slot.id] = dict(self._backends[slot.id].describe())
        return self._backends[slot.id]

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

    def fingerprint(self) -> dict[str, Any]:
        if self._fingerprint is None:
            self._fingerprint = fingerprint.collect(self.config.rootpath)
            self.config.hook.pytest_gpuperf_fingerprint(fingerprint=self._fingerprint)
        return self._fingerprint

    def add(self, record: Record) -> None:
        self.records.append(record)

    def add_note(self, nodeid: str, text: str) -> None:
        self.notes.append((nodeid, text))

    def offer_reference_peak(self, device: str, flops_per_second: float, how: str) -> ReferencePeak:
        """Keep the highest FLOP/s offered for ``device``; return the device's peak after the offer."""
        current = self.reference_peaks.get(device)
        if current is None or flops_per_second > current.flops_per_second:
            self.reference_peaks[device] = ReferencePeak(flops_per_second, how)
        return self.reference_peaks[device]

    # ------------------------------------------------------------ hooks

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.settings.missing_device == "error":
            missing = [s for s in self.slots if not s.available]
            if missing:
                reasons = "; ".join(s.reason for s in missing)
                raise pytest.UsageError(
                    f"--gpuperf-missing-device=error: {reasons}. Run on a machine with that device, "
                    "or pass --gpuperf-missing-device=skip to skip its tests"
                )
        if self.settings.json and self.rank == 0:
            _check_writable(Path(self.settings.json), "--gpuperf-json")
        if self.settings.asv and self.rank == 0:
            try:
                self._asv = asv.AsvTarget.prepare(
                    Path(self.settings.asv), self.settings.asv_machine, self.config.rootpath
                )
            except asv.AsvError as exc:
                raise pytest.UsageError(f"--gpuperf-asv={self.settings.asv}: {exc}") from None

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        try:
            self.item_settings(metafunc.definition)
        except SettingError as exc:
            pytest.fail(f"{metafunc.definition.nodeid}: {exc}", pytrace=False)
        if "gpuperf_device" not in metafunc.fixturenames:
            return
        requires = list(metafunc.definition.iter_markers("gpuperf_requires"))
        for marker in requires:
            problem = _bad_requirement(marker)
            if problem:
                pytest.fail(f"{metafunc.definition.nodeid}: {problem}", pytrace=False)
        params = []
        for slot in self.slots:
            marks: list[pytest.MarkDecorator] = []
            if not slot.available:
                marks.append(pytest.mark.skip(reason=f"gpuperf: {slot.reason}"))
            else:
                for marker in requires:
                    why = _unmet_requirement(marker, slot, self._inventory)
                    if why:
                        marks.append(pytest.mark.skip(reason=f"gpuperf: {why}"))
            params.append(pytest.param(slot, marks=marks, id=slot.id))
        metafunc.parametrize("gpuperf_device", params, indirect=True)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.records or self.rank != 0:
            return
        terminalreporter.write_sep("=", "gpuperf results")
        peaks = {device: peak.flops_per_second for device, peak in self.reference_peaks.items()}
        terminalreporter.write_line(results_table(self.records, peaks=peaks))
        for device, peak in self.reference_peaks.items():
            terminalreporter.write_line(f"% peak: of {device}'s reference peak, {peak.how}")
        speedups = speedup_table(self.records, [slot.id for slot in self.slots if slot.available])
        if speedups:
            terminalreporter.write_sep("-", "gpuperf speedup of each device against the first")
            terminalreporter.write_line(speedups)
        if self.notes:
            terminalreporter.write_sep("-", "gpuperf notes")
            for nodeid, text in self.notes:
                terminalreporter.write_line(f"{nodeid}: {text}")
        if self.settings.json:
            terminalreporter.write_line(f"gpuperf: wrote {len(self.records)} records to {self.settings.json}")
        if self._asv_note:
            terminalreporter.write_line(self._asv_note)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.rank != 0:
            return
        try:
            if self.settings.json:
                save_run(Path(self.settings.json), self.run())
            if self._asv is not None and self.records:
                self._asv_note = self._asv.write(self.run())
        except ResultsError as exc:
            session.config.get_terminal_writer().line(f"gpuperf: ERROR: {exc}", red=True)
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def run(self) -> Run:
        settings = asdict(self.settings)
        settings["device"] = ",".join(self.settings.device)
        return Run(
            created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            fingerprint=self.fingerprint(),
            settings=settings,
            records=list(self.records),
            devices={
                device: {**description, **_peak_description(self.reference_peaks.get(device))}
                for device, description in self._device_descriptions.items()
            },
        )


def _peak_description(peak: ReferencePeak | None) -> dict[str, Any]:
    if peak is None:
        return {}
    return {"reference_peak": {"FLOP/s": peak.flops_per_second, "how": peak.how}}


def _bad_requirement(marker: pytest.Mark) -> str:
    usage = 'write for example @pytest.mark.gpuperf_requires("cuda") or @pytest.mark.gpuperf_requires("cuda", count=2)'
    if not marker.args or any(kind not in KINDS for kind in marker.args):
        return f"@pytest.mark.gpuperf_requires{marker.args!r}: name device kinds among {', '.join(KINDS)}; {usage}"
    unknown = set(marker.kwargs) - {"count"}
    count = marker.kwargs.get("count", 1)
    if unknown or not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return (
            f"@pytest.mark.gpuperf_requires: only count=<whole number >= 1> is accepted, got {marker.kwargs!r}; {usage}"
        )
    return ""


def _unmet_requirement(marker: pytest.Mark, slot: DeviceSlot, inventory: Inventory | None) -> str:
    """``@pytest.mark.gpuperf_requires("cuda", count=2)``: why this slot does not meet it, or ''."""
    kinds = marker.args
    count = int(marker.kwargs.get("count", 1))
    if slot.kind not in kinds:
        return f"needs a {' or '.join(kinds)} device; this run is on {slot.id}"
    have = inventory.cuda_count if (inventory and slot.kind == "cuda") else 1
    if count > have:
        return f"needs {count} {slot.kind} devices; this machine has {have}"
    return ""


def _check_writable(path: Path, option: str) -> None:
    """Refuse at start, before anything is measured, a results path that cannot be written."""
    if path.is_dir():
        raise pytest.UsageError(
            f"{option}={path}: that is a directory; give a file path such as {path / 'results.json'}"
        )
    existing = path.absolute().parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise pytest.UsageError(f"{option}={path}: {existing} is a file, not a directory; choose another location")
    if not os.access(existing, os.W_OK):
        raise pytest.UsageError(f"{option}={path}: {existing} is not writable; choose a writable location")


SESSION_KEY = pytest.StashKey[GpuperfSession]()
