from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.cuda`` tests need a real GPU; here they skip with the reason."""
    cuda_items = [item for item in items if item.get_closest_marker("cuda")]
    if not cuda_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    reason = f"needs a CUDA GPU; torch {torch.__version__} sees none on this machine"
    for item in cuda_items:
        item.add_marker(pytest.mark.skip(reason=reason))
