from __future__ import annotations

import pytest


def _absent(kind: str) -> str:
    """Why a test marked ``kind`` cannot run here, or '' when it can."""
    import torch

    if kind == "cuda" and not torch.cuda.is_available():
        return f"needs a CUDA GPU; torch {torch.__version__} sees none on this machine"
    if kind == "mps" and not torch.backends.mps.is_available():
        return "needs Apple MPS; not available on this machine"
    return ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.cuda`` and ``@pytest.mark.mps`` tests need real hardware; elsewhere they skip with the reason."""
    for item in items:
        for kind in ("cuda", "mps"):
            if item.get_closest_marker(kind):
                reason = _absent(kind)
                if reason:
                    item.add_marker(pytest.mark.skip(reason=reason))
