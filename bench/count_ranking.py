"""Proof that a count line names the change that matters first: twenty planted regressions, each compared by ``ab``
against its base, and whether the first count line under its row names the planted op (issue 35, item 1).

    python bench/count_ranking.py            # both sets: 2 ab runs of ten workloads each, 30 to 55 s

(Wall time on this project's 2-vCPU machine, torch 2.13.0+cpu, 2026-12-02, at a load average of 5 to 8 from other
sessions. Run it with one vCPU kept busy by starting ``python3 -c 'while True: pass' &`` first. Results:
bench/evidence/count-ranking.md.)

Two sets of ten planted regressions, each set a workloads module in a scratch git repository
(commit ``a``) and one head commit that plants all ten, one in each workload (a workload's
counts are its own: one commit per set compares each workload's base with its planted head
as one commit per regression would):

- ``planted.py``: ``bench/planted.py``'s workloads and regressions, unchanged (``PLANTS``);
- ``second``: ten others (``SECOND``): an extra LayerNorm, activations ``.clone()``d, a
  Python loop over the batch, ``torch.cat`` grown in a loop, an embedding gathered twice,
  bilinear upsampling made bicubic, a scale and a shift added, a softmax applied twice, a
  broadcast made a ``.repeat()``, a top-k made a full sort.

Each set is one in-process ``ab`` run (``pytest_gpuperf.gate.run_ab``, on the CPU, 0.5 s of
rounds a workload: neither the counts nor the profile's op times, which rank them, come from
the rounds), and the first count line of a
row is read where a user reads it: the first line under the row's ``counts ...`` line in the
gate's lines (``gate_lines``, which ``ab`` prints under its table). A row is a hit when
that line names one of the planted op's names (``PLANTED_TARGETS``, and ``SECOND``'s causes,
each with its reason: the op
the regression adds and the ops it runs as, whose self time holds its cost; for a regression
that runs no op more often, a wider layer, the FLOPs' line). A regression that changes no
count (``planted.py``'s sleep) has no count line, and is a miss.

A table is printed (set, regression, planted op, first count line, hit) and each set's hit
rate beside its target (at least 9 of 10); the exit status is 1 when a set misses it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from planted import PLANTS, WORKLOADS_MODULE, Cause, Plant, aten_ops, git, plant
from tabulate import tabulate

from pytest_gpuperf.gate import AbOptions, gate_lines, run_ab

#: The second set's base: ten small CPU steps, a few ms each at one thread, each its own ``build_NAME`` function.
SECOND_MODULE: Final = '''\
"""Ten small CPU steps for bench/count_ranking.py's second set; its head commit plants one regression in each."""

import math

import torch
import torch.nn.functional as F

from pytest_gpuperf import Step, Workload


def _weights(device, *shape):
    """Seeded weights scaled so that activations stay near unit size."""
    return torch.randn(*shape, device=device) / math.sqrt(shape[0])


def build_layernorm(device, size):
    torch.manual_seed(0)
    x = torch.randn(256, 512, device=device)
    w = _weights(device, 512, 512)

    def step():
        h = F.layer_norm(x, (512,)) @ w
        return F.relu(h)

    return Step(step, work={"samples": 256.0})


def build_clone(device, size):
    torch.manual_seed(0)
    x = torch.randn(512, 256, device=device)
    w1, w2 = _weights(device, 256, 256), _weights(device, 256, 256)

    def step():
        h = torch.relu(x @ w1)
        return h @ w2

    return Step(step, work={"samples": 512.0})


def build_batch_loop(device, size):
    torch.manual_seed(0)
    x = torch.randn(64, 256, device=device)
    w = _weights(device, 256, 256)

    def step():
        return torch.tanh(x @ w)

    return Step(step, work={"samples": 64.0})


def build_cat_loop(device, size):
    torch.manual_seed(0)
    x = torch.randn(32, 64, 64, device=device)

    def step():
        pieces = [torch.sin(row) for row in x]
        return torch.cat(pieces)

    return Step(step, work={"samples": 32.0})


def build_embedding_twice(device, size):
    torch.manual_seed(0)
    table = torch.randn(20000, 128, device=device)
    ids = torch.randint(0, 20000, (2048,), device=device)
    w1, w2 = _weights(device, 128, 128), _weights(device, 128, 128)

    def step():
        h = F.embedding(ids, table)
        return (h @ w1) * (h @ w2)

    return Step(step, work={"samples": 2048.0})


