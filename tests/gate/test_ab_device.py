"""``ab --device``: ab measures on one device, and a bad value is told only what ab takes.

Issue 23 item 10: ``ab --device gpu`` answered "use cpu, cuda, cuda:N, mps, auto, all or a comma list such as
cpu,cuda", and ab then refused the comma list it had suggested.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_gpuperf.cli import main
from pytest_gpuperf.measuring import DeviceError, open_device

ONE = "use one device: cpu, cuda, cuda:N, mps or auto"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gpu", f"'gpu' is not a device (for an NVIDIA GPU write cuda or cuda:N); {ONE}"),
        ("", f"'' is empty; {ONE}"),
        ("tpu", f"'tpu' is not a device; {ONE}"),
    ],
)
def test_open_device_suggests_one_device(text: str, fragment: str) -> None:
    with pytest.raises(DeviceError) as info:
        open_device(text)
    assert str(info.value) == fragment
    assert "comma" not in str(info.value) and "all" not in str(info.value)


def test_ab_device_gpu_suggests_only_what_ab_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for args in (
        ["init", "-q", "-b", "main"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one"],
    ):
        subprocess.run(["git", *args], check=True)
    assert main(["ab", "--base", "main", "--device", "gpu"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --device gpu: 'gpu' is not a device (for an NVIDIA GPU write cuda or cuda:N); {ONE}\n"
