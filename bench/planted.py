"""Proof that the gate explains itself: ten planted regressions, each an ``ab`` pair of commits (issue 22, item 6).

    python bench/planted.py                  # quiet: 10 planted pairs, 100 A/A comparisons, 2.5 min
    python bench/planted.py --busy           # the same with one vCPU kept busy by a spin loop, 3.7 min
    python bench/planted.py --busy --aa 0    # busy, the planted pairs only, 1.2 min
    python bench/planted.py --quick          # 1 s of rounds a pair, 20 A/A comparisons, 50 s

(Wall times on this project's 2-vCPU machine, torch 2.13.0+cpu, 2026-11-26, at a load average of 1 to 3; on a
machine loaded by other work (load average 4 to 5) the quiet run took 3.5 min. Results: bench/evidence/work-profile.md.)

A scratch git repository is built in a temporary directory. Its first commit (tag ``a``)
holds a workloads module (``perf/workloads.py``) of ten small CPU steps, a few ms each at
one thread: MLPs with GELU, a loop of small losses, attention by hand and through
``scaled_dot_product_attention``. Then, each on top of ``a``:

- ``a2`` (A'): a comment changed, for A/A comparisons;
- one commit per planted regression (tag ``p-NAME``), changing only the workload ``NAME``:
  an extra matmul; one layer in float64; an added ``.item()``; GELU written by hand
  (tanh formula, unfused); dropout added; a wider hidden layer; an added ``.contiguous()``
  copy of a transposed tensor; softmax in float64; SDPA pinned to the math backend
  (``sdpa_kernel(SDPBackend.MATH)``) instead of the fused one; a Python-side
  ``time.sleep`` of about 5% of the step (sized from the step's time measured when the
  repository is built, and printed).

For each planted regression, ``python -m pytest_gpuperf ab --base a --head p-NAME -k NAME
--tolerance 2% --json F`` runs in a process of its own (2%: below the planted sleep's 5%, which the default
tolerance of 5% calls ``unchanged`` by design, and an unchanged row has no attribution), and
one row is printed: the timing verdict and ratio, the count verdict with the count categories
that changed, whether the planted cause ranks first in the attribution (``CAUSES`` says, per
regression, which lines count as the cause, and why), and the share of the slowdown the top five lines explain.
Then ``--aa N`` runs of ``ab --base a --head a2`` (all ten workloads each, 0.5 s of rounds:
counts do not depend on timing precision) count the A/A comparisons that show a count
change. With ``--busy``, a ``python -c 'while True: pass'`` process keeps one vCPU busy
for every ``ab`` run, and the summary says how many of the regressions that change counts
the count verdict caught, and how many the timing verdict alone (``slower``).

The count verdict and the attribution are read from each row of ``ab --json``
(``"work"``: verdict, failing categories, changed counts; ``"why"``: ranked lines and the
share the top five explain), tolerantly: where a field is absent, the cell says ``n/a``.
The targets of issue 22 are printed beside the measured figures.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from tabulate import tabulate

#: The base commit's workloads module. Every workload is its own ``build_NAME`` function, so that a regression
#: planted in one (``plant``) leaves the others' code unchanged. ``# variant A`` is the line A' rewords.
WORKLOADS_MODULE: Final = '''\
"""Ten small CPU steps for bench/planted.py; every head commit plants one regression in one of them."""

import math
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from pytest_gpuperf import Step, Workload

# variant A


def _weights(device, *shape):
    """Seeded weights scaled so that activations stay near unit size."""
    return torch.randn(*shape, device=device) / math.sqrt(shape[0])


def build_extra_matmul(device, size):
    torch.manual_seed(0)
    x = torch.randn(256, 512, device=device)
    w1, w2 = _weights(device, 512, 512), _weights(device, 512, 512)

    def step():
        h = F.gelu(x @ w1)
        return h @ w2

    return Step(step, work={"samples": 256.0})


def build_layer_fp64(device, size):
    torch.manual_seed(0)
    x = torch.randn(256, 512, device=device)
    w1, w2, w3 = _weights(device, 512, 512), _weights(device, 512, 512), _weights(device, 512, 512)

    def step():
        h = F.gelu(x @ w1)
        h = F.gelu(h @ w2)
        return h @ w3

    return Step(step, work={"samples": 256.0})


def build_item(device, size):
    """A loop over micro-batches that keeps each one's loss (a logging loop)."""
    torch.manual_seed(0)
    x = torch.randn(400, 64, device=device)
    w = torch.randn(64, device=device)

    def step():
        losses = []
        for row in x:
            losses.append(torch.dot(row, w))
        return losses

    return Step(step, work={"samples": 400.0})