def build_bicubic(device, size):
    torch.manual_seed(0)
    x = torch.randn(1, 16, 64, 64, device=device)
    w = _weights(device, 16, 16, 3, 3)

    def step():
        h = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        return F.conv2d(h, w, padding=1)

    return Step(step, work={"samples": 1.0})


def build_two_elementwise(device, size):
    torch.manual_seed(0)
    x = torch.randn(512, 256, device=device)
    w = _weights(device, 256, 256)
    scale, shift = torch.rand(256, device=device) + 0.5, torch.randn(256, device=device)

    def step():
        return F.relu(x @ w)

    return Step(step, work={"samples": 512.0})


def build_extra_softmax(device, size):
    torch.manual_seed(0)
    q, k = (torch.randn(8, 128, 32, device=device) for _ in range(2))

    def step():
        scores = q @ k.transpose(1, 2) / math.sqrt(32)
        return torch.softmax(scores, dim=-1)

    return Step(step, work={"samples": 8.0})


def build_repeat(device, size):
    torch.manual_seed(0)
    x = torch.randn(512, 512, device=device)
    bias = torch.randn(1, 512, device=device)

    def step():
        return torch.relu(x + bias)

    return Step(step, work={"samples": 512.0})


def build_sort(device, size):
    torch.manual_seed(0)
    x = torch.randn(64, 4096, device=device)

    def step():
        return torch.topk(x, 16, dim=-1).values

    return Step(step, work={"samples": 64.0})


