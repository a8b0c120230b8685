"""The package as a whole: its public API (listed here, so that adding to it is a decision) resolves lazily, and
starting pytest loads only what options need."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_gpuperf

PACKAGES = (
    "pytest_gpuperf",
    "pytest_gpuperf.measuring",
    "pytest_gpuperf.results",
    "pytest_gpuperf.gate",
    "pytest_gpuperf.history",
    "pytest_gpuperf.report",
    "pytest_gpuperf.plugin",
)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_resolves_and_is_listed(name: str) -> None:
    package = importlib.import_module(name)
    exported = sorted(package.__all__)
    assert exported == dir(package), "__all__ and the TYPE_CHECKING imports name the same exports"
    for attribute in exported:
        assert getattr(package, attribute) is not None, f"{name}.{attribute}"
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'nothing_here'"):
        getattr(package, "nothing_here")  # noqa: B009 - the lazy lookup's error is what is tested


def _parsed_exports(init_file: Path) -> dict[str, tuple[str, str]]:
    """The ``if TYPE_CHECKING:`` block's imports as Python's parser reads them."""
    table: dict[str, tuple[str, str]] = {}
    for node in ast.parse(init_file.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.level > 0, ast.unparse(statement)
                module = "." * statement.level + (statement.module or "")
                table.update({alias.asname or alias.name: (module, alias.name) for alias in statement.names})
    return table


@pytest.mark.parametrize("name", PACKAGES)
def test_the_lazy_table_reads_the_type_checking_imports_as_python_does(name: str) -> None:
    """``_lazy`` reads each ``__init__``'s block as text (parsing it cost a session more than the import it serves):
    what it reads is what Python's parser reads, comments, ``as`` names and parenthesized lists included."""
    from pytest_gpuperf import _lazy

    init_file = Path(importlib.import_module(name).__file__ or "")
    assert _lazy._table(str(init_file)) == _parsed_exports(init_file)


def test_the_lazy_table_reads_comments_aliases_and_lists(tmp_path: Path) -> None:
    init_file = tmp_path / "__init__.py"
    init_file.write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from . import _values as values  # a module\n"
        "    from ._a import (\n        One,  # the first\n        two as three,\n    )\n"
        "    from .._b import four\n"
        "\nfrom ._c import not_lazy\n"
    )
    from pytest_gpuperf import _lazy

    expected = {"values": (".", "_values"), "One": ("._a", "One"), "three": ("._a", "two"), "four": (".._b", "four")}
    assert _lazy._table(str(init_file)) == expected == _parsed_exports(init_file)


def test_the_documented_imports_keep_working() -> None:
    from pytest_gpuperf import Measurement, Step, Workload, measure

    assert callable(measure) and Measurement.__name__ == "Measurement"
    assert Step.__module__.startswith("pytest_gpuperf.measuring") and Workload.__name__ == "Workload"


_LOADED = """
import sys
import pytest
import pytest_gpuperf.plugin.entry
print("\\n".join(sorted(sys.modules)))
"""