def build_gelu(device, size):
    torch.manual_seed(0)
    x = torch.randn(128, 64, device=device)
    w = _weights(device, 64, 2048)

    def step():
        h = x @ w
        return F.gelu(h, approximate="tanh")

    return Step(step, work={"samples": 128.0})


def build_dropout(device, size):
    torch.manual_seed(0)
    x = torch.randn(256, 256, device=device)
    w1, w2 = _weights(device, 256, 1024), _weights(device, 1024, 256)

    def step():
        h = F.gelu(x @ w1)
        return h @ w2

    return Step(step, work={"samples": 256.0})


def build_wider(device, size):
    torch.manual_seed(0)
    hidden = 1024
    x = torch.randn(256, 256, device=device)
    w1, w2 = _weights(device, 256, hidden), _weights(device, hidden, 256)

    def step():
        h = F.gelu(x @ w1)
        return h @ w2

    return Step(step, work={"samples": 256.0})


def build_contiguous(device, size):
    """A layer fed a transposed view (BLAS reads it as it is, no copy)."""
    torch.manual_seed(0)
    x = torch.randn(1024, 512, device=device)
    w = _weights(device, 1024, 64)

    def step():
        return F.gelu(x.t() @ w)

    return Step(step, work={"samples": 512.0})


def build_softmax_fp64(device, size):
    torch.manual_seed(0)
    q, k, v = (torch.randn(8, 256, 16, device=device) for _ in range(3))

    def step():
        scores = q @ k.transpose(1, 2) / 4.0
        weights = torch.softmax(scores, dim=-1)
        return weights @ v

    return Step(step, work={"samples": 8.0})


def build_sdpa_math(device, size):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, 384, 64, device=device) for _ in range(3))

    def step():
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    return Step(step, work={"samples": 4.0})


def build_sleep(device, size):
    torch.manual_seed(0)
    x = torch.randn(512, 512, device=device)
    w1, w2 = _weights(device, 512, 512), _weights(device, 512, 512)

    def step():
        h = F.gelu(x @ w1)
        return h @ w2

    return Step(step, work={"samples": 512.0})