WORKLOADS = {
    name: Workload(name, build, description)
    for name, build, description in [
        ("layernorm", build_layernorm, "a LayerNorm and a layer"),
        ("clone", build_clone, "an MLP of two layers"),
        ("batch_loop", build_batch_loop, "a layer over a batch of 64"),
        ("cat_loop", build_cat_loop, "32 pieces joined"),
        ("embedding_twice", build_embedding_twice, "an embedding and two layers"),
        ("bicubic", build_bicubic, "an upsample and a convolution"),
        ("two_elementwise", build_two_elementwise, "a layer"),
        ("extra_softmax", build_extra_softmax, "attention scores"),
        ("repeat", build_repeat, "a bias added by broadcasting"),
        ("sort", build_sort, "the top 16 of each row"),
    ]
}
'''

#: The second set: one regression per workload of ``SECOND_MODULE``; its cause is the planted op's names (the op the
#: regression adds and the ops it runs as: on a CPU an op's self time lands on the innermost op).
SECOND: Final[tuple[Plant, ...]] = (
    Plant(
        "layernorm",
        "an extra LayerNorm",
        "        return F.relu(h)\n",
        "        return F.relu(F.layer_norm(h, (512,)))  # planted: an extra LayerNorm\n",
        Cause(aten_ops("layer_norm", "native_layer_norm"), why="F.layer_norm runs as aten::native_layer_norm"),
    ),
    Plant(
        "clone",
        "activations .clone()d",
        "        h = torch.relu(x @ w1)\n",
        "        h = torch.relu(x @ w1).clone()  # planted: the activations copied\n",
        Cause(aten_ops("clone", "copy_"), why="aten::clone copies through aten::copy_"),
    ),
    Plant(
        "batch_loop",
        "a Python loop over the batch",
        "        return torch.tanh(x @ w)\n",
        "        # planted: one matmul per sample\n"
        "        return torch.tanh(torch.cat([x[i : i + 1] @ w for i in range(x.shape[0])]))\n",
        Cause(aten_ops("mm", "matmul"), why="the loop runs aten::matmul -> aten::mm once per sample, 64 times for 1"),
    ),
    Plant(
        "cat_loop",
        "torch.cat grown in a loop",
        "        pieces = [torch.sin(row) for row in x]\n        return torch.cat(pieces)\n",
        "        out = torch.sin(x[0])\n"
        "        for row in x[1:]:  # planted: the output grown by one piece at a time\n"
        "            out = torch.cat([out, torch.sin(row)])\n"
        "        return out\n",
        Cause(aten_ops("cat"), why="aten::cat runs 31 times for 1, each copying all the pieces so far"),
    ),
    Plant(
        "embedding_twice",
        "an embedding gathered twice",
        "        return (h @ w1) * (h @ w2)\n",
        "        return (h @ w1) * (F.embedding(ids, table) @ w2)  # planted: the rows gathered again\n",
        Cause(aten_ops("embedding", "index_select"), why="aten::embedding gathers its rows by aten::index_select"),
    ),
    Plant(
        "bicubic",
        "bilinear upsampling made bicubic",
        'mode="bilinear"',
        'mode="bicubic"',
        Cause(aten_ops("upsample_bicubic2d"), why="aten::upsample_bicubic2d replaces aten::upsample_bilinear2d"),
    ),
    Plant(
        "two_elementwise",
        "a scale and a shift added",
        "        return F.relu(x @ w)\n",
        "        return F.relu((x @ w) * scale + shift)  # planted: two elementwise ops\n",
        Cause(aten_ops("mul", "add"), why="the scale is aten::mul, the shift aten::add"),
    ),
    Plant(
        "extra_softmax",
        "a softmax applied twice",
        "        return torch.softmax(scores, dim=-1)\n",
        "        return torch.softmax(torch.softmax(scores, dim=-1), dim=-1)  # planted: a second softmax\n",
        Cause(aten_ops("softmax", "_softmax"), why="torch.softmax runs as aten::softmax -> aten::_softmax"),
    ),
    Plant(
        "repeat",
        "a broadcast made a .repeat()",
        "        return torch.relu(x + bias)\n",
        "        return torch.relu(x + bias.repeat(x.shape[0], 1))  # planted: the bias copied out\n",
        Cause(aten_ops("repeat", "copy_"), why="aten::repeat writes its copies through aten::copy_"),
    ),
    Plant(
        "sort",
        "a top-k made a full sort",
        "        return torch.topk(x, 16, dim=-1).values\n",
        "        return torch.sort(x, dim=-1, descending=True).values[:, :16]  # planted: every row sorted\n",
        Cause(aten_ops("sort"), why="aten::sort replaces aten::topk"),
    ),
)

#: ``bench/planted.py``'s set on the count lines: each regression's planted op. Its ``PLANTS`` causes judge the why's
#: lines, which also hold ops whose count does not change (a float64 layer's ``aten::mm``): no count line names those.
PLANTED_TARGETS: Final[Mapping[str, Cause]] = {
    "extra_matmul": Cause(aten_ops("mm", "matmul"), why="the added matmul runs as aten::matmul -> aten::mm"),
    "layer_fp64": Cause(aten_ops("_to_copy", "copy_"), why="the casts to and from float64: aten::_to_copy -> copy_"),
    "item": Cause(aten_ops("item", "_local_scalar_dense"), why="aten::item reads through aten::_local_scalar_dense"),
    "gelu": Cause(
        aten_ops("mul", "add", "tanh", "pow"), why="the formula's elementwise ops (aten::gelu, which goes, is not one)"
    ),
    "dropout": Cause(
        aten_ops("dropout", "native_dropout", "bernoulli_", "bernoulli", "mul", "div_"),
        why="aten::dropout draws its mask (bernoulli_) and scales by it (mul, div_)",
    ),
    "wider": Cause(
        frozenset({"flops"}), why="no op runs more often: its matmuls' FLOPs grow, the FLOPs' line names them"
    ),
    "contiguous": Cause(aten_ops("clone", "copy_"), why="aten::contiguous copies through aten::clone -> copy_"),
    "softmax_fp64": Cause(aten_ops("_to_copy", "copy_"), why="the casts to and from float64: aten::_to_copy -> copy_"),
    "sdpa_math": Cause(
        aten_ops("_scaled_dot_product_attention_math", "bmm", "matmul", "_safe_softmax", "_softmax", "softmax"),
        why="the math backend's ops: scores and output by bmm, _safe_softmax",
    ),
    "sleep": Cause(why="a sleep runs no op: no count changes, no count line"),
}


@dataclass(frozen=True)
class Set:
    """One set of planted regressions: its workloads module (base), its regressions, each one's planted op."""

    name: str
    path: str
    module: str
    plants: tuple[Plant, ...]
    targets: Mapping[str, Cause]


SETS: Final = (
    Set("planted.py", "perf/workloads.py", WORKLOADS_MODULE, PLANTS, PLANTED_TARGETS),
    Set("second", "perf/second.py", SECOND_MODULE, SECOND, {p.name: p.cause for p in SECOND}),
)
#: At least this many of a set's ten rows name the planted op on their first count line (issue 35, item 1).
TARGET: Final = 9
#: ``ab --max-time`` a workload: neither the counts nor the profile's op times, which rank them, come from the rounds.
MAX_TIME: Final = 0.5
#: What planted.py's sleep is given to sleep (it changes no count, whatever it sleeps).
SLEEP_S: Final = 1e-4


def head_tag(s: Set) -> str:
    return f"p-{s.name.removesuffix('.py')}"


def make_repo(repo: Path) -> None:
    """Commit ``a`` holds every set's base module; from it, one commit per set plants its ten regressions."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "perf").mkdir()
    (repo / "perf" / "__init__.py").write_text("")
    for s in SETS:
        (repo / s.path).write_text(s.module)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a: the bases")
    git(repo, "tag", "a")
    for s in SETS:
        git(repo, "checkout", "-q", "a")
        source = s.module
        for planted in s.plants:
            source = plant(source, planted, SLEEP_S)
        (repo / s.path).write_text(source)
        git(repo, "commit", "-q", "-am", f"{s.name}: ten regressions planted")
        git(repo, "tag", head_tag(s))


def first_count_lines(lines: Sequence[str]) -> dict[str, str]:
    """Each row's first count line in the gate's lines: the line after ``NAME [device]: counts ...``, by ``NAME``."""
    first = {}
    for i, line in enumerate(lines):
        head, sep, _ = line.partition(": counts ")
        if sep and " [" in head and i + 1 < len(lines) and lines[i + 1].startswith("  "):
            first[head.rsplit(" [", 1)[0]] = lines[i + 1].strip()
    return first


def names_planted_op(line: str | None, target: Cause) -> bool:
    """Whether a count line (``aten::mm 2 -> 3/call (+1)``, ``flops 1.05e+06 -> ...``) names one of the planted op's
    names: its first word does (a folded line is ``view/metadata ops ...``, which names none)."""
    return line is not None and line.split(" ", 1)[0] in target.names


@dataclass(frozen=True)
class Outcome:
    set: str
    name: str
    what: str
    planted_op: str
    first: str | None
    hit: bool


def run_set(s: Set, repo: Path) -> list[Outcome]:
    """One ``ab`` run of the set's base against its planted head; each row's outcome, in the set's order."""
    options = AbOptions(
        base="a", head=head_tag(s), workloads=Path(s.path), repo=repo, device="cpu", max_time=MAX_TIME, trace="off"
    )
    firsts = first_count_lines(gate_lines(run_ab(options, out=None).result))
    outcomes = []
    for planted in s.plants:
        target = s.targets[planted.name]
        first = firsts.get(planted.name)
        names = ", ".join(sorted(target.names)) or "none"
        outcomes.append(Outcome(s.name, planted.name, planted.what, names, first, names_planted_op(first, target)))
    return outcomes


def table(outcomes: Sequence[Outcome]) -> str:
    rows = [
        (o.set, o.what, o.planted_op, o.first or "- (no count changed)", "yes" if o.hit else "NO") for o in outcomes
    ]
    headers = ("set", "regression", "planted op", "first count line", "hit")
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def verdicts(outcomes: Sequence[Outcome]) -> tuple[list[str], bool]:
    """Each set's hit rate beside the target, and whether every set met it."""
    lines, met = [], True
    for s in SETS:
        rows = [o for o in outcomes if o.set == s.name]
        hits = sum(o.hit for o in rows)
        changed = sum(o.first is not None for o in rows)
        ok = hits >= TARGET
        met &= ok
        lines.append(
            f"{'met' if ok else 'MISSED'}: {s.name}: the planted op is the first count line in {hits} of {len(rows)} "
            f"(target >= {TARGET} of {len(rows)}; {changed} rows with a count line)"
        )
    return lines, met


def main() -> int:
    started = time.perf_counter()
    load_start = os.getloadavg()
    print(
        f"count ranking: {len(SETS)} sets, ab --max-time {MAX_TIME:g} s a workload on the CPU; load average "
        f"{load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}",
        flush=True,
    )
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="count-ranking-") as workdir:
        repo = Path(workdir) / "repo"
        make_repo(repo)
        for s in SETS:
            set_started = time.perf_counter()
            outcomes += run_set(s, repo)
            print(f"  {s.name}: {time.perf_counter() - set_started:.0f} s", flush=True)
    print()
    print(table(outcomes))
    print()
    lines, met = verdicts(outcomes)
    for line in lines:
        print(line)
    load_end = os.getloadavg()
    print(f"load average (1 min) at start {load_start[0]:.2f}, at end {load_end[0]:.2f}")
    print(f"wall time: {time.perf_counter() - started:.0f} s")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
