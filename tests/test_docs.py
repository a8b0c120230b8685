"""The docs stay true: the options page is the options table, every relative link and anchor in the
README, docs/ and the lab's notebook (bench/evidence/) resolves (and every page of them the code names), no
manual page is over 600 lines nor a notebook page over 400, the README is a front page whose test command is
the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_gpuperf.gate._render import HEADERS as GATE_HEADERS
from pytest_gpuperf.measuring import readings
from pytest_gpuperf.plugin._options import OPTIONS
from pytest_gpuperf.results._table import HEADERS as RESULTS_HEADERS
from tests.synthetic import make_measurement

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: The lab's notebook: every figure about the tool, beside the scripts that make them.
EVIDENCE = sorted((ROOT / "bench" / "evidence").glob("*.md"))
#: The longest a page may be: the manual is read, the notebook is looked up.
MANUAL_LINES = 600
EVIDENCE_LINES = 400
#: An inline link or image, ``[text](target)``, and a reference definition, ``[label]: target``.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)|^ {0,3}\[[^\]]+\]:\s+(\S+)", re.MULTILINE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
#: A page of docs/ or of the notebook named in code (a docstring, a message, a help text), with its anchor or
#: section, if any.
_CODE_REF = re.compile(r"((?:docs|bench/evidence)/[\w-]+\.md)(?:#([\w-]+)|, section '([^']+)')?")
_SOURCES = ("pytest_gpuperf", "suites", "bench", "benchmarks", "tests", "docs/examples")


def _prose(text: str) -> str:
    """The text outside fenced code blocks: a ``#`` comment or a ``[x](y)`` in code is neither heading nor link."""
    kept, fence = [], ""
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1) == fence:
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        kept.append(line)
    return "\n".join(kept)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors_of(text: str) -> set[str]:
    """Every heading's anchor, as GitHub makes them: a repeated heading gets ``-1``, ``-2`` ..."""
    anchors: set[str] = set()
    for line in _prose(text).splitlines():
        heading = _HEADING.match(line)
        if heading:
            slug = base = _slug(heading.group(2))
            repeat = 0
            while slug in anchors:
                repeat += 1
                slug = f"{base}-{repeat}"
            anchors.add(slug)
    return anchors


def _anchors(path: Path) -> set[str]:
    return _anchors_of(path.read_text())


def _links(text: str) -> list[str]:
    return [inline or defined for inline, defined in _LINK.findall(_prose(text))]


def _broken_links(path: Path) -> list[str]:
    """Each relative link of a Markdown page whose file or heading does not exist, with the reason."""
    broken = []
    for target in _links(path.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{path.name} links to {target}, which does not exist")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{path.name} links to {target}: no such heading")
    return broken


def test_the_options_page_has_every_option_with_every_column() -> None:
    page = (ROOT / "docs" / "options.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `--gpuperf-")]
    expected = [
        f"| `{spec.flag}` | `{spec.ini}` | {'-' if spec.default is None else f'`{spec.default}`'} | "
        f"{'yes' if spec.marker else 'no'} | {spec.help} |"
        for spec in OPTIONS
    ]
    assert rows == expected, "docs/options.md must list every option as pytest --help does, in the same order"


@pytest.mark.parametrize("path", [README, *DOCS, *EVIDENCE], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert _broken_links(path) == []


def test_no_manual_page_is_over_600_lines_and_no_notebook_page_over_400() -> None:
    assert len(DOCS) > 10 and len(EVIDENCE) > 3, "the manual and the notebook must still be found"
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in DOCS if (n := len(p.read_text().splitlines())) > MANUAL_LINES]
    long += [
        f"{p.relative_to(ROOT)}: {n} lines" for p in EVIDENCE if (n := len(p.read_text().splitlines())) > EVIDENCE_LINES
    ]
    assert long == [], f"a manual page holds at most {MANUAL_LINES} lines, a notebook page {EVIDENCE_LINES}"


