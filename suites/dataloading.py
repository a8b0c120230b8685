"""A synthetic dataset through ``torch.utils.data.DataLoader`` feeding a training step on the device.

Three steps share one loader, one model and one pair of device buffers, so that they can
be timed in the same rounds:

- ``end_to_end``: the next batch from the loader, copied to the device, then a training step;
- ``loader``: the next batch and its copy to the device, no training;
- ``step``: the training step on the batch already on the device.

Which of ``loader`` and ``step`` takes longer says whether loading or compute bounds the
step. With workers (``num_workers`` > 0) the loader prefetches while the other steps run
(``prefetch_factor`` batches per worker): the first batches of a block of ``loader``
calls come from that queue, so ``loader`` with workers is a lower bound on the time it
takes to produce a batch. The workers are started, and the queue filled, before anything
is timed (``persistent_workers=True``, a warm iterator): worker start-up is never sampled.
The workers are child processes; the plugin counts their CPU time as background load.

Graph mode refuses these steps (``GRAPH_REFUSAL``): a CUDA graph would replay the one batch
copy it captured, with none of the loading, so its time would be of neither. The test is
skipped with that reason, as for any step that cannot be captured.

The sampler never ends (``_Forever``), so no epoch boundary (a new iterator, its queue
drained and refilled) falls into a timed block. Samples are uint8 features decoded on
the fly (scaled to [-0.5, 0.5] in float32: the per-sample work a loader does), and labels
come from a fixed random linear teacher, so the model learns them and the training check
(the loss falls) holds whatever batches it sees.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from pytest_gpuperf import Step, WorkloadUnsupported

from .models import mlp
from .training import training_step

__all__ = [
    "GRAPH_REFUSAL",
    "LOADER",
    "LOADER_WORKERS",
    "SyntheticDataset",
    "dataloader_steps",
    "dataloader_unsupported",
    "loader_name",
]

#: (batch, features, hidden width) per size preset; 10 classes.
LOADER: Final = {"small": (128, 1024, 512), "medium": (512, 4096, 2048), "large": (1024, 3 * 64 * 64, 4096)}
LOADER_WORKERS: Final = (0, 2)
#: Distinct samples in the dataset: enough batches that consecutive batches differ.
_BATCHES_OF_SAMPLES: Final = 8
_CLASSES: Final = 10
#: Why a DataLoader step is not captured in a CUDA graph (raised inside the capture, which refuses it with this).
GRAPH_REFUSAL: Final = (
    "a DataLoader step loads its batch on the host: a CUDA graph would replay one stale batch copy and drop the "
    "host's loading, so its replays would time neither; DataLoader steps are timed in warm mode"
)


def loader_name(workers: int, pinned: bool) -> str:
    return f"dataloader_w{workers}_{'pinned' if pinned else 'pageable'}"


def dataloader_unsupported(device: torch.device, pinned: bool) -> str | None:
    """Why the loader workload does not run on ``device``, or None."""
    if pinned and device.type != "cuda":
        return (
            "pin_memory=True pins batches for a CUDA device (page-locked host memory for its DMA); "
            f"on {device.type} DataLoader only warns and copies as pageable"
        )
    return None


class SyntheticDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``length`` samples of ``features`` uint8 values, decoded to float32 per item, with learnable labels."""

    def __init__(self, length: int, features: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.raw = torch.randint(0, 256, (length, features), dtype=torch.uint8, generator=generator)
        teacher = torch.randn(features, _CLASSES, generator=generator)
        self.labels = (self._decode(self.raw) @ teacher).argmax(dim=1)

    @staticmethod
    def _decode(raw: torch.Tensor) -> torch.Tensor:
        return raw.float().div_(255.0).sub_(0.5)

    def __len__(self) -> int:
        return int(self.raw.shape[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._decode(self.raw[index]), self.labels[index]


class _Forever(Sampler[int]):
    """0, 1, ..., n-1, 0, 1, ... without end: one iterator serves every call, with no epoch boundary."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __iter__(self) -> Iterator[int]:
        index = 0
        while True:
            yield index % self.length
            index += 1


def _never() -> bool:
    return False


def dataloader_steps(device: torch.device, size: str, *, workers: int, pinned: bool) -> dict[str, Step]:
    """The ``end_to_end``, ``loader`` and ``step`` Steps (module docstring), workers started and warm."""
    why = dataloader_unsupported(device, pinned)
    if why:
        raise WorkloadUnsupported(f"{loader_name(workers, pinned)} on {device}: {why}")
    batch, features, hidden = LOADER[size]
    torch.manual_seed(0)
    dataset = SyntheticDataset(batch * _BATCHES_OF_SAMPLES, features)
    loader = DataLoader(
        dataset,
        batch_size=batch,
        sampler=_Forever(len(dataset)),
        num_workers=workers,
        pin_memory=pinned,
        persistent_workers=workers > 0,
    )
    # DataLoader's pin thread pins for the current CUDA device: make it the tested one.
    context = torch.cuda.device(device) if pinned else contextlib.nullcontext()
    with context:
        batches = iter(loader)
        for _ in range(max(1, 2 * workers)):  # start the workers and fill their queue before any timing
            first_x, first_y = next(batches)
    x = first_x.to(device)
    y = first_y.to(device)

    capturing = torch.cuda.is_current_stream_capturing if torch.cuda.is_available() else _never

    def load() -> None:
        if capturing():
            raise RuntimeError(GRAPH_REFUSAL)
        # non_blocking only helps from pinned memory (an asynchronous DMA); from pageable memory it is synchronous.
        inputs, targets = next(batches)
        x.copy_(inputs, non_blocking=pinned)
        y.copy_(targets, non_blocking=pinned)

    model = mlp((features, hidden, _CLASSES)).to(device)
    params: dict[str, object] = {
        "model": "mlp",
        "batch": batch,
        "widths": f"{features}-{hidden}-{_CLASSES}",
        "num_workers": workers,
        "pin_memory": pinned,
    }
    train = training_step(model, x, y, precision="fp32", params=params)

    def end_to_end() -> None:
        load()
        train.fn()

    # The steps hold the iterator (and with it the workers) in their closures: the workers end with the steps.
    samples = float(batch)
    return {
        "end_to_end": Step(end_to_end, work={"samples": samples}, params=train.params, check=train.check),
        "loader": Step(load, work={"samples": samples}, params=params),
        "step": Step(train.fn, work=train.work, params=train.params),
    }
