"""Which torch the suites need, and a clear error on an older one.

``TORCH_FLOOR`` is the oldest torch release every torch API used by pytest-gpuperf and
its suites exists in; ``pyproject.toml`` declares the same floor (``torch>=2.3``), and
``tests/suites/test_compat.py`` checks that the two agree and that every torch name the
code uses was vetted against the floor. What sets it: ``torch.amp.GradScaler("cuda")``
(the AMP steps) first exists in torch 2.3; before, the class lived in
``torch.cuda.amp.grad_scaler`` only (compare the source pages of ``torch.cuda.amp.grad_scaler``
in the 2.2 and 2.3 documentation).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["TORCH_FLOOR", "check_torch", "torch_release"]

#: (major, minor) of the oldest torch the suites run on.
TORCH_FLOOR: Final = (2, 3)

_RELEASE: Final = re.compile(r"(\d+)\.(\d+)")


def torch_release(version: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``; a string that does not start with major.minor raises ValueError naming it."""
    match = _RELEASE.match(version)
    if match is None:
        raise ValueError(f"torch version {version!r} does not start with major.minor (such as '2.13.0+cpu')")
    return int(match.group(1)), int(match.group(2))


def check_torch(version: str) -> str | None:
    """None when ``version`` is at or above the floor, else what to do about it."""
    if torch_release(version) >= TORCH_FLOOR:
        return None
    floor = ".".join(map(str, TORCH_FLOOR))
    return (
        f"the pytest-gpuperf suites need torch >= {floor} (torch.amp.GradScaler, among others); "
        f"this environment has torch {version}. Install torch {floor} or later for your hardware "
        "from https://pytorch.org/get-started/locally/"
    )