def test_the_link_check_sees_what_github_renders(tmp_path: Path) -> None:
    """Headings in code are not anchors, links in code are not links, repeated headings count up, and
    reference definitions are links: a broken one of each kind is found, a good one is not."""
    (tmp_path / "other.md").write_text("# Other\n\n## Twice\n\n## Twice\n\n```python\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[a](other.md#twice-1) [b](other.md#not-a-heading) [c](missing.md) [d](#page)\n\n"
        "```\n[e](also-missing.md)\n```\n\n[f]: other.md#twice-2\n\n# Page\n"
    )
    assert _broken_links(page) == [
        "page.md links to other.md#not-a-heading: no such heading",
        "page.md links to missing.md, which does not exist",
        "page.md links to other.md#twice-2: no such heading",
    ]


def test_every_docs_page_the_code_names_exists_with_its_heading() -> None:
    """Docstrings, messages and help texts that send a reader to a page of docs/ or bench/evidence/, at an
    anchor (``#...``) or a section (``, section '...'``), point at a page and heading that exist."""
    named = 0
    for folder in _SOURCES:
        for source in sorted((ROOT / folder).rglob("*.py")):
            for page, anchor, section in _CODE_REF.findall(source.read_text()):
                named += 1
                where = f"{source.relative_to(ROOT)} names {page}"
                assert (ROOT / page).exists(), f"{where}, which does not exist"
                wanted = anchor or (_slug(section) if section else "")
                if wanted:
                    assert wanted in _anchors(ROOT / page), f"{where} at {wanted!r}: no such heading"
    assert named > 10, "the code names its docs pages; the pattern must still find them"


def test_the_readme_is_a_front_page_whose_test_command_ci_runs() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```\n(.*?)\n```", section, flags=re.S)
    assert commands[-2:] == ["pytest suites/", "pytest"], "the two commands: the suites, then the project's tests"
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert "pytest" in ci, ".ci/run runs exactly the README's test command"
    after = ci[ci.index("pytest") + 1 :]
    assert "pytest -m e2e" in after, "and then the e2e tests that the README's command leaves out"
    assert [line for line in after if line.startswith("pytest suites/ ")], "and the suites"
    assert "`pytest -m e2e`" in text, "the README says how to run the e2e tests"


def test_the_workloads_example_shown_is_the_shipped_file() -> None:
    page = (ROOT / "docs" / "writing-tests.md").read_text()
    section = page.split("### A complete example", 1)[1]
    (shown,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:1]
    assert shown == (ROOT / "docs" / "examples" / "workloads.py").read_text()


def test_the_tables_shown_in_the_docs_have_the_columns_the_code_prints() -> None:
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    # The readings' columns come before "samples"; those a record that read nothing has a cell in are always shown
    # (peak mem), the others where some record has a figure (per joule).
    bare = make_measurement("t", [1e-3] * 10)
    always = [r.header for r in readings() if r.header and r.cell(bare) is not None]
    at = RESULTS_HEADERS.index("samples")
    shown = (*RESULTS_HEADERS[:at], *always, *RESULTS_HEADERS[at:])
    for headers in (shown, GATE_HEADERS):
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


def test_the_paired_example_runs_as_copied_on_a_cpu(pytester: pytest.Pytester) -> None:
    """The guide's complete paired test, copied into a file and run on the CPU: both steps recorded, the claim
    judged and noted (a 64-row matmul is far more than 2x the rate of 64 one-row products on any device)."""
    section = (ROOT / "docs" / "writing-tests.md").read_text().split("### A complete paired test", 1)[1]
    (code, *_) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    pytester.makepyfile(test_paired=code)
    result = pytester.runpytest(
        "-p", "no:randomly", "--gpuperf-device=cpu", "--gpuperf-max-time=0.5", "--gpuperf-warmup-time=0.05"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "test_batching_pays::batched *cpu *samples/s*",
            "test_batching_pays::row_by_row *cpu *samples/s*",
            "test_paired.py::test_batching_pays[[]cpu[]]: *samples/s of batched / samples/s of row_by_row at least 2*",
        ]
    )
