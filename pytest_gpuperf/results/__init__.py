"""Results: immutable Records and Runs, the gate's typed evidence, the versioned files, the results directory,
and the environment fingerprint with the rule for which runs may be compared."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from ..measuring import throttle_names
    from ._commands import add_parser as add_export_command
    from ._comparable import (
        MUST_MATCH,
        RECORD_KEYS,
        RECORDED_SINCE,
        SHOWN,
        Difference,
        Incomparable,
        blocking_differences,
        check_comparable,
        differences,
        parse_mismatch_keys,
    )
    from ._files import (
        LockHeld,
        ResultsError,
        atomic_export,
        atomic_write_text,
        file_kind,
        load_run,
        load_runs,
        locked,
        output_path_problem,
        save_baseline_file,
        save_run,
    )
    from ._fingerprint import CudaDevice, Fingerprint, GitState, Nvml, NvmlGpu, collect
    from ._record import (
        SCHEMA,
        SCHEMA_VERSION,
        Evidence,
        MeasuredTest,
        Record,
        Rerun,
        Round,
        Run,
        short_test,
        with_repeats,
    )
    from ._runs import add_parser as add_runs_command
    from ._starved import disturbed_by, starved, starved_flag, starved_message
    from ._store import (
        DEFAULT_RESULTS_DIR,
        MAX_RUNS,
        Baseline,
        ReplaceRefused,
        ResultsDir,
        SaveOutcome,
        StorageError,
        add_results_dir_argument,
        check_name,
        same_code,
    )
    from ._table import HEADERS as RESULTS_HEADERS
    from ._table import (
        Ceiling,
        ceilings,
        energy_lines,
        flags,
        peak_memory_cell,
        peaks_of,
        per_joule_cell,
        percent_of_peak,
        results_table,
        table_notes,
    )
    from ._traces import (
        BASELINE_TRACE_SUFFIX,
        TRACE_LEVELS,
        baseline_trace,
        baseline_traces_dir,
        save_baseline_traces,
        trace_name,
        write_trace,
    )

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "BASELINE_TRACE_SUFFIX",
    "DEFAULT_RESULTS_DIR",
    "MAX_RUNS",
    "MUST_MATCH",
    "RECORDED_SINCE",
    "RECORD_KEYS",
    "RESULTS_HEADERS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SHOWN",
    "TRACE_LEVELS",
    "Baseline",
    "Ceiling",
    "CudaDevice",
    "Difference",
    "Evidence",
    "Fingerprint",
    "GitState",
    "Incomparable",
    "LockHeld",
    "MeasuredTest",
    "Nvml",
    "NvmlGpu",
    "Record",
    "ReplaceRefused",
    "Rerun",
    "ResultsDir",
    "ResultsError",
    "Round",
    "Run",
    "SaveOutcome",
    "StorageError",
    "add_export_command",
    "add_results_dir_argument",
    "add_runs_command",
    "atomic_export",
    "atomic_write_text",
    "baseline_trace",
    "baseline_traces_dir",
    "blocking_differences",
    "ceilings",
    "check_comparable",
    "check_name",
    "collect",
    "differences",
    "disturbed_by",
    "energy_lines",
    "file_kind",
    "flags",
    "load_run",
    "load_runs",
    "locked",
    "output_path_problem",
    "parse_mismatch_keys",
    "peak_memory_cell",
    "peaks_of",
    "per_joule_cell",
    "percent_of_peak",
    "results_table",
    "same_code",
    "save_baseline_file",
    "save_baseline_traces",
    "save_run",
    "short_test",
    "starved",
    "starved_flag",
    "starved_message",
    "table_notes",
    "throttle_names",
    "trace_name",
    "with_repeats",
    "write_trace",
]
