"""The HTML report: one self-contained file of a run, and of the gate's verdicts against a baseline.

Pure functions from saved values to text: ``render(run, comparison)`` is the page,
``compare(baseline, run)`` the gate's verdicts it shows, ``write`` puts it on disk atomically.
``pytest --gpuperf-html=PATH`` and ``pytest-gpuperf report`` both come here.

The page loads nothing: its CSS is inline, its plots are inline SVG (``_svg.py``), it names
no font to download and holds no script, so it opens on an offline GPU box and as a CI
artifact. Every string from a run (test ids hold ``<``, ``&`` and quotes) is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Final

from ..gate import (
    CLOCK_HEADER,
    BaselineNoise,
    GateResult,
    Policy,
    Row,
    RunSamples,
    Verdict,
    baseline_noise,
    clock_ratio_cell,
    compare_runs,
    gate_lines,
    ratio_cell,
    row_runs,
    runs_cell,
    seen_cell,
    stored_tolerance,
    verdict_cell,
    why_cells,
    why_heading,
)
from ..measuring import counted, format_duration, readings
from ..results import (
    Baseline,
    Ceiling,
    OutputKind,
    Record,
    Run,
    atomic_write_text,
    flags,
    head_bytes,
    peaks_of,
    percent_of_peak,
    reading_columns,
    short_test,
    table_notes,
)
from ._svg import Lane, drawn_text, strip_plot

__all__ = ["REPORT_OUTPUT", "Comparison", "compare", "policy_of", "render", "write"]

TITLE: Final = "pytest-gpuperf report"
#: In the head of every page, so that ``--gpuperf-html`` and ``report -o`` replace only a page of ours.
GENERATOR: Final = '<meta name="generator" content="pytest-gpuperf">'


def _is_report(path: Path) -> bool:
    head = head_bytes(path, 1024)
    if head is None:
        return False
    text = head.decode("utf-8", errors="replace")
    return text.startswith("<!DOCTYPE html>") and GENERATOR in text


#: ``--gpuperf-html`` and ``pytest-gpuperf report -o``.
REPORT_OUTPUT: Final = OutputKind("HTML report", "report.html", _is_report)


@dataclass(frozen=True)
class Comparison:
    """The gate's verdicts on a run against a baseline, and what the page says about that baseline."""

    base_runs: Sequence[Run]
    result: GateResult
    against: str  # ``Baseline.describe()``
    noise: str | None = None  # the gate's "baseline noise: ..." line
    policy: Policy = field(default_factory=Policy)  # the policy it was judged with: which runs each row kept


def policy_of(run: Run) -> Policy:
    """The gate's policy of the session that measured ``run``, from its settings (the defaults where absent)."""
    settings = run.settings
    default = Policy()

    def fraction(name: str, fallback: float) -> float:
        value = settings.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else fallback

    def names(name: str, fallback: frozenset[str]) -> frozenset[str]:
        value = settings.get(name)
        return frozenset(str(v) for v in value) if isinstance(value, (list, tuple)) else fallback

    return Policy(
        tolerance=stored_tolerance(settings, default.tolerance),
        noise_floor=fraction("noise_floor", default.noise_floor),
        fail_on=names("fail_on", default.fail_on),
        allow_mismatch=names("allow_mismatch", default.allow_mismatch),
    )


def compare(baseline: Baseline, run: Run, policy: Policy | None = None, result: GateResult | None = None) -> Comparison:
    """``run`` judged against ``baseline`` by the gate (``compare_runs``), or with the ``result`` already judged."""
    policy = policy or policy_of(run)
    if result is None:
        result = compare_runs(baseline.runs, [run], policy)
    noise: BaselineNoise | None = baseline_noise(baseline.runs, policy)
    return Comparison(
        baseline.runs,
        result,
        baseline.describe(),
        None if noise is None else noise.describe(policy.tolerance, result.rows),
        policy,
    )


def write(path: Path, text: str) -> None:
    """Write the page atomically (a reader sees the old file or the new one), replacing only a page of ours;
    ResultsError names the fix."""
    atomic_write_text(Path(path), text, kind=REPORT_OUTPUT)


# ------------------------------------------------------------------ the page


