"""Memory as a user sees it on a CPU: the transient part the same in every session, or ``unknown`` with the reason,
beside the process's RSS high-water mark."""

from __future__ import annotations

import json

import pytest

FAST = ("--gpuperf-device=cpu", "--gpuperf-min-time=0.01", "--gpuperf-max-time=0.3", "--gpuperf-warmup-time=0.05")

TRAINING_TEST = """
import torch

def test_train(gpuperf):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(torch.nn.functional.cross_entropy(model(x), y))
        optimizer.step()

    gpuperf.measure(step, samples=128)
"""

ALTERNATING_TEST = """
import torch

def test_alternating(gpuperf):
    calls = []

    def step():
        calls.append(1)
        torch.ones((1 + len(calls) % 2) * 2**18)

    gpuperf.measure(step, items=1)
"""


def _measurement(path: str, pytester: pytest.Pytester) -> dict[str, object]:
    (record,) = json.loads((pytester.path / path).read_text())["records"]
    measurement: dict[str, object] = record["measurement"]
    return measurement


def test_five_sessions_of_a_zero_grad_training_step_give_the_same_transient(pytester: pytest.Pytester) -> None:
    # In one process, as the sessions of a long pytest run follow each other: each leaves
    # blocks that torch's profiler saw allocated, which once made the next session's peak wrong.
    pytester.makepyfile(test_train=TRAINING_TEST)
    peaks: list[int] = []
    for session in range(5):
        result = pytester.runpytest(*FAST, f"--gpuperf-json=run{session}.json")
        assert result.ret == pytest.ExitCode.OK
        m = _measurement(f"run{session}.json", pytester)
        assert m["memory_method"] == "process RSS high-water mark (VmHWM)"
        memory = m["memory"]
        assert isinstance(memory, dict) and memory["transient_method"] == "torch.profiler CPU allocator events"
        peak = memory["transient_bytes"]
        assert isinstance(peak, int) and peak > 0, peak
        peaks.append(peak)
    assert max(peaks) <= 1.1 * min(peaks), f"peak memory of five identical sessions: {peaks}"


def test_a_transient_that_cannot_be_told_shows_unknown_and_the_record_says_why(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_alternating=ALTERNATING_TEST)
    result = pytester.runpytest(*FAST, "--gpuperf-json=run.json")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*test_alternating*cpu*unknown, RSS *"])
    m = _measurement("run.json", pytester)
    memory = m["memory"]
    assert isinstance(memory, dict) and memory["transient_bytes"] is None
    # Which of the two comes first depends on how many calls timing made.
    assert memory["transient_method"] in {
        f"unknown: consecutive calls peaked at {a} and {b}; the step's memory use changes from call to call"
        for a, b in (("1 MiB", "2 MiB"), ("2 MiB", "1 MiB"))
    }
    assert "USDT" not in result.stderr.str() and "profiler_start" not in result.stdout.str()
