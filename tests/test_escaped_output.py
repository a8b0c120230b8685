"""Issue 23 item 6: nothing from a file runs in a terminal or a CI log.

A crafted results file whose test names, parameters and machine names hold ``ESC[2J`` (clear the screen), ``\\r``,
the one-byte CSI ``\\x9b`` and a newline followed by ``::error::pwned`` is compared, listed and shown; the output
holds no raw control code and no line starting ``::`` but the annotations we print on purpose. On main, each
reached the terminal raw, and ``::error::pwned`` was a line of its own, which GitHub Actions runs as a command.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from pytest_gpuperf._escape import EscapedStream, printable
from pytest_gpuperf.cli import main
from pytest_gpuperf.results import ResultsDir, save_run
from tests.synthetic import make_record, make_run, with_fingerprint

EVIL = "\x1b[2J\r\x9b31m\n::error::pwned"
NAME = f"test_x.py::test_evil[{EVIL}]"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # every control code but tab and newline
FINGERPRINT = with_fingerprint(hostname=f"box{EVIL}", cpu_model=f"cpu{EVIL}")


def _crafted(path: Path, median: float) -> Path:
    record = make_record(median, test=NAME, params={"size": EVIL})
    save_run(path, make_run(record, make_record(median, test="test_x.py::test_plain[cpu]"), fingerprint=FINGERPRINT))
    return path


def _assert_safe(text: str, ours: tuple[str, ...] = ()) -> None:
    assert not RAW.search(text), f"raw control code in {text!r}"
    for line in text.splitlines():
        if line.lstrip().startswith("::"):
            assert line.startswith(ours), f"a line a CI log runs as a command: {line!r}"
            assert "::error::pwned" not in line.split("::", 2)[-1].partition("::")[0]  # not a command of its own


def test_printable_escapes_control_codes_and_a_leading_double_colon() -> None:
    assert printable(EVIL) == "\\x1b[2J\\r\\x9b31m\\n::error::pwned"
    assert printable("::error::pwned") == "\\x3a:error::pwned"
    assert printable("  ::warning x") == "  \\x3a:warning x"
    lines = io.StringIO()
    EscapedStream(lines).write("a\n::set-output\n\x1b")
    assert lines.getvalue() == "a\n\\x3a:set-output\n\\x1b"
    assert printable(printable(EVIL)) == printable(EVIL)  # escaping twice changes nothing more


def test_the_stream_of_the_command_line_knows_where_a_line_begins() -> None:
    class Sink:
        text = ""

        def write(self, text: str) -> None:
            self.text += text

    sink = Sink()
    stream = EscapedStream(sink)  # type: ignore[arg-type]
    for part in ("a::b", "\n", "::error::x", "\n", "  ", "::warning\x1b", "\n"):
        stream.write(part)
    assert sink.text == "a::b\n\\x3a:error::x\n  \\x3a:warning\\x1b\n"


def test_compare_on_github_prints_no_control_code_and_no_command_but_its_annotations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    base, head = _crafted(tmp_path / "base.json", 10e-3), _crafted(tmp_path / "head.json", 20e-3)
    assert main(["compare", str(base), str(head)]) == 1
    out, err = capsys.readouterr()
    annotations = [line for line in out.splitlines() if line.startswith("::")]
    assert annotations and all(line.startswith(("::error file=", "::warning file=")) for line in annotations)
    assert any("test_evil[\\x1b[2J\\r\\x9b31m\\n::error::pwned]" in line for line in annotations)
    _assert_safe(out, ("::error file=", "::warning file="))
    _assert_safe(err)
    assert "test_evil[\\x1b[2J\\r\\x9b31m\\n::error::pwned]" in out  # shown, escaped, not dropped


def test_runs_listing_and_show_print_no_control_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ResultsDir(tmp_path / ".gpuperf")
    store.make(store.runs_dir)
    _crafted(store.runs_dir / "20261120T010000.000000Z-aaaaaaaa.json", 10e-3)
    evil_file = store.runs_dir / f"20261121T010000.000000Z-x{EVIL.replace('/', '')}.json"  # a crafted file name
    _crafted(evil_file, 10e-3)
    assert main(["runs", "--results-dir", str(store.root)]) == 0
    assert main(["runs", "show", "20261120T010000.000000Z-aaaaaaaa", "--results-dir", str(store.root)]) == 0
    out, err = capsys.readouterr()
    _assert_safe(out + err)
    assert "test_evil" in out


def test_an_error_naming_a_crafted_record_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(_crafted(tmp_path / "ok.json", 1e-3).read_text().replace('"iterations":1,', '"iterations":0,'))
    assert main(["compare", str(path), str(path)]) == 2
    err = capsys.readouterr().err
    _assert_safe(err)
    assert "record 1 (test_x.py::test_evil[\\x1b[2J" in err


def test_the_session_gate_prints_no_control_code(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain(gpuperf):\n    gpuperf.measure(lambda: None)\n")
    crafted = _crafted(pytester.path / "crafted.json", 10e-3)
    result = pytester.runpytest(
        "--gpuperf-device=cpu",
        "--gpuperf-min-time=0.01",
        "--gpuperf-max-time=0.05",
        "--gpuperf-warmup-time=0.01",
        "--gpuperf-memory=off",
        "--gpuperf-confirm=0",
        "--gpuperf-quiet-wait=0",  # auto: up to 10 s of waiting for a quiet machine when comparing
        "--gpuperf-allow-mismatch=all",
        f"--gpuperf-compare={crafted}",
        "-p",
        "no:cacheprovider",
    )
    text = result.stdout.str() + result.stderr.str()
    assert "test_evil" in text  # a missing row of the gate
    _assert_safe(text)


def test_a_note_prints_no_control_code_and_no_command(pytester: pytest.Pytester) -> None:
    """Issue 36 item 4: the "gpuperf notes" section printed ``gpuperf.note(text)`` raw, and a note
    ``"x\\n::error title=injected::pwn"`` was a line of its own, which GitHub Actions runs as a command."""
    pytester.makepyfile(
        "def test_noted(gpuperf):\n"
        "    gpuperf.measure(lambda: None)\n"
        "    gpuperf.note('x\\x1b[2J\\r\\x00\\x07\\x9b31m\\n::error title=injected::pwn')\n"
    )
    result = pytester.runpytest(
        "--gpuperf-device=cpu",
        "--gpuperf-min-time=0.005",
        "--gpuperf-max-time=0.05",
        "--gpuperf-warmup-time=0.01",
        "--gpuperf-memory=off",
        "--gpuperf-quiet-wait=0",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.OK
    text = result.stdout.str() + result.stderr.str()
    _assert_safe(text)
    result.stdout.fnmatch_lines(
        ["*- gpuperf notes -*", "test_a_note_prints_*.py::test_noted*: x\\x1b[[]2J\\r\\x00\\x07\\x9b31m\\n::error *"]
    )
