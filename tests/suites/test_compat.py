"""The oldest torch the package and the suites run on: declared once, checked at startup, every torch name vetted.

CI cannot install an old torch (one torch 2.13 CPU build is on disk, and PyPI's Linux
wheels pull gigabytes of CUDA libraries), so the floor is checked here by what can be
checked without one: pyproject.toml declares the floor the suites enforce, the suites
refuse an older torch with the fix, and every torch name the code reaches from ``import
torch`` must be in ``VETTED`` with the release it first exists in, at or below the floor.
By hand, on 2026-11-23, with PyPI's torch 2.3.1 and 2.2.2 (docs/suites.md says what ran).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest
import torch

from suites.compat import TORCH_FLOOR, check_torch, torch_release

ROOT: Final = Path(__file__).parents[2]
SCANNED: Final = ("pytest_gpuperf", "suites", "benchmarks")
_OLD: Final = (2, 0)  # in torch 2.0's documentation, or older

#: Every torch name used (an attribute chain from ``import torch``, a ``from torch... import``, or an
#: alias of either), with the release it first exists in; newer than 2.0: where that is documented.
VETTED: Final[dict[str, tuple[tuple[int, int], str]]] = {
    "torch.amp.GradScaler": (
        (2, 3),
        "torch 2.3 docs: torch.cuda.amp.GradScaler subclasses torch.amp.GradScaler; in 2.2 it is the implementation",
    ),
    "torch.utils.flop_counter.FlopCounterMode": ((2, 1), "added by pytorch/pytorch#95751, after the 2.0 branch cut"),
    # The formulas FlopCounterMode applies: a module-level dict of torch/utils/flop_counter.py from the same change
    # (_profile.py's counting mode reads it; a formula that fails there leaves the FLOPs unknown, never a test).
    **{
        name: ((2, 1), "torch/utils/flop_counter.py's module-level flop_registry, from pytorch/pytorch#95751")
        for name in ("torch.utils.flop_counter.flop_registry", "torch.utils.flop_counter.flop_registry.get")
    },
    "torch.autograd.profiler.record_function": (_OLD, "in torch 1.x's documentation (torch.autograd.profiler)"),
    # suites/attention.py reaches these through torch_module (a stand-in in its tests): listed by hand.
    **{
        name: ((2, 3), "torch 2.3 docs: torch.nn.attention (sdpa_kernel, SDPBackend); the page is from 2024-01-24")
        for name in ("torch.nn.attention", "torch.nn.attention.sdpa_kernel", "torch.nn.attention.SDPBackend")
    },
    "torch.autograd._profiler_enabled": (
        (2, 0),
        "private; torch/distributed/rpc/api.py calls it, as it has since before torch 2.0",
    ),
    "torch._C._profiler._ExtraFields_Allocation": (
        (2, 0),
        "private; imported by torch/profiler/_memory_profiler.py, which ships from torch 2.0",
    ),
    **{
        name: (_OLD, "")
        for name in (
            "torch",
            "torch.Generator",
            "torch.Tensor",
            "torch.__version__",
            "torch.add",
            "torch.as_tensor",
            "torch.autocast",
            "torch.autograd.backward",
            "torch.ao.quantization.quantize_dynamic",
            "torch.autograd.profiler.profile",
            "torch.backends",
            "torch.backends.cuda.flash_sdp_enabled",
            "torch.backends.cuda.math_sdp_enabled",
            "torch.backends.cuda.mem_efficient_sdp_enabled",
            "torch.backends.quantized.engine",
            "torch.backends.quantized.supported_engines",
            "torch.bfloat16",
            "torch.compile",
            "torch.cuda",
            "torch.cuda.current_device",
            "torch.cuda.device",
            "torch.cuda.device_count",
            "torch.cuda.get_device_capability",
            "torch.cuda.is_available",
            "torch.cuda.is_current_stream_capturing",
            "torch.cuda.set_device",
            "torch.cuda.synchronize",
            "torch.device",
            "torch.distributed",
            "torch.distributed.all_gather_object",
            "torch.distributed.barrier",
            "torch.distributed.destroy_process_group",
            "torch.distributed.init_process_group",
            "torch.distributed.is_initialized",
            "torch.distributed.new_group",
            "torch.dtype",
            "torch.empty",
            "torch.enable_grad",
            "torch.flatten",
            "torch.float16",
            "torch.float32",
            "torch.inference_mode",
            "torch.get_num_threads",
            "torch.is_grad_enabled",
            "torch.isfinite",
            "torch.manual_seed",
            "torch.matmul",
            "torch.mm",
            "torch.multiprocessing",
            "torch.nn",
            "torch.nn.BatchNorm2d",
            "torch.nn.Conv2d",
            "torch.nn.DataParallel",
            "torch.nn.Identity",
            "torch.nn.LayerNorm",
            "torch.nn.Linear",
            "torch.nn.MaxPool2d",
            "torch.nn.Module",
            "torch.nn.ModuleList",
            "torch.nn.ReLU",
            "torch.nn.Sequential",
            "torch.nn.functional.adaptive_avg_pool2d",
            "torch.nn.functional.cross_entropy",
            "torch.nn.functional.gelu",
            "torch.nn.functional.scaled_dot_product_attention",
            "torch.nn.parallel.DistributedDataParallel",
            "torch.ones",
            "torch.ops.aten",
            "torch.optim.Adam",
            "torch.optim.Optimizer",
            "torch.profiler.ProfilerActivity",
            "torch.profiler.ProfilerActivity.CPU",
            "torch.profiler.ProfilerActivity.CUDA",
            "torch.profiler.profile",
            "torch.qint8",
            "torch.randint",
            "torch.randn",
            "torch.relu",
            "torch.set_num_threads",
            "torch.softmax",
            "torch.stack",
            "torch.uint8",
            "torch.utils._python_dispatch.TorchDispatchMode",
            "torch.utils.checkpoint.checkpoint",
            "torch.utils.data.DataLoader",
            "torch.utils.data.Dataset",
            "torch.utils.data.Sampler",
            "torch.version",
            "torch.zeros",
        )
    },
}


def _torch_names(source: str) -> set[str]:
    """Dotted torch names in ``source``: imports, and the longest attribute chains on torch or an alias of it."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for item in node.names:
                if item.name.split(".")[0] == "torch":
                    aliases[item.asname or "torch"] = item.name if item.asname else "torch"
                    names.add(item.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for item in node.names:
                aliases[item.asname or item.name] = f"{node.module}.{item.name}"
                names.add(f"{node.module}.{item.name}")
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts: list[str] = []
            current: ast.expr = node
            while isinstance(current, ast.Attribute):
                parts.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id in aliases:
                names.add(".".join([aliases[current.id], *reversed(parts)]))
    return names


def test_pyproject_declares_the_floor_the_suites_enforce() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    floors = re.findall(r'"torch>=(\d+)\.(\d+)"', text)
    assert floors == [tuple(str(v) for v in TORCH_FLOOR)], floors


def test_every_torch_name_the_code_uses_exists_at_the_floor() -> None:
    used: dict[str, str] = {}
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in _torch_names(path.read_text()):
                used.setdefault(name, str(path.relative_to(ROOT)))
    unvetted = {name: where for name, where in used.items() if name not in VETTED}
    assert not unvetted, (
        f"torch names used but not vetted against the floor {TORCH_FLOOR}: {unvetted}; add each to VETTED "
        "with the release that introduced it (and raise TORCH_FLOOR and pyproject's torch>= if it is newer)"
    )
    too_new = {name: since for name, (since, _) in VETTED.items() if since > TORCH_FLOOR}
    assert not too_new, f"newer than the floor {TORCH_FLOOR}: {too_new}"
    assert all(why for since, why in VETTED.values() if since > _OLD), "a name newer than 2.0 says where that is known"


def test_the_scan_sees_aliases_imports_and_attribute_chains() -> None:
    source = (
        "import torch\nimport torch.distributed as dist\nfrom torch import nn\n"
        "x = torch.cuda.Event(enable_timing=True)\ndist.barrier()\nnn.functional.relu(x)\ny = other.torch.thing\n"
    )
    assert _torch_names(source) == {
        "torch",
        "torch.distributed",
        "torch.nn",
        "torch.cuda.Event",
        "torch.distributed.barrier",
        "torch.nn.functional.relu",
    }


@pytest.mark.parametrize(
    ("version", "release"), [("2.13.0+cpu", (2, 13)), ("2.3.1", (2, 3)), ("2.10.0a0+git1", (2, 10))]
)
def test_torch_release_reads_major_and_minor(version: str, release: tuple[int, int]) -> None:
    assert torch_release(version) == release


def test_a_version_without_major_minor_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'nightly' does not start with major\.minor"):
        torch_release("nightly")


def test_an_older_torch_gets_the_fix_and_the_floor_passes() -> None:
    assert check_torch("2.3.0") is None
    assert check_torch(str(torch.__version__)) is None
    why = check_torch("2.2.2+cu121")
    assert why is not None
    assert "need torch >= 2.3" in why and "torch 2.2.2+cu121" in why and "pytorch.org/get-started" in why


def test_pytest_suites_refuses_an_older_torch_before_importing_what_it_lacks(tmp_path: Path) -> None:
    """As on a real torch 2.2.2 (installed from PyPI and run by hand on 2026-11-23): it has no
    torch.nn.attention, and ``pytest suites/`` printed an ImportError traceback from the suites'
    conftest instead of the refusal with the fix. A fresh process, where torch claims 2.2.2 and
    ``import torch.nn.attention`` fails as it does there, gets the usage error and no traceback."""
    script = (
        "import sys, torch\n"
        "torch.__version__ = '2.2.2+cu121'\n"
        "sys.modules['torch.nn.attention'] = None  # importing it now raises ImportError, as on torch 2.2\n"
        "import pytest\n"
        f"sys.exit(pytest.main([{str(ROOT / 'suites')!r}, '-p', 'no:randomly', '-p', 'no:cacheprovider', '-q']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    out = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "ERROR: the pytest-gpuperf suites need torch >= 2.3" in done.stderr and "torch 2.2.2+cu121" in done.stderr
    assert "Error while loading conftest" not in out and "Traceback" not in out, out
