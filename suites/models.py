"""The networks the suites train: small, standard shapes that stress matmul, convolution and memory."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["DeepStack", "EncoderBlock", "ExpansionBlock", "ResNetStyle", "SmallCNN", "TokenClassifier", "mlp"]


def mlp(widths: Sequence[int]) -> nn.Sequential:
    """Linear layers of the given widths with ReLU between them (none after the last): the tutorial classifier.

    ``mlp((1000, 512, 256, 2))`` is the feed-forward network of the GPU-training tutorials.
    """
    if len(widths) < 2:
        raise ValueError(f"mlp widths {tuple(widths)!r}: give at least an input and an output width")
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class SmallCNN(nn.Module):
    """Two conv+ReLU+pool stages and a linear head, for 3x32x32 images (the CIFAR-10 tutorial shape)."""

    def __init__(self, width: int = 16, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(2 * width * 8 * 8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(torch.flatten(self.features(x), 1))
        return out


class _Residual(nn.Module):
    """conv-BN-ReLU-conv-BN plus the input (projected when the shape changes), then ReLU."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
            nn.BatchNorm2d(c_out),
        )
        self.skip: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.skip = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class ResNetStyle(nn.Module):
    """A stem and ``stages`` stages of ``blocks`` residual blocks; each later stage halves the map and doubles width."""

    def __init__(self, width: int = 32, stages: int = 3, blocks: int = 1, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
        c = width
        for stage in range(stages):
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                c_out = width * 2**stage
                layers.append(_Residual(c, c_out, stride))
                c = c_out
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.flatten(nn.functional.adaptive_avg_pool2d(self.body(x), 1), 1)
        out: torch.Tensor = self.head(pooled)
        return out


class ExpansionBlock(nn.Module):
    """``x + W2 relu(W1 x)`` with a ``ratio``-times wider inner activation: what checkpointing can free.

    Autograd keeps the block's input and its wide inner activation for backward;
    checkpointing the block keeps only the input and recomputes the inner part.
    (A plain Linear+ReLU block has no inner activation beyond its boundaries, so
    checkpointing it alone frees nothing: measured on this project's machine.)
    """

    def __init__(self, width: int, ratio: int = 4) -> None:
        super().__init__()
        self.up = nn.Linear(width, ratio * width)
        self.down = nn.Linear(ratio * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = torch.relu(self.up(x))
        out: torch.Tensor = x + self.down(inner)
        return out


class DeepStack(nn.Module):
    """``depth`` expansion blocks and a classifier head; ``checkpointed`` recomputes each block in backward."""

    def __init__(self, width: int, depth: int, classes: int = 10, *, checkpointed: bool = False) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(ExpansionBlock(width) for _ in range(depth))
        self.head = nn.Linear(width, classes)
        self.checkpointed = checkpointed

    def forward(self, x: Any) -> torch.Tensor:
        recompute = self.checkpointed and torch.is_grad_enabled()
        for block in self.blocks:
            # use_reentrant=False: the recommended variant; it supports keyword inputs and
            # inputs that do not require grad, and frees the block's saved tensors.
            x = checkpoint(block, x, use_reentrant=False) if recompute else block(x)
        out: torch.Tensor = self.head(x)
        return out


# ---------------------------------------------------------------- transformer


class EncoderBlock(nn.Module):
    """A pre-norm transformer encoder block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))`` (4x inner width, GELU).

    Attention is ``torch.nn.functional.scaled_dot_product_attention`` over ``heads`` heads,
    unmasked (an encoder), without dropout: which kernel runs it (flash, memory-efficient,
    math) is chosen by torch, or pinned by the caller with ``torch.nn.attention.sdpa_kernel``.
    """

    def __init__(self, width: int, heads: int, ratio: int = 4) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"EncoderBlock width {width} is not a multiple of heads {heads}")
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, ratio * width)
        self.down = nn.Linear(ratio * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        # (batch, seq, 3, heads, head_dim) -> three (batch, heads, seq, head_dim)
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        attended = nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq, width))
        out: torch.Tensor = x + self.down(nn.functional.gelu(self.up(self.norm2(x))))
        return out


class TokenClassifier(nn.Module):
    """``layers`` encoder blocks on (batch, seq, width) embeddings and a per-token linear head.

    The output is flattened to (batch * seq, classes), so a training step's cross entropy
    takes one target per token.
    """

    def __init__(self, width: int, heads: int, layers: int, classes: int = 10) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(EncoderBlock(width, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.norm(self.blocks(x)))
        return out.flatten(0, 1)
