"""The docs stay true: the options page is the options table, links resolve, the README is a front page
whose test command is the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_gpuperf.gate._render import HEADERS as GATE_HEADERS
from pytest_gpuperf.plugin._options import OPTIONS
from pytest_gpuperf.plugin._summary import HEADERS as RESULTS_HEADERS

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in path.read_text().splitlines() if line.startswith("#")}


def test_the_options_page_has_every_option_with_every_column() -> None:
    page = (ROOT / "docs" / "options.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `--gpuperf-")]
    expected = [
        f"| `{spec.flag}` | `{spec.ini}` | {'-' if spec.default is None else f'`{spec.default}`'} | "
        f"{'yes' if spec.marker else 'no'} | {spec.help} |"
        for spec in OPTIONS
    ]
    assert rows == expected, "docs/options.md must list every option as pytest --help does, in the same order"


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(path: Path) -> None:
    for target in _LINK.findall(path.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{path.name} links to {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{path.name} links to {target}: no such heading"


def test_the_readme_is_a_front_page_whose_test_command_ci_runs() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```\n(.*?)\n```", section, flags=re.S)
    assert commands[-2:] == ["pytest suites/", "pytest"], "the two commands: the suites, then the project's tests"
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == "pytest", ".ci/run ends with exactly the README's test command"


def test_the_workloads_example_shown_is_the_shipped_file() -> None:
    page = (ROOT / "docs" / "writing-tests.md").read_text()
    section = page.split("### A complete example", 1)[1]
    (shown,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:1]
    assert shown == (ROOT / "docs" / "examples" / "workloads.py").read_text()


def test_the_tables_shown_in_the_docs_have_the_columns_the_code_prints() -> None:
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    for headers in (RESULTS_HEADERS, GATE_HEADERS):
        assert re.search(r"\s+".join(re.escape(h) for h in headers), glossary), headers
        for header in headers:
            assert f"| {header} |" in glossary or f"| {header}," in glossary or f", {header} |" in glossary, header


def test_the_readme_example_runs_as_copied_on_a_cpu(pytester: pytest.Pytester) -> None:
    """The README's first example is copied into a file and run on the CPU as shown.

    Its bound holds on any device (a GPU is far above it, a CPU is the slowest): it is at
    least 5x below the CPU figure the README shows. The run itself gets a bound far below
    it, so that this test checks that the example runs, not how fast this machine is."""
    section = README.read_text().split("## An example", 1)[1]
    (code, *_) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    (bound,) = re.findall(r'at_least="(\d+) GFLOP/s"', code)
    (shown,) = re.findall(r"test_matmul +cpu .* ([\d.]+) GFLOP/s", section)
    assert float(bound) * 5 <= float(shown), "the README's bound must hold on a CPU with room to spare"
    pytester.makepyfile(test_matmul=code.replace(f'at_least="{bound} GFLOP/s"', 'at_least="1 FLOP/s"'))
    result = pytester.runpytest(
        "-p", "no:randomly", "--gpuperf-device=cpu", "--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.05"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["test_matmul *cpu *GFLOP/s*"])
