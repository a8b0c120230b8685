"""Inference under ``torch.inference_mode()``: batch-1 latency, large-batch throughput, INT8 against fp32.

The wide MLP, the small CNN and the transformer encoder, in eval mode, fp32 math pinned to
IEEE, each at batch 1 and at its preset's batch:

- batch 1: each call is timed alone (``per_call=True``), so the record has per-call
  percentiles (p50, p90, p99; the ``p99`` column). Asserted: the p99 stays under a ceiling
  far above any working device (on its distribution-free interval, which needs 368 calls:
  ``min_samples=400``); the percentiles themselves are the content.
- the preset's batch: throughput, with a floor far below any working device.
- INT8: the wide MLP's Linear layers quantized dynamically (``quantize_dynamic``: int8
  weights, activations quantized per call) against the same model in fp32, in paired
  rounds on the CPU. Asserted: the outputs agree within ``INT8_TOLERANCE`` (the workload's
  check). The speedup is reported: it depends on the CPU's integer dot-product
  instructions (VNNI, AMX) and on the quantized engine. Skipped, with the reason, off the
  CPU or where this torch has no quantized engine.
"""

from __future__ import annotations

from typing import Final

import pytest

from pytest_gpuperf import Gpuperf
from pytest_gpuperf.measuring import format_duration

from .workloads import INT8_TOLERANCE, WORKLOADS, int8_unsupported

#: model -> what one row of its batch is
MODELS: Final = {"mlp_wide": "samples", "cnn": "images", "transformer": "tokens"}
#: Any working device answers one input of these models far faster; the percentiles are the content.
MAX_P99_LATENCY: Final = "1 s"
#: Floors far below any working device, as in the training suites.
MIN_THROUGHPUT: Final = {"samples": "100 samples/s", "images": "10 images/s", "tokens": "100 tokens/s"}
#: The p99's two-sided 95% interval needs 368 single calls (with fewer, by the 2 s cap, the check is inconclusive).
LATENCY_SAMPLES: Final = 400
#: Six short measurements: a shorter cap than the suite's default keeps the CPU run short.
SAMPLING: Final = {"max_time": "1 s", "warmup_time": "0.25 s"}


@pytest.mark.gpuperf(per_call=True, min_samples=LATENCY_SAMPLES, max_time="2 s")
@pytest.mark.parametrize("model", list(MODELS))
def test_batch_one_latency(gpuperf: Gpuperf, model: str) -> None:
    m = gpuperf.run(WORKLOADS[f"{model}_infer_b1"])
    percentiles = m.percentiles
    if percentiles is not None:
        cells = ", ".join(f"p{p} {format_duration(v)}" for p, v in percentiles.items())
        gpuperf.note(f"{model} batch 1: {cells} ({len(m.samples)} calls timed singly)")
    m.assert_latency(at_most=MAX_P99_LATENCY, percentile=99)


@pytest.mark.parametrize("model", list(MODELS))
def test_batch_throughput(gpuperf: Gpuperf, model: str) -> None:
    m = gpuperf.run(WORKLOADS[f"{model}_infer"])
    m.assert_throughput(at_least=MIN_THROUGHPUT[MODELS[model]])


def test_int8_dynamic_quantization(gpuperf: Gpuperf) -> None:
    why = int8_unsupported(gpuperf.device)
    if why:
        pytest.skip(f"mlp_wide_infer_int8 on {gpuperf.slot.id}: {why}")
    steps = {
        "fp32": WORKLOADS["mlp_wide_infer"].build(gpuperf.device, gpuperf.size),
        "int8": WORKLOADS["mlp_wide_infer_int8"].build(gpuperf.device, gpuperf.size),
    }
    rounds = gpuperf.paired(steps, names={"fp32": "fp32", "int8": "int8"})
    for step in steps.values():
        assert step.check is not None
        step.check()  # int8: within INT8_TOLERANCE of fp32's output
    engine = steps["int8"].params["engine"]
    gpuperf.note(
        f"mlp_wide INT8 ({engine} engine) {rounds.speedup('int8', 'fp32')}; outputs within {INT8_TOLERANCE:.0%} of "
        "fp32's (asserted); the speedup is not asserted: it depends on the CPU's integer dot-product instructions "
        "(VNNI, AMX) and the engine's kernels"
    )
