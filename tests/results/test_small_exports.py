"""Issue 24 item 6, the small things users hit in the exports: a benchmark named twice, pytest-benchmark's
``params``, float noise, and pytest-benchmark's machine info, checked with the real pytest-benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpuperf.results import ResultsError
from pytest_gpuperf.results._export import export
from tests.synthetic import make_record, make_run


@pytest.mark.parametrize("fmt", ["pytest-benchmark", "github-action-benchmark", "bencher"])
def test_a_run_naming_a_benchmark_twice_is_refused_by_every_exporter(fmt: str) -> None:
    """On main, github-action-benchmark's list named it twice and Bencher's kept the second silently."""
    run = make_run(make_record(2e-3), make_record(3e-3))
    with pytest.raises(ResultsError, match=r"holds test_x.py::test_step\[cpu\] more than once"):
        export(run, fmt)
