"""The problem sizes of every family, per size preset, in one table (docs/suites.md shows it).

``small`` keeps a CPU run of the whole suite to a few minutes on two cores; ``large``
fills a data-centre GPU. The records store the sizes as parameters, so runs at
different presets are never compared.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ATTENTION",
    "BANDWIDTH_BYTES",
    "COPY_BYTES",
    "DEEP_STACK",
    "MATMUL_SIZES",
    "MATMUL_SWEEP",
    "MLP_BATCH",
    "MLP_WIDTHS",
    "RESNET",
    "SMALL_CNN",
    "TRANSFORMER",
    "WIDE_MLP",
]

#: The n of the ``matmul_*`` workloads (the middle of the sweep).
MATMUL_SIZES: Final = {"small": 512, "medium": 2048, "large": 8192}
#: The n the matmul suite sweeps; the largest, in the best dtype, is the device's reference peak.
MATMUL_SWEEP: Final = {"small": (256, 512, 1024), "medium": (1024, 2048, 4096), "large": (4096, 8192, 16384)}
#: widths of the tutorial classifier
MLP_WIDTHS: Final = (1000, 512, 256, 2)
#: batch of the tutorial classifier 1000-512-256-2
MLP_BATCH: Final = {"small": 512, "medium": 4096, "large": 16384}
#: (batch, widths) of the wider classifier
WIDE_MLP: Final = {
    "small": (128, (1024, 2048, 2048, 10)),
    "medium": (1024, (1024, 4096, 4096, 10)),
    "large": (4096, (4096, 8192, 8192, 10)),
}
#: (batch, width) of the small CNN on 3x32x32 images
SMALL_CNN: Final = {"small": (64, 16), "medium": (256, 32), "large": (1024, 64)}
#: (batch, width, stages, blocks per stage) of the ResNet-style stack on 3x32x32 images
RESNET: Final = {"small": (32, 16, 3, 1), "medium": (64, 32, 3, 2), "large": (256, 64, 4, 2)}
#: (batch, width, depth) of the expansion-block stack used for gradient checkpointing
DEEP_STACK: Final = {"small": (1024, 128, 8), "medium": (4096, 512, 12), "large": (8192, 1024, 16)}
#: bytes per host-to-device copy
COPY_BYTES: Final = {"small": 16 << 20, "medium": 64 << 20, "large": 256 << 20}
#: bytes of one buffer of the bandwidth workloads (the reference size; the suite also runs half of it)
BANDWIDTH_BYTES: Final = {"small": 32 << 20, "medium": 256 << 20, "large": 1 << 30}
#: (batch, seq, width, heads, layers) of the transformer encoder (TokenClassifier); a batch holds batch x seq tokens
TRANSFORMER: Final = {
    "small": (8, 64, 128, 4, 2),
    "medium": (16, 256, 512, 8, 4),
    "large": (16, 1024, 1024, 16, 8),
}
#: (batch, heads, seq, head_dim) of the attention-only workloads (math path against the fused kernel)
ATTENTION: Final = {"small": (4, 4, 256, 32), "medium": (8, 8, 1024, 64), "large": (16, 16, 2048, 64)}
