"""Results: immutable Records and Runs, the gate's typed evidence, the versioned files, the results directory,
and the environment fingerprint with the rule for which runs may be compared."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports

if TYPE_CHECKING:
    from ._commands import add_parser as add_export_command
    from ._comparable import (
        RECORD_KEYS,
        Incomparable,
        blocking_differences,
        check_comparable,
        differences,
        parse_mismatch_keys,
    )
    from ._files import (
        RESULTS_OUTPUT,
        LockHeld,
        OutputKind,
        ResultsError,
        atomic_write_text,
        head_bytes,
        json_of,
        load_run,
        locked,
        output_path_problem,
        output_problem,
        remove_stale_temporaries,
        save_baseline_file,
        save_run,
    )
    from ._fingerprint import CudaDevice, Fingerprint, GitState, Nvml, NvmlGpu, collect
    from ._pytest_benchmark import (
        is_pytest_benchmark,
        pytest_benchmark_commit_info,
        pytest_benchmark_machine_info,
        to_pytest_benchmark,
    )
    from ._record import (
        SCHEMA,
        Evidence,
        Record,
        Round,
        Run,
        short_test,
        with_repeats,
    )
    from ._runs import add_parser as add_runs_command
    from ._starved import disturbed_by, starved_message
    from ._store import (
        DEFAULT_RESULTS_DIR,
        Baseline,
        ReplaceRefused,
        ResultsDir,
        SaveOutcome,
        StorageError,
        add_format_argument,
        add_results_dir_argument,
        check_name,
    )
    from ._table import (
        Ceiling,
        Flag,
        ceilings,
        flag_legend,
        flags,
        peaks_of,
        percent_of_peak,
        reading_columns,
        results_table,
        row_flags,
        table_lines,
        table_notes,
        terminal_width,
        wrap_line,
    )
    from ._traces import (
        TRACE_LEVELS,
        baseline_trace,
        baseline_traces_dir,
        save_baseline_traces,
        trace_file,
        write_trace,
    )

__getattr__, __dir__ = exports(__name__, __file__)

__all__ = [
    "DEFAULT_RESULTS_DIR",
    "RECORD_KEYS",
    "RESULTS_OUTPUT",
    "SCHEMA",
    "TRACE_LEVELS",
    "Baseline",
    "Ceiling",
    "CudaDevice",
    "Evidence",
    "Fingerprint",
    "Flag",
    "GitState",
    "Incomparable",
    "LockHeld",
    "Nvml",
    "NvmlGpu",
    "OutputKind",
    "Record",
    "ReplaceRefused",
    "ResultsDir",
    "ResultsError",
    "Round",
    "Run",
    "SaveOutcome",
    "StorageError",
    "add_export_command",
    "add_format_argument",
    "add_results_dir_argument",
    "add_runs_command",
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
    "flag_legend",
    "flags",
    "head_bytes",
    "is_pytest_benchmark",
    "json_of",
    "load_run",
    "locked",
    "output_path_problem",
    "output_problem",
    "parse_mismatch_keys",
    "peaks_of",
    "percent_of_peak",
    "pytest_benchmark_commit_info",
    "pytest_benchmark_machine_info",
    "reading_columns",
    "remove_stale_temporaries",
    "results_table",
    "row_flags",
    "save_baseline_file",
    "save_baseline_traces",
    "save_run",
    "short_test",
    "starved_message",
    "table_lines",
    "table_notes",
    "terminal_width",
    "to_pytest_benchmark",
    "trace_file",
    "with_repeats",
    "wrap_line",
    "write_trace",
]