def test_loading_the_plugin_imports_no_parser_measuring_or_gate_code() -> None:
    """What pytest imports at every start: no torch, numpy or tabulate, none of the measuring core, the results,
    the gate or history, not even the options' parsers (``_settings``: loaded with the session), and none of the
    standard library's modules that only measuring (``statistics``, ``fractions``) or a misspelt marker keyword
    (``difflib``) needs."""
    done = subprocess.run([sys.executable, "-c", _LOADED], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "pytest_gpuperf.plugin.entry" in loaded
    heavy = {"torch", "numpy", "tabulate", "statistics", "fractions", "difflib"}
    heavy |= {"pytest_gpuperf.cli", "pytest_gpuperf.suites", "pytest_gpuperf.plugin._settings"}
    heavy |= {f"pytest_gpuperf.{name}" for name in ("measuring", "results", "gate", "history", "report")}
    assert not heavy & loaded
    assert not {name for name in loaded if name.split(".")[1:2] in (["measuring"], ["gate"])}


_SESSION_MODULES = """
import sys
import pytest
code = pytest.main(["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:benchmark", *sys.argv[1:]])
made = [name for name in ("_session", "_gate", "_records") if f"pytest_gpuperf.plugin.{name}" in sys.modules]
print("MADE:" + (",".join(made) or "none"), int(code))
core = sorted({name.split(".")[1] for name in sys.modules if name.split(".")[:2] in [["pytest_gpuperf", p] for p in (
    "measuring", "results", "gate")]})
print("CORE:" + (",".join(core) or "none"))
"""

#: What each session gives, and what it must load: a session of plain tests, none of the session's or gate's code.
_SESSIONS = {
    "plain": ("def test_a():\n    pass\n", [], "none"),
    "an option": ("def test_a():\n    pass\n", ["--gpuperf-max-time=1"], "_session,_gate,_records"),
    "an ini key": ("def test_a():\n    pass\n", ["-o", "gpuperf_max_time=1"], "_session,_gate,_records"),
    "a marker": (
        "import pytest\n\n@pytest.mark.gpuperf(target=0.5)\ndef test_a():\n    pass\n",
        [],
        "_session,_gate,_records",
    ),
    "a measuring fixture": ("def test_a(benchmark):\n    benchmark(sum, [1])\n", [], "_session,_gate,_records"),
    "the gpuperf fixture": (
        "import pytest\n\n@pytest.mark.gpuperf(max_time=0.05, min_time=0.01, warmup_time=0.01)\n"
        "def test_a(gpuperf):\n    gpuperf.measure(lambda: None)\n",
        [],
        "_session,_gate,_records",
    ),
}


@pytest.mark.parametrize("case", sorted(_SESSIONS))
def test_a_session_of_plain_tests_loads_no_session_or_gate_code(case: str, tmp_path: Path) -> None:
    """pytest loads the plugin at every start: the session and the gate are made only where a session uses them (an
    option or ini key given, a test that measures or carries our marker); a session of plain tests loads neither."""
    source, args, expected = _SESSIONS[case]
    (tmp_path / "test_it.py").write_text(source)
    done = subprocess.run(
        [sys.executable, "-c", _SESSION_MODULES, *args], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert f"MADE:{expected} 0" in done.stdout, done.stdout + done.stderr
    if case == "plain":  # nor the measuring core's settings, the options' parsers or the gate's verdicts
        assert "CORE:none" in done.stdout, done.stdout
    # a session made during collection still parametrizes, measures and reports its first test
    if case == "the gpuperf fixture":
        assert re.search(r"^test_a +cpu +\S+ ", done.stdout, re.MULTILINE), done.stdout


#: What each subpackage may import of the package: dependencies point one way (docs/architecture.md).
#: ``_git``, ``_process``, ``_progress``, ``_signals``, ``_jsonfile``, ``_escape`` and ``_suites`` are helpers beside
#: the subpackages that import nothing of the package; the measuring core reads its expectations files through
#: ``_jsonfile`` (bounded reads).
UTILITIES = {"_git", "_process", "_progress", "_signals", "_jsonfile", "_escape", "_suites"}
ALLOWED = {
    "measuring": {"_jsonfile"},
    "results": {"measuring", *UTILITIES},
    "gate": {"measuring", "results", *UTILITIES},
    "history": {"measuring", "results", "gate", *UTILITIES},
    "report": {"measuring", "results", "gate", *UTILITIES},
    "plugin": {"measuring", "results", "gate", "history", "report", *UTILITIES},
}
ROOT = Path(pytest_gpuperf.__file__).parent


def _imported_siblings(path: Path) -> set[str]:
    """The top-level parts of the package that a module inside a subpackage imports (``from ..gate import x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 2:  # from ..gate import x; from .. import _git
            found |= {node.module.split(".")[0]} if node.module else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pytest_gpuperf."):
            found.add((node.module or "").split(".")[1])
    return {name for name in found if name != "_lazy"}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_dependencies_point_one_way(package: str) -> None:
    for path in sorted((ROOT / package).glob("*.py")):
        wrong = _imported_siblings(path) - ALLOWED[package]
        assert not wrong, f"{path.relative_to(ROOT)} imports {sorted(wrong)}: {package} may import {ALLOWED[package]}"


#: The repository's code that imports others' (``tests/``, which tests internals, is not among them).
REPOSITORY = ROOT.parent
SOURCES = ("pytest_gpuperf", "suites", "bench", "benchmarks", "docs/examples")
#: Private modules of other projects imported on purpose, and why (none of this project's own may be).
FOREIGN_PRIVATE = {
    "_pytest.runner": "runtestprotocol, how pytest-rerunfailures runs an item again: pytest exports it nowhere else",
    "torch._C._profiler": "the profiler's allocation events (CPU peak memory): torch has no public type for them",
    "torch.utils._python_dispatch": "TorchDispatchMode (the GEMM census): torch exports it nowhere else",
    "asv._stats": "asv's own statistics, which bench/gate_power.py compares the gate with",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPOSITORY).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_names(path: Path) -> set[str]:
    """Every dotted name a module imports, relative imports resolved: ``from ..gate import _render`` in
    ``pytest_gpuperf/plugin/_gate.py`` is ``pytest_gpuperf.gate._render``."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def _private_owner(imported: str) -> str | None:
    """The package whose private part ``imported`` reaches (``pytest_gpuperf.gate`` for
    ``pytest_gpuperf.gate._render.gate_lines``), or None when it reaches none."""
    parts = imported.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[:i])
    return None


def test_no_module_imports_another_packages_private_module() -> None:
    """``A.B._c`` (or a private name of ``A.B``) is imported only from inside ``A.B``: other packages use what
    ``A.B`` exports (``gate/_ab.py`` may import ``pytest_gpuperf._git``, ``plugin/_gate.py`` not
    ``pytest_gpuperf.gate._render``)."""
    wrong, foreign = [], set()
    for source in SOURCES:
        for path in sorted((REPOSITORY / source).rglob("*.py")):
            importer = _module_name(path)
            for imported in sorted(_imported_names(path)):
                owner = _private_owner(imported)
                if owner is None or f"{importer}.".startswith(f"{owner}."):
                    continue
                allowed = {name for name in FOREIGN_PRIVATE if f"{imported}.".startswith(f"{name}.")}
                foreign |= allowed
                if not allowed:
                    wrong.append(f"{path.relative_to(REPOSITORY)} imports {imported}")
    assert not wrong, "imports of another package's private module or name:\n" + "\n".join(wrong)
    assert foreign == set(FOREIGN_PRIVATE), "FOREIGN_PRIVATE lists only what is still imported"


def test_the_package_never_imports_the_suites() -> None:
    """The suites sit above the package (``suites/`` in a clone, ``pytest_gpuperf.suites`` in a wheel): they import
    its public API, and no module of the package imports them, under either name. An import would load torch with
    the plugin, and in a clone load the suites' files a second time, as ``pytest_gpuperf.suites`` beside pytest's
    ``suites``; ``_suites.py`` finds them by name, and ``ab`` imports the installed copy only where no clone is."""
    wrong = [
        f"{path.relative_to(REPOSITORY)} imports {name}"
        for path in sorted(ROOT.rglob("*.py"))
        for name in sorted(_imported_names(path))
        if name.split(".")[0] == "suites" or name.startswith("pytest_gpuperf.suites")
    ]
    assert wrong == []


def test_an_exported_module_is_imported_on_first_use() -> None:
    """``from . import _values as values`` in an ``__init__``'s export block: the module, imported when asked."""
    code = (
        "import sys, pytest_gpuperf.measuring as m\n"
        "assert 'pytest_gpuperf.measuring._values' not in sys.modules\n"
        "assert m.values is sys.modules['pytest_gpuperf.measuring._values'] and m.values.fraction('5%') == 0.05\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_measuring_core_runs_without_pytest_or_asv() -> None:
    code = (
        "import sys, importlib, pkgutil, pytest_gpuperf.measuring as m\n"
        "[importlib.import_module(i.name) for i in pkgutil.iter_modules(m.__path__, m.__name__ + '.')]\n"
        "print('\\n'.join(sys.modules))"
    )
    loaded = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    assert "pytest_gpuperf.measuring._paired" in loaded
    forbidden = {"pytest", "_pytest", "asv", "tabulate", "pytest_gpuperf.results", "pytest_gpuperf.gate"}
    assert not forbidden & loaded


# ---------------------------------------------------------------- the public API: a list, so adding to it is a decision

#: ``pytest_gpuperf.__all__``: the names a user may import (docs/api.md documents each; the subpackages' are internal).
PUBLIC_NAMES = (
    "Backend",
    "Check",
    "DeviceSlot",
    "Estimate",
    "Evidence",
    "Gpuperf",
    "GpuperfAssertionError",
    "InconclusiveWarning",
    "MeasureSettings",
    "Measurement",
    "ModeUnsupported",
    "NoDeviceWorkWarning",
    "Paired",
    "Quantity",
    "Record",
    "Run",
    "SamplingPlan",
    "Settings",
    "Step",
    "Workload",
    "WorkloadUnsupported",
    "measure",
    "measure_paired",
    "parse_quantity",
    "user_settings",
)
#: The fixtures, markers and hooks the plugin adds; ``benchmark`` and pytest-benchmark's hooks only where
#: pytest-benchmark is absent or blocked (``-p no:benchmark``), in its place.
FIXTURES = ("benchmark", "gpuperf", "gpuperf_device")
MARKERS = ("benchmark", "gpuperf", "gpuperf_requires")
HOOKS = ("pytest_gpuperf_fingerprint", "pytest_gpuperf_measured", "pytest_gpuperf_record_metadata")
PYTEST_BENCHMARK_HOOKS = (
    "pytest_benchmark_compare_machine_info",
    "pytest_benchmark_generate_commit_info",
    "pytest_benchmark_generate_json",
    "pytest_benchmark_generate_machine_info",
    "pytest_benchmark_group_stats",
    "pytest_benchmark_scale_unit",
    "pytest_benchmark_update_commit_info",
    "pytest_benchmark_update_json",
    "pytest_benchmark_update_machine_info",
)
#: ``pytest-gpuperf``'s commands and subcommands. The options are ``pytest --help``'s snapshot
#: (tests/plugin/test_help.py).
COMMANDS = (
    "ab",
    "compare",
    "export",
    "history",
    "history offline",
    "history publish",
    "history record",
    "history regressions",
    "report",
    "runs",
    "runs prune",
    "runs show",
)


def test_the_public_names_are_these() -> None:
    """A name added to (or dropped from) the top level fails here until it is added to PUBLIC_NAMES and docs/api.md."""
    assert tuple(sorted(PUBLIC_NAMES)) == PUBLIC_NAMES, "kept sorted"
    assert tuple(sorted(pytest_gpuperf.__all__)) == PUBLIC_NAMES


def _plugins_part(pytester: pytest.Pytester) -> tuple[set[str], set[str]]:
    """The markers and hooks a configured pytest has with the plugin and not without it (pytest-benchmark blocked)."""
    ours = pytester.parseconfigure("-p", "no:benchmark")
    bare = pytester.parseconfigure("-p", "no:benchmark", "-p", "no:gpuperf")

    def markers(config: pytest.Config) -> set[str]:
        return {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}

    def hooks(config: pytest.Config) -> set[str]:
        return {name for name in dir(config.hook) if name.startswith("pytest_")}

    return markers(ours) - markers(bare), hooks(ours) - hooks(bare)


def test_the_plugin_adds_these_fixtures_markers_and_hooks(pytester: pytest.Pytester) -> None:
    markers, hooks = _plugins_part(pytester)
    assert tuple(sorted(markers)) == MARKERS
    assert tuple(sorted(hooks)) == tuple(sorted(HOOKS + PYTEST_BENCHMARK_HOOKS))
    result = pytester.runpytest("--fixtures", "-p", "no:benchmark", "-p", "no:randomly")
    fixtures, ours = set(), False
    for line in result.stdout.lines:
        if " fixtures defined from " in line:
            ours = " fixtures defined from pytest_gpuperf." in line
        elif ours and " -- " in line and not line.startswith(" "):
            fixtures.add(line.split()[0])
    assert tuple(sorted(fixtures)) == FIXTURES


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [f"{prefix}{name}", *_commands(sub, f"{prefix}{name} ")]
    return found


def test_the_command_line_has_these_commands() -> None:
    from pytest_gpuperf.cli import parser

    assert tuple(sorted(_commands(parser()))) == COMMANDS


def test_the_api_page_documents_the_public_api_and_no_internal_name() -> None:
    """docs/api.md names every public name, fixture, marker, hook and command, and no subpackage's name (the
    subpackages' ``__all__``s are internal doors)."""
    page = (REPOSITORY / "docs" / "api.md").read_text()
    public = [*PUBLIC_NAMES, *FIXTURES, *MARKERS, *HOOKS]
    missing = [name for name in public if not re.search(rf"`(pytest_gpuperf\.|@pytest\.mark\.)?{name}\b", page)]
    missing += [command for command in COMMANDS if f"`{command}" not in page]
    assert missing == []
    subpackage = r"\b(?:pytest_gpuperf\.)?(?:measuring|results|gate|history|report|plugin)\.[A-Za-z_]+\b"
    assert [name for name in re.findall(subpackage, page) if not name.endswith(".md")] == []
