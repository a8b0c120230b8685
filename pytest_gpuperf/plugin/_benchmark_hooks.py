"""pytest-benchmark's hook specifications, for a ``conftest.py`` written for it, when pytest-gpuperf's ``benchmark``
fixture serves (pytest-benchmark absent or blocked with ``-p no:benchmark``).

The names, arguments and ``firstresult`` markings are those of pytest-benchmark 5's ``hookspec`` module, so
that its users' implementations register unchanged (pytest refuses a hook it has no specification for:
``PluginValidationError: unknown hook``). ``entry.py`` adds them in ``pytest_configure`` only where
pytest-benchmark's own are not registered. Which of them pytest-gpuperf calls, and with what, is
``_benchmark_plugin.py``'s ``BenchmarkPlugin`` (docs/migrating-from-pytest-benchmark.md, "pytest-benchmark's hooks"):
the machine info and commit info hooks, into the run's fingerprint (``machine_info``, ``commit_info``), which
the pytest-benchmark JSON writes back as its ``machine_info`` and ``commit_info``; the JSON hooks, on the
pytest-benchmark JSON that ``--benchmark-json=PATH`` writes (ours: accepted where our fixture serves). The others
are accepted and not called: they act on pytest-benchmark's own table and its comparison of saved sessions, which
a run of pytest-gpuperf does not have.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_benchmark_scale_unit(config: Any, unit: Any, benchmarks: Any, best: Any, worst: Any, sort: Any) -> Any:
    """pytest-benchmark's time scaling of its table. Accepted, not called: pytest-gpuperf's table scales its own."""


@hookspec(firstresult=True)
def pytest_benchmark_generate_machine_info(config: Any) -> Any:
    """The whole ``machine_info`` (a dict), replacing the one pytest-gpuperf derives from the run's fingerprint."""


@hookspec
def pytest_benchmark_update_machine_info(config: Any, machine_info: Any) -> None:
    """Add to ``machine_info`` in place (a GPU's name, the driver); it is kept in the fingerprint's ``machine_info``."""


@hookspec(firstresult=True)
def pytest_benchmark_generate_commit_info(config: Any) -> Any:
    """The whole ``commit_info`` (a dict), replacing the one derived from the run's git state."""


@hookspec
def pytest_benchmark_update_commit_info(config: Any, commit_info: Any) -> None:
    """Add to ``commit_info`` in place; it is kept in the fingerprint's ``commit_info``."""


@hookspec(firstresult=True)
def pytest_benchmark_group_stats(config: Any, benchmarks: Any, group_by: Any) -> Any:
    """pytest-benchmark's grouping of its table. Accepted, not called: pytest-gpuperf keeps ``group`` per record."""


@hookspec(firstresult=True)
def pytest_benchmark_generate_json(
    config: Any, benchmarks: Any, include_data: Any, machine_info: Any, commit_info: Any
) -> Any:
    """The whole JSON ``--benchmark-json`` writes (a dict); pytest-gpuperf's own implementation, run last, makes it
    from the run, the benchmarks with ``has_error`` left out."""


@hookspec
def pytest_benchmark_update_json(config: Any, benchmarks: Any, output_json: Any) -> None:
    """Change ``output_json`` in place before ``--benchmark-json`` writes it (add fields)."""


@hookspec
def pytest_benchmark_compare_machine_info(
    config: Any, benchmarksession: Any, machine_info: Any, compared_benchmark: Any
) -> None:
    """pytest-benchmark's check of a saved session's machine. Accepted, not called: the gate's comparability rule
    checks the fingerprints."""