def render(run: Run, comparison: Comparison | None = None, *, source: str = "") -> str:
    """The whole page for ``run`` (and its verdicts against a baseline); ``source`` says where the run came from."""
    rows = {} if comparison is None else {row.key: row for row in comparison.result.rows}
    records = _ordered(run.records, rows)
    peaks = peaks_of(run)
    base = _base_records(comparison)
    body = [
        _header(run, source),
        _gate_section(comparison) if comparison is not None else "",
        _summary(records, rows, peaks, None if comparison is None else comparison.result.fail_on),
        _notes(run, peaks),
        *(_card(i, r, rows.get(r.key), peaks, base.get(r.key), comparison) for i, r in enumerate(records)),
        _missing(comparison),
        '<footer class="muted">written by pytest-gpuperf; the 95% intervals are distribution-free intervals of '
        "the median (docs/glossary.md); the gate's ratio is current/baseline time (docs/how-the-gate-decides.md)"
        "</footer>",
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{GENERATOR}"
        f"<title>{escape(TITLE)}: {escape(run.created)}</title><style>{_CSS}</style></head>"
        f'<body data-records="{len(records)}">' + "\n".join(part for part in body if part) + "</body></html>\n"
    )


def _ordered(records: Sequence[Record], rows: Mapping[str, Row]) -> list[Record]:
    """Run order; against a baseline, the largest slowdown first, records without a ratio last (in run order)."""
    if not rows:
        return list(records)

    def change(record: Record) -> tuple[int, float]:
        row = rows.get(record.key)
        if row is None or row.estimate is None:
            return 1, 0.0
        return 0, -row.estimate.value

    return sorted(records, key=change)  # stable: ties keep run order


def _base_records(comparison: Comparison | None) -> dict[str, list[Record]]:
    """Key -> every baseline run's record of it, in one pass over the baseline (the page's cost stays linear)."""
    out: dict[str, list[Record]] = {}
    for run in comparison.base_runs if comparison is not None else ():
        for record in run.records:
            out.setdefault(record.key, []).append(record)
    return out


def _machine(run: Run) -> str:
    fp = run.fingerprint
    parts = []
    if fp.cpu_model:
        count = fp.cpu_count
        parts.append(fp.cpu_model + (f" ({count} CPUs)" if count else ""))
    gpus = [d.name for d in fp.cuda_devices or () if d.name]
    if not gpus:  # a file without the fingerprint's GPU list: the devices measured say their names
        gpus = [str(d.get("name")) for k, d in run.devices.items() if k != "cpu" and d.get("name")]
    parts += [f"{name} x{gpus.count(name)}" if gpus.count(name) > 1 else name for name in dict.fromkeys(gpus)]
    if fp.hostname:
        parts.append(f"host {fp.hostname}")
    return "; ".join(parts) or "not recorded"


def _commit(run: Run) -> str:
    git = run.git
    if not git.commit:
        return "outside git"
    text = git.commit[:12]
    if git.branch:
        text += f" ({git.branch})"
    return text + (" with uncommitted changes" if git.dirty else "")


def _software(run: Run) -> str:
    fp = run.fingerprint
    text = f"torch {fp.torch or 'not recorded'}"
    if fp.torch_cuda:
        text += f", CUDA {fp.torch_cuda}"
    if fp.nvml is not None and fp.nvml.driver:
        text += f", driver {fp.nvml.driver}"
    if fp.python:
        text += f"; Python {fp.python}"
    return text


def _header(run: Run, source: str) -> str:
    facts = [
        ("date", run.created or "not recorded"),
        ("commit", _commit(run)),
        ("machine", _machine(run)),
        ("software", _software(run)),
        ("records", str(len(run.records))),
    ]
    if source:
        facts.append(("run", source))
    out = [f"<header><h1>{escape(TITLE)}</h1>", _facts(facts)]
    if run.interrupted:
        out.append('<p class="warn">This session was interrupted: these are the records measured before.</p>')
    out.append("</header>")
    return "".join(out)


def _facts(pairs: Iterable[tuple[str, str]]) -> str:
    cells = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in pairs)
    return f'<dl class="facts">{cells}</dl>'


def _verdict_badge(row: Row | None, fail_on: frozenset[str]) -> str:
    """The row's verdict (``verdict_cell``), coloured by it: ``v-more-work`` where its work alone fails it."""
    if row is None:
        return ""
    css = "more-work" if row.failing_by_work(fail_on) else row.verdict.value
    return f'<span class="verdict v-{escape(css)}">{escape(verdict_cell(row, fail_on))}</span>'


def _gate_section(comparison: Comparison) -> str:
    result = comparison.result
    out = ['<section class="gate"><h2>gate</h2>', _facts([("against", comparison.against)])]
    if comparison.noise:
        out.append(f'<p class="noise">{escape(comparison.noise)}</p>')
    for line in gate_lines(result):
        css = "fail" if "FAILED" in line or "WARNING" in line else "pass" if "passed" in line else "muted"
        out.append(f'<p class="{css}">{escape(line)}</p>')
    out.append("</section>")
    return "".join(out)


