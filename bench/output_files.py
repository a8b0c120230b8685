"""Issue 23, items 1 and 5: what each output path does to a file that is not ours, and what a signal does to the save.

    python bench/output_files.py [--code DIR] [--scratch DIR]

Builds a scratch project (a measuring test, ``pytest.ini``, a saved baseline, a results file) and runs, each in a
fresh process on the code in ``--code`` (put first on PYTHONPATH; default: this checkout), every case of the issue:
``report -o`` and ``export -o`` (each format) and ``--gpuperf-html`` onto a file that is not theirs, another
program's ``.x.<pid>.y.tmp`` beside an output, SIGTERM / SIGINT / two SIGTERMs inside the end-of-session save of
``--gpuperf-save``, and a SIGKILL inside the ``--gpuperf-json`` write followed by a read of that file. Each line says
the exit status and what happened to the files. To see main's behaviour, extract main's package and pass it:
``git archive main pytest_gpuperf | tar -x -C /tmp/main && python bench/output_files.py --code /tmp/main``.

The save is slowed where a signal cannot miss it: the project's conftest makes each ``os.fsync`` note the file it
syncs and sleep, and the signal is sent once the save has reached its first fsync.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
FAST = [
    "--gpuperf-device=cpu",
    "--gpuperf-min-time=0.005",
    "--gpuperf-max-time=0.05",
    "--gpuperf-warmup-time=0.01",
    "--gpuperf-quiet-wait=0",
    "-p",
    "no:randomly",
    "-q",
]
SLOW_FSYNC = """\
import os
import time

FLAG = os.environ.get("SLOW_FLAG")
if FLAG:
    _fsync = os.fsync

    def slow_fsync(fd):
        with open(FLAG, "a") as flag:
            flag.write(os.readlink(f"/proc/self/fd/{fd}") + "\\n")
        time.sleep(float(os.environ["SLOW_SECONDS"]))
        _fsync(fd)

    os.fsync = slow_fsync
"""


class Project:
    """The scratch project and the code under test."""

    def __init__(self, root: Path, code: Path) -> None:
        self.root, self.env = root, dict(os.environ, PYTHONPATH=str(code))
        self.env.pop("PYTEST_ADDOPTS", None)
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        (root / "test_m.py").write_text("def test_m(gpuperf):\n    gpuperf.measure(lambda: None)\n")
        (root / "conftest.py").write_text(SLOW_FSYNC)
        (root / "pytest.ini").write_text("[pytest]\n")
        self.baseline = root / ".gpuperf" / "baselines" / "base.json"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=self.root, env=self.env, capture_output=True, text=True, check=False)

    def pytest(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(PY, "-m", "pytest", *FAST, *args)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(PY, "-m", "pytest_gpuperf", *args)

    def slowed(self, seconds: float, *args: str) -> tuple[subprocess.Popen[str], Path]:
        flag = self.root / "writing"
        flag.unlink(missing_ok=True)
        env = dict(self.env, SLOW_FLAG=str(flag), SLOW_SECONDS=str(seconds))
        proc = subprocess.Popen(
            [PY, "-m", "pytest", *FAST, *args],
            cwd=self.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # SIGINT as a terminal sends it: started from a shell's background job (`cmd &`), SIGINT is inherited
            # ignored, and the session would ignore the signal this script sends
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        return proc, flag


def wait_for(flag: Path, holding: str = "") -> None:
    deadline = time.monotonic() + 600
    while not (flag.exists() and holding in flag.read_text()):
        if time.monotonic() > deadline:
            raise SystemExit("the session never reached its save")
        time.sleep(0.02)


def onto(project: Project, name: str, target: Path, done: subprocess.CompletedProcess[str], before: bytes) -> None:
    changed = target.read_bytes() != before
    last = ((done.stderr or done.stdout).strip().splitlines() or [""])[-1]
    print(f"{name}: exit {done.returncode}, {target.name} {'REPLACED' if changed else 'unchanged'}; {last[:100]}")
    target.write_bytes(before)


def not_ours(project: Project) -> None:
    root = project.root
    cases: list[tuple[str, Path, tuple[str, ...]]] = []
    cases.append(("report -o pytest.ini", root / "pytest.ini", ("report", "run.json", "-o", "pytest.ini")))
    cases.append(("report -o the baseline", project.baseline, ("report", "run.json", "-o", str(project.baseline))))
    for fmt in ("pytest-benchmark", "github-action-benchmark", "bencher"):
        export = ("export", "run.json", "--format", fmt, "-o", "test_m.py")
        cases.append((f"export --format {fmt} -o test_m.py", root / "test_m.py", export))
    for name, target, argv in cases:
        before = target.read_bytes()
        onto(project, name, target, project.cli(*argv), before)
    before = (root / "pytest.ini").read_bytes()
    onto(project, "--gpuperf-html=pytest.ini", root / "pytest.ini", project.pytest("--gpuperf-html=pytest.ini"), before)


def foreign_temporary(project: Project) -> None:
    dead = subprocess.Popen([PY, "-c", "pass"])
    dead.wait()
    foreign = project.root / f".x.{dead.pid}.y.tmp"
    foreign.write_text("another program's work in progress")
    project.cli("report", "run.json", "-o", "page.html")
    print(f"another program's .x.<dead pid>.y.tmp, after report -o: {'kept' if foreign.exists() else 'REMOVED'}")
    foreign.unlink(missing_ok=True)


def signals_in_the_save(project: Project, signals: list[signal.Signals], seconds: float) -> None:
    before = project.baseline.read_bytes()
    runs = len(json.loads(before)["runs"])
    proc, flag = project.slowed(seconds, "--gpuperf-save=base")
    wait_for(flag)
    for i, signum in enumerate(signals):
        if i:
            time.sleep(0.3)
        proc.send_signal(signum)
    out = proc.communicate()[0]
    after = len(json.loads(project.baseline.read_text())["runs"])
    same = " (byte-identical)" if project.baseline.read_bytes() == before else ""
    litter = [p.name for p in project.root.rglob("*") if p.name.endswith((".tmp", ".lock"))]
    print(
        f"{'+'.join(s.name for s in signals)} inside the save: exit {proc.returncode}, "
        f"traceback {'yes' if 'Traceback' in out else 'no'}, baseline runs {runs} -> {after}{same}, litter {litter}"
    )


def killed_json_write(project: Project) -> None:
    assert project.pytest("--gpuperf-json=out.json").returncode == 0
    proc, flag = project.slowed(60.0, "--gpuperf-json=out.json")
    wait_for(flag, ".out.json.")
    proc.kill()
    proc.communicate()
    left = [p for p in project.root.iterdir() if p.name.startswith(".out.json.")]
    project.cli("export", "out.json", "--format", "bencher")
    still = [p for p in left if p.exists()]
    print(
        f"SIGKILL inside the --gpuperf-json write: {len(left)} temporary left; after a read of out.json: {len(still)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1], help="the package's root")
    parser.add_argument("--scratch", type=Path, default=None, help="where to build the project (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Project(args.scratch or Path(tmp) / "project", args.code.resolve())
        assert project.pytest("--gpuperf-save=base").returncode == 0
        assert project.pytest("--gpuperf-json=run.json").returncode == 0
        not_ours(project)
        foreign_temporary(project)
        signals_in_the_save(project, [signal.SIGTERM], 1.0)
        signals_in_the_save(project, [signal.SIGINT], 1.0)
        signals_in_the_save(project, [signal.SIGTERM, signal.SIGTERM], 3.0)
        killed_json_write(project)


if __name__ == "__main__":
    main()
