"""Test-wide setup: real-hardware markers, and pytester inner runs that behave the same in any test order."""

from __future__ import annotations

import pytest

# pytester's in-process runs restore sys.modules afterwards, so a module that an inner run
# imports first is imported again by the next test. torch modules that register operator
# libraries (torch._dynamo pulls in torch._inductor.test_operators) fail the second time
# ("Only a single TORCH_LIBRARY can be used ..."): import them once, before any inner run.
import torch
import torch._dynamo


def _absent(kind: str) -> str:
    """Why a test marked ``kind`` cannot run here, or '' when it can."""
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


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester with pytest-randomly off in its inner runs (in-process and subprocess alike): an inner
    session's tests run in file order, so that what it prints can be checked line by line."""
    # Set after pytester's own setup, which clears PYTEST_ADDOPTS.
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    return pytester