WORKLOADS = {
    name: Workload(name, build, description)
    for name, build, description in [
        ("extra_matmul", build_extra_matmul, "an MLP of two layers"),
        ("layer_fp64", build_layer_fp64, "an MLP of three layers"),
        ("item", build_item, "a loop of 400 small losses"),
        ("gelu", build_gelu, "a layer and GELU (tanh)"),
        ("dropout", build_dropout, "an MLP of two layers"),
        ("wider", build_wider, "an MLP of two layers, 1024 wide"),
        ("contiguous", build_contiguous, "a layer fed a transposed view"),
        ("softmax_fp64", build_softmax_fp64, "attention by hand"),
        ("sdpa_math", build_sdpa_math, "causal SDPA"),
        ("sleep", build_sleep, "an MLP of two layers"),
    ]
}
'''
#: The line A' rewords (a comment: the same code).
A_LINE: Final = "# variant A\n"
A2_LINE: Final = "# variant A, the comment reworded\n"
#: Where the planted sleep's length goes in its line (seconds), filled in once the step has been timed.
SLEEP_SLOT: Final = "@SLEEP_S@"
#: The planted sleep's share of the sleep workload's step.
SLEEP_SHARE: Final = 0.05
#: The planted pairs' ``ab --tolerance``: below the smallest planted change (the sleep's 5%). At the default 5%, a
#: slowdown of 5% is ``unchanged`` by design (its interval must clear the tolerance), and an unchanged row gets no
#: "why" to rank. The A/A comparisons keep the default: they count count changes, which no tolerance touches.
PLANTED_TOLERANCE: Final = 0.02
#: The count verdicts that say the work changed.
COUNT_CHANGES: Final = frozenset({"more", "less", "different"})


@dataclass(frozen=True)
class Cause:
    """Which lines of the attribution count as the planted cause: op (or kernel) names, names of Python calls of
    built-ins (``Tensor.item``, ``sleep``), or the time outside any op. ``why`` says why these names, for the reader
    of the table."""

    names: frozenset[str] = frozenset()
    outside: bool = False
    why: str = ""

    def matches(self, line: Mapping[str, Any]) -> bool:
        """Whether one line of the ``"why"`` (``kind``: op, kernel, python or outside; ``name``) is the planted
        cause."""
        if line.get("kind") == "outside":
            return self.outside
        return str(line.get("name", "")) in self.names


def aten_ops(*names: str) -> frozenset[str]:
    return frozenset(f"aten::{n}" for n in names)


@dataclass(frozen=True)
class Plant:
    """One planted regression: in the workload ``name``, ``old`` (once in its build function) becomes ``new``."""

    name: str
    what: str
    old: str
    new: str
    cause: Cause
    #: Whether the regression changes what the step does (ops, FLOPs, bytes): every one but the sleep.
    changes_counts: bool = True


#: The ten regressions, one per workload. A cause is the ops that do the planted work: for a changed dtype the
#: casts and the op that now runs in float64; for an added op the op and the ops it dispatches to (on a CPU an
#: op's time is its self time, which lands on the innermost op: aten::matmul's on aten::mm, aten::dropout's on
#: aten::bernoulli_, aten::item's on aten::_local_scalar_dense). Only a line of those names ranked first counts.
PLANTS: Final[tuple[Plant, ...]] = (
    Plant(
        "extra_matmul",
        "an extra matmul",
        "        h = F.gelu(x @ w1)\n",
        "        h = F.gelu(x @ w1) @ w2  # planted: an extra matmul\n",
        Cause(aten_ops("mm", "addmm", "matmul", "linear"), why="the added matmul runs as aten::matmul -> aten::mm"),
    ),
    Plant(
        "layer_fp64",
        "one layer in float64",
        "        h = F.gelu(h @ w2)\n",
        "        h = F.gelu((h.double() @ w2.double()).float())  # planted: this layer in float64\n",
        Cause(
            aten_ops("mm", "addmm", "matmul", "to", "_to_copy", "copy_", "empty_strided"),
            why="the float64 matmul (aten::mm, at half fp32's rate) and the casts to and from float64 (aten::to, "
            "_to_copy, copy_)",
        ),
    ),
    Plant(
        "item",
        "an added .item()",
        "            losses.append(torch.dot(row, w))\n",
        "            losses.append(torch.dot(row, w).item())  # planted: .item() on every loss\n",
        Cause(
            aten_ops("item", "_local_scalar_dense") | {"Tensor.item"},
            why="aten::item reads the scalar through _local_scalar_dense; the Python call Tensor.item holds the "
            "call's own time (Python to C++, the argument parsing), which is more than the op's",
        ),
    ),
    Plant(
        "gelu",
        "GELU written by hand (tanh, unfused)",
        '        return F.gelu(h, approximate="tanh")\n',
        "        # planted: GELU by hand, one op per term\n"
        "        return 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h.pow(3))))\n",
        Cause(
            aten_ops("mul", "add", "tanh", "pow", "mul_", "add_", "rsub"),
            why="the formula's elementwise ops, each a pass over the activations (aten::gelu's one pass goes)",
        ),
    ),
    Plant(
        "dropout",
        "dropout added",
        "        h = F.gelu(x @ w1)\n",
        "        h = F.dropout(F.gelu(x @ w1), p=0.1, training=True)  # planted: dropout\n",
        Cause(
            aten_ops(
                "dropout", "native_dropout", "bernoulli_", "bernoulli", "uniform_", "empty_like", "mul", "div_", "div"
            ),
            why="aten::dropout draws its mask (bernoulli_) and scales by it (mul, div_)",
        ),
    ),
    Plant(
        "wider",
        "a wider hidden layer (1024 -> 1280)",
        "    hidden = 1024\n",
        "    hidden = 1280  # planted: a wider hidden layer\n",
        Cause(
            aten_ops("mm", "addmm", "matmul", "gelu"),
            why="every op on the hidden layer does 25% more: its two matmuls (aten::mm) and its GELU",
        ),
    ),
    Plant(
        "contiguous",
        "an added .contiguous() copy",
        "        return F.gelu(x.t() @ w)\n",
        "        return F.gelu(x.t().contiguous() @ w)  # planted: a copy of the transposed input\n",
        Cause(
            aten_ops("contiguous", "clone", "copy_", "empty_like", "empty"),
            why="aten::contiguous copies through clone -> copy_ into a tensor from empty_like",
        ),
    ),
    Plant(
        "softmax_fp64",
        "softmax in float64",
        "        weights = torch.softmax(scores, dim=-1)\n",
        "        weights = torch.softmax(scores.double(), dim=-1).float()  # planted: softmax in float64\n",
        Cause(
            aten_ops("softmax", "_softmax", "to", "_to_copy", "copy_", "empty_strided"),
            why="the float64 softmax (aten::_softmax) and the casts to and from float64",
        ),
    ),
    Plant(
        "sdpa_math",
        "SDPA pinned to the math backend",
        "        return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
        "        with sdpa_kernel(SDPBackend.MATH):  # planted: the math backend instead of the fused one\n"
        "            return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
        Cause(
            aten_ops(
                "_scaled_dot_product_attention_math",
                "bmm",
                "matmul",
                "_softmax",
                "_safe_softmax",
                "softmax",
                "mul",
                "div",
                "add",
                "add_",
                "where",
                "all",
                "isneginf",
                "logical_not",
                "masked_fill",
                "masked_fill_",
                "tril",
                "ones",
                "baddbmm",
                "clone",
                "copy_",
                "_to_copy",
                "to",
                "empty_like",
                "empty",
                "fill_",
            ),
            why="the math backend's decomposition (scores by bmm, a causal mask, _safe_softmax, bmm) replaces the "
            "fused aten::_scaled_dot_product_flash_attention_for_cpu",
        ),
    ),
    Plant(
        "sleep",
        "a Python-side sleep (~5% of the step)",
        "        return h @ w2\n",
        f"        time.sleep({SLEEP_SLOT})  # planted: a Python-side sleep of about 5% of the step\n"
        "        return h @ w2\n",
        Cause(
            frozenset({"sleep"}),
            outside=True,
            why="a sleep runs no op: the Python call sleep holds its time, which is outside any op",
        ),
        changes_counts=False,
    ),
)

#: The targets of issue 22, item 6.
TARGET_FIRST: Final = 9
TARGET_EXPLAINED: Final = 0.80


def plant(source: str, planted: Plant, sleep_s: float) -> str:
    """``source`` with ``planted`` applied inside its workload's build function only."""
    start = source.index(f"def build_{planted.name}(")
    end = source.find("\ndef ", start + 1)
    end = len(source) if end < 0 else end
    body = source[start:end]
    if body.count(planted.old) != 1:
        raise ValueError(f"{planted.name}: the planted line's anchor occurs {body.count(planted.old)} times")
    new = planted.new.replace(SLEEP_SLOT, f"{sleep_s:.6f}")
    return source[:start] + body.replace(planted.old, new) + source[end:]


# ---------------------------------------------------------------- the scratch repository


def git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "planted", "GIT_AUTHOR_EMAIL": "planted@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": env["GIT_AUTHOR_NAME"], "GIT_COMMITTER_EMAIL": env["GIT_AUTHOR_EMAIL"]}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _commit(repo: Path, source: str, tag: str, message: str) -> None:
    (repo / "perf" / "workloads.py").write_text(source)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    git(repo, "tag", tag)


def make_repo(repo: Path, sleep_s: float) -> None:
    """Commit ``a`` (the base), then from it ``a2`` (A') and one commit per planted regression (``p-NAME``)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "perf").mkdir()
    (repo / "perf" / "__init__.py").write_text("")
    _commit(repo, WORKLOADS_MODULE, "a", "a: ten workloads")
    _commit(repo, WORKLOADS_MODULE.replace(A_LINE, A2_LINE), "a2", "a2: a comment reworded")
    for planted in PLANTS:
        git(repo, "checkout", "-q", "a")
        _commit(repo, plant(WORKLOADS_MODULE, planted, sleep_s), f"p-{planted.name}", f"{planted.name}: {planted.what}")


def step_seconds(module_path: Path, name: str, calls: int = 60) -> float:
    """The shortest time of one call of workload ``name`` of the module at ``module_path``, at one thread (as ``ab``
    times a CPU step): the shortest, as other processes on a shared machine only ever lengthen a call."""
    import torch

    spec = importlib.util.spec_from_file_location("planted_base_workloads", module_path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import {module_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fn = module.WORKLOADS[name].build(torch.device("cpu"), "small").fn
        for _ in range(10):
            fn()
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
    finally:
        torch.set_num_threads(threads)
    return min(times)


def slept_seconds(seconds: float, calls: int = 30) -> float:
    """What ``time.sleep(seconds)`` really takes here (the kernel's timer slack adds to it)."""
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        time.sleep(seconds)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def sleep_for(target: float) -> float:
    """The argument of ``time.sleep`` that sleeps about ``target`` seconds here: the kernel's timer slack (50 us by
    default) and the wake-up add to every sleep, so what a sleep overshoots is taken off (down to half the target)."""
    overshoot = slept_seconds(target) - target
    return max(target - overshoot, target / 2)


# ---------------------------------------------------------------- running ab


@dataclass(frozen=True)
class AbRun:
    """One ``ab`` process: its exit status, wall time, the load average after it, and its rows (``--json``)."""

    head: str
    status: int
    seconds: float
    load: float
    rows: tuple[dict[str, Any], ...]


def run_ab(
    workdir: Path, head: str, out: Path, *, max_time: float, select: Sequence[str] = (), tolerance: float | None = None
) -> AbRun:
    command = [sys.executable, "-m", "pytest_gpuperf", "ab", "--repo", str(workdir / "repo"), "--base", "a"]
    command += ["--head", head, "--workloads", "perf/workloads.py", "--device", "cpu", "--max-time", f"{max_time:g}"]
    if tolerance is not None:
        command += ["--tolerance", f"{tolerance:g}"]
    command += [*(arg for name in select for arg in ("-k", name)), "--json", str(out), "-q"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1) or not out.exists():
        sys.exit(f"ab failed with status {done.returncode}:\n{done.stdout}\n{done.stderr}")
    seconds = time.perf_counter() - started
    rows = tuple(json.loads(out.read_text())["results"])
    return AbRun(head, done.returncode, seconds, os.getloadavg()[0], rows)


@contextlib.contextmanager
def spinning(busy: bool) -> Iterator[None]:
    """With ``busy``, one ``python -c 'while True: pass'`` process keeps a vCPU busy until the block ends."""
    if not busy:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


# ---------------------------------------------------------------- reading a row


@dataclass(frozen=True)
class Outcome:
    """One planted regression's row, as read from ``ab --json`` (None: the field was absent)."""

    name: str
    what: str
    status: int
    verdict: str
    ratio: float | None
    work_verdict: str | None
    failing: tuple[str, ...]
    changed: tuple[str, ...]
    first: str | None
    cause_first: bool | None
    explained: float | None
    top: tuple[str, ...] = field(default=())
    seconds: float = 0.0


def _line_label(line: Mapping[str, Any]) -> str:
    name = "outside any op" if line.get("kind") == "outside" else str(line.get("name", "?"))
    delta, share = line.get("delta_seconds"), line.get("share")
    text = name
    if isinstance(delta, int | float):
        text += f" {delta * 1e6:+.0f} us"
    if isinstance(share, int | float):
        text += f" ({share:.0%})"
    counts = (line.get("base_count"), line.get("head_count"))
    if all(isinstance(c, int | float) for c in counts) and counts[0] != counts[1]:
        text += f" count {counts[0]:g}->{counts[1]:g}"
    return text


def outcome(planted: Plant, run: AbRun) -> Outcome:
    (row,) = [r for r in run.rows if r.get("name") == planted.name]
    ratio = row.get("ratio") or {}
    work = row.get("work") if isinstance(row.get("work"), Mapping) else None
    why = row.get("why") if isinstance(row.get("why"), Mapping) else None
    lines: list[Mapping[str, Any]] = list(why.get("lines") or []) if why else []
    changed = sorted({str(c.get("category")) for c in (work or {}).get("changes") or []})
    explained = why.get("explained") if why else None
    return Outcome(
        name=planted.name,
        what=planted.what,
        status=run.status,
        verdict=str(row.get("verdict")),
        ratio=float(ratio["ratio"]) if isinstance(ratio.get("ratio"), int | float) else None,
        work_verdict=None if work is None else str(work.get("verdict")),
        failing=tuple(str(c) for c in (work or {}).get("failing") or []),
        changed=tuple(changed),
        first=_line_label(lines[0]) if lines else None,
        cause_first=planted.cause.matches(lines[0]) if lines else None,
        explained=float(explained) if isinstance(explained, int | float) else None,
        top=tuple(_line_label(line) for line in lines[:5]),
        seconds=run.seconds,
    )


def count_changed(work_verdict: str | None) -> bool:
    return work_verdict in COUNT_CHANGES


def _na(value: object, fmt: str = "{}") -> str:
    return "n/a" if value is None else fmt.format(value)


def planted_table(outcomes: Sequence[Outcome]) -> str:
    rows = []
    for o in outcomes:
        counts = "n/a" if o.work_verdict is None else o.work_verdict
        if o.changed:
            counts += f" ({', '.join(o.changed)})"
        first = "n/a" if o.cause_first is None else ("yes" if o.cause_first else "NO")
        rows.append(
            (
                o.what,
                f"{o.verdict} {_na(o.ratio, '{:.3f}')}",
                counts,
                ", ".join(o.failing) or "-",
                o.status,
                f"{first}: {o.first}" if o.first else first,
                _na(o.explained, "{:.0%}"),
            )
        )
    headers = (
        "planted",
        "timing verdict, ratio",
        "count verdict (changed)",
        "fails on",
        "exit",
        "cause first",
        "top 5",
    )
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


# ---------------------------------------------------------------- the summary and its targets


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def summary(outcomes: Sequence[Outcome], aa_runs: Sequence[AbRun], busy: bool) -> list[str]:
    """The measured figures, each beside its target (``met``/``MISSED``; ``n/a`` where ``ab`` gave no field)."""
    lines = []
    judged = [o for o in outcomes if o.cause_first is not None]
    first = sum(bool(o.cause_first) for o in judged)
    if judged:
        lines.append(
            f"{_met(first >= TARGET_FIRST)}: the planted cause ranks first in {first} of {len(outcomes)} "
            f"(target >= {TARGET_FIRST} of 10; {len(outcomes) - len(judged)} without attribution)"
        )
    else:
        lines.append(f"n/a: the planted cause ranks first: no row has a 'why' (target >= {TARGET_FIRST} of 10)")
    shares = [o.explained for o in outcomes if o.explained is not None]
    if shares:
        enough = sum(s >= TARGET_EXPLAINED for s in shares)
        lines.append(
            f"{_met(enough == len(shares))}: the top five explain >= {TARGET_EXPLAINED:.0%} of the slowdown in "
            f"{enough} of {len(shares)} attributed rows (lowest {min(shares):.0%}, median "
            f"{statistics.median(shares):.0%}; target: every row)"
        )
    else:
        lines.append(f"n/a: the share the top five explain (target >= {TARGET_EXPLAINED:.0%})")
    aa_rows = [row for run in aa_runs for row in run.rows]
    if aa_rows:
        works = [row.get("work") for row in aa_rows]
        read = [w for w in works if isinstance(w, Mapping)]
        changes = sum(count_changed(str(w.get("verdict"))) for w in read)
        unknown = sum(str(w.get("verdict")) == "unknown" for w in read)
        varying = sum(bool(w.get("varying")) for w in read)
        slower = sum(row.get("verdict") in ("slower", "unattributed") for row in aa_rows)
        if read:
            lines.append(
                f"{_met(changes == 0)}: A/A comparisons with a count change: {changes} of {len(aa_rows)} (target 0; "
                f"{unknown} unknown, {varying} with counts that varied between calls)"
            )
        else:
            lines.append(f"n/a: A/A count changes ({len(aa_rows)} comparisons, no 'work' field; target 0)")
        lines.append(
            f"A/A timing verdicts slower or unattributed: {slower} of {len(aa_rows)}; A/A exit status 1: "
            f"{sum(r.status == 1 for r in aa_runs)} of {len(aa_runs)} runs"
        )
    changing = [o for o in outcomes if next(p for p in PLANTS if p.name == o.name).changes_counts]
    by_counts = sum(count_changed(o.work_verdict) for o in changing)
    by_time = sum(o.verdict == "slower" for o in changing)
    load = "with one vCPU kept busy" if busy else "quiet"
    reference = "issue 22's reference: 4 of 6 +6% slowdowns" if busy else ""
    timing = f"the timing verdict alone (slower) caught {by_time} of {len(changing)}"
    if any(o.work_verdict is not None for o in outcomes):
        verdict = f"{_met(by_counts == len(changing))}: " if busy else ""
        target = "target: every one; " if busy else ""
        lines.append(
            f"{verdict}{load}: the count verdict caught {by_counts} of the {len(changing)} planted regressions that "
            f"change counts ({target}{timing}{'; ' + reference if reference else ''})"
        )
    else:
        lines.append(
            f"n/a: {load}: the count verdict on the {len(changing)} planted regressions that change counts (no 'work' "
            f"field; {timing}{'; ' + reference if reference else ''})"
        )
    failed = sum(o.status == 1 for o in outcomes)
    lines.append(f"planted pairs whose ab run failed (exit status 1): {failed} of {len(outcomes)}")
    return lines


def misses(outcomes: Sequence[Outcome]) -> list[str]:
    """The top lines of every row whose planted cause is not ranked first, and what counted as its cause."""
    lines = []
    for o in outcomes:
        if o.cause_first is False:
            planted = next(p for p in PLANTS if p.name == o.name)
            lines.append(f"{o.what}: cause not first; top lines: {'; '.join(o.top)}")
            lines.append(f"    counted as the cause: {planted.cause.why}")
    return lines


# ---------------------------------------------------------------- main


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s of rounds a planted pair and --aa 2 (a quick look)")
    parser.add_argument("--busy", action="store_true", help="keep one vCPU busy with a spin loop during every ab run")
    parser.add_argument("--aa", type=int, default=None, help="A/A ab runs of all ten workloads each (10; --quick: 2)")
    parser.add_argument("--max-time", type=float, default=None, help="ab --max-time of a planted pair (3 s; quick: 1)")
    parser.add_argument("--aa-max-time", type=float, default=0.5, help="ab --max-time of an A/A run (0.5 s)")
    parser.add_argument("--json", type=Path, default=None, help="write the raw results here")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the repository and ab files here (temp)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    aa = args.aa if args.aa is not None else (2 if args.quick else 10)
    max_time = args.max_time if args.max_time is not None else (1.0 if args.quick else 3.0)
    start = time.perf_counter()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="planted-"))
    workdir.mkdir(parents=True, exist_ok=True)
    scratch = workdir / "sizing.py"
    scratch.write_text(WORKLOADS_MODULE)
    step = step_seconds(scratch, "sleep")
    sleep_s = sleep_for(SLEEP_SHARE * step)
    slept = slept_seconds(sleep_s)
    make_repo(workdir / "repo", sleep_s)
    print(
        f"planted: in {workdir}; sleep workload's step {step * 1e3:.3f} ms at 1 thread, planted sleep "
        f"time.sleep({sleep_s * 1e6:.0f} us), which sleeps {slept * 1e6:.0f} us here: {slept / step:.1%} of the "
        f"step (target {SLEEP_SHARE:.0%})"
    )
    load_before = os.getloadavg()[0]
    print(
        f"{'one vCPU kept busy by a spin loop' if args.busy else 'quiet'}; ab --max-time {max_time:g} s "
        f"--tolerance {PLANTED_TOLERANCE:.0%} a planted pair, {aa} A/A runs of ten workloads at --max-time "
        f"{args.aa_max_time:g} s; load average {load_before:.2f}",
        flush=True,
    )
    outcomes: list[Outcome] = []
    planted_runs: list[AbRun] = []
    aa_runs: list[AbRun] = []
    with spinning(args.busy):
        for planted in PLANTS:
            out = workdir / f"p-{planted.name}.json"
            run = run_ab(
                workdir, f"p-{planted.name}", out, max_time=max_time, select=[planted.name], tolerance=PLANTED_TOLERANCE
            )
            planted_runs.append(run)
            outcomes.append(outcome(planted, run))
            o = outcomes[-1]
            print(
                f"  {planted.name}: {o.verdict} {_na(o.ratio, '{:.3f}')}, counts {_na(o.work_verdict)}, "
                f"first {_na(o.first)} ({run.seconds:.0f} s)",
                flush=True,
            )
        for i in range(aa):
            run = run_ab(workdir, "a2", workdir / f"aa{i}.json", max_time=args.aa_max_time)
            aa_runs.append(run)
            works = [r.get("work") for r in run.rows]
            changes = sum(isinstance(w, Mapping) and count_changed(str(w.get("verdict"))) for w in works)
            print(
                f"  A/A {i + 1}/{aa}: {len(run.rows)} workloads, {changes} count changes ({run.seconds:.0f} s)",
                flush=True,
            )
    print()
    print(planted_table(outcomes))
    print()
    for line in [*summary(outcomes, aa_runs, args.busy), *misses(outcomes)]:
        print(line)
    if args.json:
        data = {
            "busy": args.busy,
            "max_time": max_time,
            "aa_max_time": args.aa_max_time,
            "sleep_seconds": sleep_s,
            "step_seconds": step,
            "planted": [asdict(o) for o in outcomes],
            "planted_runs": [asdict(run) for run in planted_runs],
            "aa": [asdict(run) for run in aa_runs],
        }
        args.json.write_text(json.dumps(data, indent=1) + "\n")
        print(f"raw results: {args.json}")
    print(f"load average (1 min) at start {load_before:.2f}, at end {os.getloadavg()[0]:.2f}")
    print(f"wall time: {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