def _interval(record: Record) -> str:
    m = record.measurement
    if m.too_few_samples:
        return m.ci_text  # "- (3 samples)": no interval is claimed, never a 0% one
    return f"{m.ci_text} [{format_duration(m.ci.low)}, {format_duration(m.ci.high)}]"


def _throughput(record: Record) -> str:
    m = record.measurement
    return ", ".join(str(m.throughput(unit)) for unit in m.work) or "-"


def _summary(
    records: Sequence[Record], rows: Mapping[str, Row], peaks: Mapping[str, Ceiling], fail_on: frozenset[str] | None
) -> str:
    """The records table; with the gate's ``fail_on`` (None: no comparison) its ratio and verdict columns."""
    gate = fail_on is not None
    columns = reading_columns(records)  # the readings' columns, as the terminal's
    clocked = gate and any(row.clock_estimate is not None for row in rows.values())
    tail = any(r.measurement.single_calls for r in records)  # per-call samples: the p99 column, as the terminal's
    head = ["test", "device", "median", "95% CI", *(["p99"] if tail else []), "throughput"]
    head += ["% peak"] if peaks else []
    head += [header for header, _ in columns]
    head += ["flags"] + (["ratio [95% CI]", *([CLOCK_HEADER] if clocked else []), "can see", "verdict"] if gate else [])
    out = ['<section class="summary"><h2>records</h2><div class="wide"><table><thead><tr>']
    out += [f"<th>{escape(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for i, record in enumerate(records):
        m = record.measurement
        cells = [
            f'<a href="#r{i}">{escape(short_test(record))}</a>',
            escape(record.device),
            _figure(format_duration(m.median)),
            _figure(m.ci_text),
            *([_figure(m.percentile_text(99))] if tail else []),
            escape(_throughput(record)),
        ]
        cells += [escape(percent_of_peak(record, peaks))] if peaks else []
        cells += [escape(column[i]) for _, column in columns]
        cells.append(escape(flags(record)))
        if gate:
            row = rows.get(record.key)
            cells.append(_figure(ratio_cell(row)) if row else "-")
            cells += [_figure(clock_ratio_cell(row)) if row else "-"] if clocked else []
            cells.append(_figure(seen_cell(row)) if row else "-")
            cells.append(_verdict_badge(row, fail_on or frozenset()))
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _figure(text: str) -> str:
    """A time, an interval or a ratio: a cell kept on one line (``.fig``), whatever the window's width."""
    return f'<span class="fig">{escape(text)}</span>'


def _notes(run: Run, peaks: Mapping[str, Ceiling]) -> str:
    """The lines the terminal prints under its table (``table_notes``: the readings', % peak, max_time) and every
    note the tests made (``gpuperf.note``: the suites' conclusions), escaped like every string from a file."""
    lines = [f'<p class="muted">{escape(line)}</p>' for line in table_notes(run.records, peaks)]
    items = [f"<li><span class='nodeid'>{escape(test)}</span>: {escape(text)}</li>" for test, text in run.notes]
    if not lines and not items:
        return ""
    notes = f'<h3>notes</h3><ul class="notes">{"".join(items)}</ul>' if items else ""
    return f'<section class="notes">{"".join(lines)}{notes}</section>'


def _card(
    index: int,
    record: Record,
    row: Row | None,
    peaks: Mapping[str, Ceiling],
    base: Sequence[Record] | None,
    comparison: Comparison | None,
) -> str:
    m = record.measurement
    facts = [
        ("median", format_duration(m.median)),
        ("95% CI", _interval(record)),
        ("throughput", _throughput(record)),
    ]
    if m.single_calls:
        facts.append(("p50 / p90 / p99", " / ".join(m.percentile_text(p) for p in (50, 90, 99))))
    if peaks:
        facts.append(("% peak", percent_of_peak(record, peaks)))
    facts += [
        ("samples", f"{len(m.samples)} x {m.iterations} calls"),
        ("flags", flags(record) or "-"),
    ]
    facts += [fact for reading in readings() for fact in reading.facts(m)]
    lanes, caption = _lanes(record, row, base, comparison)
    fail_on = comparison.result.fail_on if comparison is not None else frozenset()
    out = [
        f'<section class="record" id="r{index}">',
        f"<h3>{_verdict_badge(row, fail_on)} {escape(short_test(record))} "
        f"<span class='device'>{escape(record.device)}</span></h3>",
        f'<p class="nodeid">{escape(record.key)}</p>',
        _facts(facts),
    ]
    if row is not None:
        out.append(_gate_facts(row, fail_on))
        out.append(_work_block(row, fail_on))
    out.append(strip_plot(lanes, title=f"{record.key} on {record.device}: time per call"))
    out.append(f'<p class="caption">{escape(caption)}</p>')
    out.append("</section>")
    return "".join(out)


def _gate_facts(row: Row, fail_on: frozenset[str]) -> str:
    pairs = [("ratio [95% CI]", ratio_cell(row)), ("verdict", verdict_cell(row, fail_on))]
    if row.clock_estimate is not None:
        pairs.insert(1, (CLOCK_HEADER, clock_ratio_cell(row)))
        clocks = f"{row.base_clock_mhz:.0f} / {row.head_clock_mhz:.0f} MHz"
        pairs.insert(2, ("median SM clock baseline / current", clocks))
    if row.baseline is not None and row.current is not None:
        pairs.append(("baseline / current", f"{format_duration(row.baseline)} / {format_duration(row.current)}"))
    if row.estimate is not None:
        pairs.append(("can see", seen_cell(row)))
        pairs.append(("tolerance", row.tolerance_text))
        pairs.append(("runs", runs_cell(row)))
    pairs.append(("why", row.reason))
    return f'<div class="gate-row">{_facts(pairs)}{_why_table(row)}</div>'


def _why_table(row: Row) -> str:
    """The row's "why" (``gate/_why.py``) as a table: the ops and kernels whose time per call grew most, and the
    time outside them; "" without one. Op names are user text: escaped like every string."""
    if row.why is None:
        return ""
    head = ("change", "share", "what", "calls", "baseline", "current")
    out = [f'<table class="why"><caption>why: {escape(why_heading(row.why))}</caption><thead><tr>']
    out += [f"<th>{escape(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for line in row.why.lines:
        cells = (
            *why_cells(line, share=not row.why.counts_only),
            format_duration(line.base_seconds),
            format_duration(line.head_seconds),
        )
        out.append("<tr>" + "".join(f"<td>{escape(c or '-')}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _work_block(row: Row, fail_on: frozenset[str]) -> str:
    """What the readings' comparisons found changed (issue 22: the counts, the peak memory): each one's line, and
    every change under it (op and kernel names are the user's code: escaped); "" where nothing changed."""
    out = []
    for change in row.changes.values():
        summary = change.summary(row.work_fail_on(fail_on))
        if summary is None:
            continue
        out.append(f"<p>{escape(summary)}</p>")
        details = change.details()
        out += ["<ul>", *(f"<li>{escape(line)}</li>" for line in details), "</ul>"] if details else []
    return f'<div class="work">{"".join(out)}</div>' if out else ""


def _lanes(
    record: Record, row: Row | None, base: Sequence[Record] | None, comparison: Comparison | None
) -> tuple[list[Lane], str]:
    """The plot's lanes and its caption. Against a baseline the lanes are the runs the gate judged (``row_runs``):
    the baseline's kept runs, the current side's (its confirmation runs with it), and apart, in lanes of their own,
    the runs it left out (disturbed, far slower), so that the picture tells the verdict's story."""
    m = record.measurement
    band = None if m.too_few_samples else (m.ci.low, m.ci.high)
    own = f"current: {drawn_text(len(m.samples))}, one dot per sample (time per call); solid line: the median"
    own += "" if band is None else ", band: its 95% interval"
    if comparison is None:
        return [Lane("current", m.samples, "current", median=m.median, band=band)], own
    base_runs, head_runs = row_runs(base or [], [record], comparison.policy)
    kept = [r for r in head_runs if not r.left_out]
    confirmations = sum(1 for r in head_runs if r.confirmation)
    if len(head_runs) == 1 and kept:  # the record's own measurement alone: its median and interval
        current = Lane("current", m.samples, "current", median=m.median, band=band)
        text = own
    else:
        samples = _samples(kept)
        gate_time = row.current if row is not None else None
        current = Lane("current", samples, "current", median=gate_time, dashed=True)
        text = f"current: {drawn_text(len(samples))} from {_runs(len(kept))}"
        text += f" ({counted(confirmations, 'confirmation run')} in fresh processes among them)"
        text += "; dashed line: the gate's current time (geometric mean of its runs)"
    lanes = [current]
    if base:
        kept_base = [r for r in base_runs if not r.left_out]
        gate_base = row.baseline if row is not None else None
        lanes.insert(0, Lane("baseline", _samples(kept_base), "baseline", median=gate_base, dashed=True))
        text += f"; baseline: {drawn_text(len(lanes[0].samples))} from {_runs(len(kept_base))}"
        text += "; dashed line: the gate's baseline time (geometric mean of its runs)"
    else:
        text += "; not in the baseline"
    for name, runs in (("baseline", base_runs), ("current", head_runs)):
        out = [r for r in runs if r.left_out]
        if out:
            at = 1 if name == "baseline" and base else len(lanes)
            lanes.insert(at, Lane("left out", _samples(out), "left-out"))
            whys = " or ".join(sorted({r.left_out for r in out}))
            text += f"; left out (hollow, the lane under the {name}'s): {len(out)} of {len(runs)} {name} runs, "
            text += f"{whys}: the gate did not judge them"
    return lanes, text


def _samples(runs: Sequence[RunSamples]) -> list[float]:
    return [x for run in runs for x in run.samples]


def _runs(count: int) -> str:
    return counted(count, "run")


def _missing(comparison: Comparison | None) -> str:
    if comparison is None:
        return ""
    result = comparison.result
    gone = [row for row in result.rows if row.verdict is Verdict.MISSING]
    if not gone:
        return ""
    items = "".join(
        f"<li>{_verdict_badge(row, result.fail_on)} {escape(short_test(row))} [{escape(row.device)}]: "
        f"{escape(row.reason)}</li>"
        for row in gone
    )
    return f'<section class="missing"><h2>in the baseline, not in this run</h2><ul>{items}</ul></section>'


_CSS: Final = """
:root { color-scheme: light; --current: #1f6fb2; --baseline: #d0731c; --ink: #1d2125; --muted: #5f6b76; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  margin: 0 auto; padding: 16px 24px 40px; max-width: 1600px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 17px; margin: 24px 0 8px; }
h3 { font-size: 15px; margin: 0 0 2px; word-break: break-all; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; word-break: break-word; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #e3e6ea; vertical-align: top; }
th { background: #f4f6f8; white-space: nowrap; }
.wide { overflow-x: auto; }
.fig { white-space: nowrap; font-variant-numeric: tabular-nums; }
section.notes h3 { margin: 10px 0 2px; }
ul.notes { margin: 4px 0; padding-left: 18px; }
ul.notes .nodeid { display: inline; }
a { color: var(--current); }
.record { border: 1px solid #dde1e5; border-radius: 6px; padding: 12px 14px; margin: 14px 0; }
.nodeid { color: var(--muted); font-family: ui-monospace, monospace; font-size: 12px; margin: 0 0 4px;
  word-break: break-all; }
.device { color: var(--muted); font-weight: normal; }
.gate-row { background: #f8f9fb; border-radius: 4px; padding: 2px 8px; }
table.why { margin: 4px 0 6px; width: auto; }
table.why caption { text-align: left; color: var(--muted); }
.caption, .muted, footer { color: var(--muted); font-size: 12px; }
.warn, .fail { color: #b3261e; font-weight: 600; }
.pass { color: #1e7a34; font-weight: 600; }
.noise { color: var(--ink); }
.verdict { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 12px; font-weight: 600;
  background: #e8eaed; color: var(--ink); }
.v-slower, .v-unattributed, .v-more-work { background: #b3261e; color: #fff; }
.v-same-work { background: #fbe7c6; }
.work { background: #fff7e6; border-radius: 4px; padding: 2px 8px; margin-top: 4px; }
.v-faster { background: #1e7a34; color: #fff; }
.v-unchanged { background: #d7ecdc; }
.v-inconclusive { background: #fbe7c6; }
svg.strip { display: block; max-width: 100%; height: auto; margin-top: 6px; }
svg .grid { stroke: #eceff2; stroke-width: 1; }
svg .axis { stroke: #8a949e; stroke-width: 1; }
svg .tick, svg .axis-name, svg .lane-name { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg .lane-name { font-size: 12px; fill: var(--ink); }
svg .current circle { fill: var(--current); fill-opacity: 0.55; }
svg .baseline circle { fill: var(--baseline); fill-opacity: 0.55; }
svg .left-out circle { fill: none; stroke: var(--muted); stroke-width: 1; stroke-opacity: 0.8; }
svg .left-out .lane-name { fill: var(--muted); font-style: italic; }
svg .box { fill: none; stroke: var(--ink); stroke-width: 1; stroke-opacity: 0.6; }
svg .whisker { stroke: var(--ink); stroke-width: 1; stroke-opacity: 0.6; }
svg .current .band { fill: var(--current); fill-opacity: 0.14; }
svg .baseline .band { fill: var(--baseline); fill-opacity: 0.14; }
svg .current .median { stroke: #0b3f6b; stroke-width: 2.5; }
svg .baseline .median { stroke: #7a3e06; stroke-width: 2.5; }
"""
