"""Where one measurement's time goes: its samples (first call, warmup, samples), garbage collections, memory probe and
work profile, for a few real steps on the CPU.

    python bench/measurement_parts.py [--set KEY=VALUE ...] [--repeats 1]

Each step is measured with ``pytest_gpuperf.measure`` (the path both fixtures take), with the
measuring core's phases timed through its readings (``pytest_gpuperf.measuring.Reading``):
``sample`` (the first call, the warmup and the samples: the span a reading registered for it has
its sensor open), ``peak_memory`` (the memory reading's read after timing: the memory probe, and
on a CPU the work profile's calls that ride on it), ``work_profile`` (the work profile's: reading
the profile, or its own calls), and every ``gc.collect`` made inside them. ``--set`` changes a
setting (``--set profile=counts --set max_time=1``), as ``measure(**settings)`` takes it. The
steps: pint's ``UnitRegistry()`` and its tokenizer (where pint is installed: ``pip install
pint``), a training step of a small MLP, and ``sum(range(100))``. Prints the load average before
and after.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pytest_gpuperf.measuring import Around, Reading

PARTS = ("sample", "peak_memory", "work_profile")


def steps() -> dict[str, Callable[[], object]]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.randn(64, 256)

    def mlp_train() -> None:
        optimizer.zero_grad()
        model(batch).sum().backward()
        optimizer.step()

    out: dict[str, Callable[[], object]] = {}
    try:
        import pint
        from pint.pint_eval import plain_tokenizer
    except ImportError:
        print("pint is not installed: its steps are left out (pip install pint)")
    else:
        out["pint UnitRegistry()"] = functools.partial(pint.UnitRegistry, cache_folder=None)
        out["pint tokenizer"] = lambda: tuple(plain_tokenizer("10 metros + 5 segundos"))
    out["MLP train step"] = mlp_train
    out["sum(range(100))"] = lambda: sum(range(100))
    return out


class _SampleSpan(Reading[None]):
    """A reading that reads nothing: its sensor is open over the sampling, which it times into ``spent``."""

    name = "bench: sample"

    def __init__(self, spent: dict[str, float], clock: Callable[[], float]) -> None:
        self.spent = spent
        self.clock = clock

    @contextmanager
    def open(self, around: Around) -> Iterator[None]:
        start = self.clock()
        try:
            yield None
        finally:
            self.spent["sample"] = self.spent.get("sample", 0.0) + self.clock() - start


@contextmanager
def timed_parts(spent: dict[str, float], clock: Callable[[], float] = time.perf_counter) -> Iterator[None]:
    """The measuring core's phases, and ``gc.collect``, timed into ``spent`` by ``clock`` (wall time; the process's
    CPU time for ``bench/startup.py``) while inside: the sampling through a reading registered for it, the reads
    after timing by wrapping the memory's and the work profile's."""
    from pytest_gpuperf.measuring import MEMORY, PROFILE, register_reading

    collect = gc.collect

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + clock() - start

        return timed

    for name, reading in (("peak_memory", MEMORY), ("work_profile", PROFILE)):
        reading.after = wrap(name, reading.after)  # type: ignore[method-assign]
    gc.collect = wrap("gc.collect", collect)
    try:
        with register_reading(_SampleSpan(spent, clock)):
            yield
    finally:
        del MEMORY.after, PROFILE.after  # the instance's wrappers: the class's methods again
        gc.collect = collect


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting of measure()")
    parser.add_argument("--repeats", type=int, default=1, help="measurements of each step (medians shown)")
    options = parser.parse_args()
    settings = dict(item.split("=", 1) for item in options.set)
    import torch

    from pytest_gpuperf import measure
    from pytest_gpuperf.measuring import format_duration

    before = os.getloadavg()[0]
    print(
        f"{platform.node()}, {os.cpu_count()} CPUs, torch {torch.__version__}, Python {platform.python_version()}, "
        f"settings {settings or 'default'}, {options.repeats} measurement(s) of each step"
    )
    header = (
        f"{'step':22} {'total':>8} {'sample':>8} {'collect':>8} {'memory':>8} {'profile':>8}  "
        f"{'median':>10} {'samples':>9} {'CI':>7}  traced"
    )
    print(header)
    print("-" * len(header))
    for name, step in steps().items():
        step()
        rows: list[dict[str, float]] = []
        m = None
        for _ in range(options.repeats):
            spent: dict[str, float] = {}
            start = time.perf_counter()
            with timed_parts(spent):
                m = measure(step, device="cpu", name=name, **settings)
            spent["total"] = time.perf_counter() - start
            rows.append(spent)
        assert m is not None
        mid = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in ("total", *PARTS, "gc.collect")}
        traced = "yes" if m.profile is not None and m.profile.python else "no"
        print(
            f"{name:22} {mid['total']:7.2f}s {mid['sample']:7.2f}s {mid['gc.collect']:7.2f}s "
            f"{mid['peak_memory']:7.2f}s {mid['work_profile']:7.2f}s  {format_duration(m.median):>10} "
            f"{len(m.samples):>4}x{m.iterations:<4} {m.ci_text:>7}  {traced}"
        )
    print(
        "(sample: first call, warmup and samples; collect: gc.collect inside the phases, also counted in theirs; "
        "memory: the memory probe, on a CPU with the profile's calls riding on it; profile: reading it, or its own "
        f"calls) load average {before:.2f} -> {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
