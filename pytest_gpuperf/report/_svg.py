"""A strip plot of per-call times in inline SVG, written by hand: one lane per side, a dot per sample.

Each lane shows its samples as dots jittered across the lane (a fixed low-discrepancy
sequence, so that the same run always draws the same picture), its median as a line and,
where there are samples enough for one, the confidence interval of the median as a band.
A lane of more than ``MAX_DOTS`` samples draws ``MAX_DOTS`` of them, evenly by rank, over a box of
their middle half and whiskers from the 5th to the 95th percentile: a page of thousands of records
stays small (issue 23 item 9), and the caption says how many were drawn (``drawn_text``).
The time axis is linear, or logarithmic when the samples span more than ``LOG_SPAN`` times;
its ticks are labelled in one unit (ns, us, ms or s) chosen for the range, or on a log axis each in its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

from ..measuring import counted, duration_unit, quantile

__all__ = ["LOG_SPAN", "MAX_DOTS", "Lane", "dots_of", "drawn_text", "strip_plot", "ticks"]

#: A lane draws at most this many dots (evenly spaced in sorted order) over a quantile box; the caption says how
#: many of how many. A 10-run baseline of 41 samples a run is thinned; one run's 41 samples are all drawn.
MAX_DOTS: Final = 100
#: The box (middle half) and the whiskers drawn under a thinned lane: quantiles of all its samples.
BOX: Final = (0.25, 0.75)
WHISKERS: Final = (0.05, 0.95)
#: A log axis when the largest value is more than this many times the smallest.
LOG_SPAN: Final = 20.0

WIDTH: Final = 760
LEFT: Final = 92  # room for the lane labels
RIGHT: Final = 16
LANE: Final = 46
AXIS: Final = 34
#: The golden ratio's fractional part: i * PHI mod 1 spreads dots evenly across a lane, with no randomness.
_PHI: Final = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class Lane:
    """One row of the plot: a label, its samples (seconds per call), a median line and an optional band."""

    label: str
    samples: Sequence[float]
    css: str  # "current" or "baseline": the class that colours the lane
    median: float | None = None
    band: tuple[float, float] | None = None  # the interval of the median; None: no interval is claimed
    dashed: bool = False  # the median line of a value that is not this lane's sample median


def _nice_step(span: float, count: int) -> float:
    raw = span / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * power >= raw:
            return m * power
    return 10.0 * power


def _range(values: Sequence[float], log: bool) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if log:
        return lo / 1.15, hi * 1.15
    if hi == lo:
        pad = abs(hi) * 0.05 or 1e-9
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.08
    return max(lo - pad, 0.0) if lo >= 0 else lo - pad, hi + pad


def ticks(lo: float, hi: float, log: bool) -> list[float]:
    """Round values to label inside [lo, hi]: 1-2-5 steps on a linear axis, 1, 2 and 5 of each decade on a log one."""
    if log:
        out = []
        for decade in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
            for m in (1.0, 2.0, 5.0):
                value = m * 10.0**decade
                if lo <= value <= hi:
                    out.append(value)
        return out
    step = _nice_step(hi - lo, 5)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def dots_of(samples: Sequence[float]) -> list[float]:
    """The samples a lane draws: all of them, or ``MAX_DOTS`` evenly spaced in sorted order (the shape kept)."""
    if len(samples) <= MAX_DOTS:
        return list(samples)
    ordered = sorted(samples)
    last = len(ordered) - 1
    return [ordered[round(i * last / (MAX_DOTS - 1))] for i in range(MAX_DOTS)]


def drawn_text(count: int) -> str:
    """What a lane of ``count`` samples draws, for the caption."""
    if count <= MAX_DOTS:
        return counted(count, "sample")
    return (
        f"{MAX_DOTS} of {count} samples drawn (evenly by rank) over a box of their middle half, "
        f"whiskers from the {WHISKERS[0]:.0%} to the {WHISKERS[1]:.0%} quantile"
    )


def strip_plot(lanes: Sequence[Lane], *, title: str) -> str:
    """The SVG element of ``lanes`` (those with samples), with ``title`` as its accessible name."""
    lanes = [lane for lane in lanes if lane.samples]
    if not lanes:
        return '<p class="muted">no samples</p>'
    values = [v for lane in lanes for v in lane.samples if v > 0 and math.isfinite(v)]
    values += [v for lane in lanes for v in (lane.median, *(lane.band or ())) if v is not None and v > 0]
    if not values:
        return '<p class="muted">no positive times to draw</p>'
    log = max(values) / min(values) > LOG_SPAN
    lo, hi = _range(values, log)
    unit, factor = duration_unit(hi)  # the unit the axis's largest value reads best in
    plot_w = WIDTH - LEFT - RIGHT
    height = LANE * len(lanes) + AXIS

    def x(value: float) -> float:
        value = min(max(value, lo), hi)
        frac = math.log(value / lo) / math.log(hi / lo) if log else (value - lo) / (hi - lo)
        return LEFT + frac * plot_w

    parts = [
        f'<svg class="strip" role="img" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">',
        f"<title>{escape(title)}</title>",
    ]
    axis_y = LANE * len(lanes)
    for tick in ticks(lo, hi, log):
        tx = x(tick)
        parts.append(f'<line class="grid" x1="{tx:.1f}" y1="0" x2="{tx:.1f}" y2="{axis_y}"/>')
        # A log axis spans units: each tick in its own; a linear one reads best in one unit.
        own_unit, own_factor = duration_unit(tick) if log else (unit, factor)
        label = f"{tick / own_factor:.4g} {own_unit}"
        parts.append(f'<text class="tick" x="{tx:.1f}" y="{axis_y + 16}" text-anchor="middle">{escape(label)}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{axis_y}" x2="{WIDTH - RIGHT}" y2="{axis_y}"/>')
    scale = "log scale" if log else "linear scale"
    parts.append(
        f'<text class="axis-name" x="{WIDTH - RIGHT}" y="{axis_y + 30}" text-anchor="end">'
        f"time per call ({scale})</text>"
    )
    for index, lane in enumerate(lanes):
        parts += _lane(lane, index * LANE, x)
    parts.append("</svg>")
    return "".join(parts)


def _lane(lane: Lane, top: float, x: Callable[[float], float]) -> list[str]:
    mid = top + LANE / 2
    out = [
        f'<g class="lane {escape(lane.css)}">',
        f'<text class="lane-name" x="{LEFT - 8}" y="{mid + 4:.1f}" text-anchor="end">{escape(lane.label)}</text>',
    ]
    if lane.band is not None:
        x0, x1 = x(lane.band[0]), x(lane.band[1])
        out.append(
            f'<rect class="band" x="{x0:.1f}" y="{top + 4}" width="{max(x1 - x0, 1.0):.1f}" height="{LANE - 8}"/>'
        )
    if len(lane.samples) > MAX_DOTS:  # thinned: the quantiles of every sample, under the dots drawn
        w0, b0, b1, w1 = (x(quantile(lane.samples, q)) for q in (WHISKERS[0], BOX[0], BOX[1], WHISKERS[1]))
        out.append(f'<line class="whisker" x1="{w0:.1f}" y1="{mid:.1f}" x2="{w1:.1f}" y2="{mid:.1f}"/>')
        out.append(
            f'<rect class="box" x="{b0:.1f}" y="{top + 10}" width="{max(b1 - b0, 1.0):.1f}" height="{LANE - 20}"/>'
        )
    # No class on each dot (the lane's ``g`` styles them): a page of thousands of dots stays small.
    for i, value in enumerate(dots_of(lane.samples)):
        jitter = ((i * _PHI) % 1.0 - 0.5) * (LANE - 16)
        out.append(f'<circle cx="{x(value):.1f}" cy="{mid + jitter:.1f}" r="2.6"/>')
    if lane.median is not None:
        mx = x(lane.median)
        dash = ' stroke-dasharray="5 3"' if lane.dashed else ""
        out.append(f'<line class="median" x1="{mx:.1f}" y1="{top + 2}" x2="{mx:.1f}" y2="{top + LANE - 2}"{dash}/>')
    out.append("</g>")
    return out
