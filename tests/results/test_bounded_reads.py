"""Issue 23 item 4: a file we are given is read bounded. /dev/zero, a named pipe, a file over the size cap, a JSON
nested 100,000 deep and a file of too many records are refused at once with a one-line error naming the file;
``pytest-gpuperf runs`` lists a huge file by its size instead of reading it.

On main, ``--gpuperf-compare=/dev/zero`` read until the kernel killed it (24 GB), a named pipe waited for ever, the
deep file raised RecursionError, and a million-record baseline made every ``runs`` listing take 39 s.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_gpuperf import _jsonfile
from pytest_gpuperf.cli import main
from pytest_gpuperf.history._asv_files import AsvError, load_json
from pytest_gpuperf.measuring import Expectations
from pytest_gpuperf.measuring._expectations import ExpectationsError
from pytest_gpuperf.results import ResultsDir, ResultsError, _files, _runs, json_of, load_run
from pytest_gpuperf.results._files import load_runs
from tests.synthetic import make_record, make_run

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="named pipes and /dev/zero are POSIX")

DEEP = 100_000


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("reader", [load_runs, load_run])
def test_dev_zero_is_refused_without_reading_it(reader: object) -> None:
    with pytest.raises(ResultsError, match=r"^/dev/zero is a device, not a regular file, so it is not a results file"):
        reader(Path("/dev/zero"))  # type: ignore[operator]


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(fifo: Path) -> None:
    # Reading a FIFO with no writer blocks for ever on main; the descriptor is opened without blocking here.
    with pytest.raises(ResultsError, match=r"pipe\.json is a named pipe, not a regular file"):
        load_runs(fifo)
    assert json_of(fifo) is None, "an output path holding a pipe is not recognised as ours, and not waited on"


def test_a_file_over_the_size_cap_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as f:
        f.truncate(_jsonfile.MAX_BYTES + 1)  # sparse: no disk used, and nothing is read
    with pytest.raises(ResultsError, match=r"huge\.json is 1,024 MB, over the 1,024 MB that pytest-gpuperf reads"):
        load_runs(path)


def test_a_deeply_nested_file_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * DEEP + "]" * DEEP)
    with pytest.raises(ResultsError, match=r"deep\.json nests lists or objects deeper than a JSON reader follows"):
        load_runs(path)
    with pytest.raises(AsvError, match=r"deep\.json nests lists or objects deeper .*--gpuperf-asv"):
        load_json(path, 1)
    with pytest.raises(ExpectationsError, match=r"deep\.json: cannot read it as JSON \(nests lists"):
        Expectations.load(path)


def test_asv_and_expectations_files_are_bounded_too(fifo: Path) -> None:
    with pytest.raises(AsvError, match="is a named pipe, not a regular file"):
        load_json(fifo, 1)
    with pytest.raises(ExpectationsError, match="is a device, not a regular file"):
        Expectations.load(Path("/dev/zero"))


def test_a_file_of_too_many_records_is_refused_before_they_are_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ResultsDir(tmp_path)
    for _ in range(2):
        store.save_baseline("main", make_run(make_record(1e-3), make_record(2e-3, test="test_x.py::test_b[cpu]")))
    monkeypatch.setattr(_files, "MAX_RECORDS", 3)
    with pytest.raises(ResultsError, match=r"main\.json holds 4 records, over the 3 that pytest-gpuperf reads"):
        load_runs(store.baseline_path("main"))


def test_the_listing_does_not_read_a_huge_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ResultsDir(tmp_path / ".gpuperf")
    store.save_baseline("main", make_run(make_record(1e-3)))
    store.save_baseline("huge", make_run(*(make_record(1e-3, test=f"t.py::test_{i}") for i in range(50))))
    read: list[Path] = []

    def counting(path: Path) -> object:
        read.append(Path(path))
        return load_runs(path)

    monkeypatch.setattr(_runs, "load_runs", counting)
    monkeypatch.setattr(_runs, "LIST_READ_BYTES", store.baseline_path("main").stat().st_size + 1)
    assert main(["runs", "--results-dir", str(store.root)]) == 0
    assert read == [store.baseline_path("main")]
    huge = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("huge"))
    assert "MB, not read for a listing: pytest-gpuperf runs show huge reads it" in huge
    assert main(["runs", "show", "huge", "--results-dir", str(store.root)]) == 0  # show reads any size


def test_compare_option_refuses_dev_zero_and_a_pipe_before_measuring(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(gpuperf):\n    gpuperf.measure(lambda: None)\n")
    os.mkfifo(pytester.path / "pipe.json")
    for target, kind in (("/dev/zero", "a device"), ("pipe.json", "a named pipe")):
        result = pytester.runpytest("--gpuperf-device=cpu", f"--gpuperf-compare={target}", "-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: --gpuperf-compare={target}: *{target} is {kind}, not a regular file*"])
        assert "Traceback" not in result.stderr.str()
