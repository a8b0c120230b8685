"""The CI files in docs/ci/ parse, and every pytest-gpuperf, pytest and asv command in them exists as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_gpuperf.cli import parser
from pytest_gpuperf.plugin._options import OPTIONS

CI = Path(__file__).resolve().parent.parent / "docs" / "ci"
FILES = ("github-workflow.yml", "gitlab-ci.yml")
SCRIPT_KEYS = frozenset({"run", "script", "before_script", "after_script"})


def scripts(node: Any) -> list[str]:
    """Every shell script in a workflow: GitHub's ``run:`` and GitLab's ``script:`` lists, at any depth."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SCRIPT_KEYS:
                out += [value] if isinstance(value, str) else [str(v) for v in _flat(value)]
            else:
                out += scripts(value)
    elif isinstance(node, list):
        for item in node:
            out += scripts(item)
    return out


def _flat(items: list[Any]) -> list[Any]:
    """GitLab flattens nested script lists (a YAML anchor's list inside ``before_script``)."""
    return [leaf for item in items for leaf in (_flat(item) if isinstance(item, list) else [item])]


def commands(path: Path) -> list[list[str]]:
    """The shell commands of a file's scripts, split into words; ``${{ ... }}`` expressions become ``X``."""
    out = []
    for script in scripts(yaml.safe_load(path.read_text(encoding="utf-8"))):
        for line in script.replace("\\\n", " ").splitlines():
            line = re.sub(r"\$\{\{[^}]*\}\}", "X", line).split(" || ")[0].strip()
            if line and not line.startswith("#"):
                out.append(shlex.split(line, comments=True))
    return out


def of(path: Path, program: str) -> list[list[str]]:
    return [words for words in commands(path) if words and words[0] == program]


@pytest.mark.parametrize("name", FILES)
def test_every_pytest_gpuperf_command_parses(name: str) -> None:
    found = of(CI / name, "pytest-gpuperf")
    assert {words[1] for words in found} >= {"ab", "export", "history"}
    for words in found:
        try:
            parser().parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"{name}: `{shlex.join(words)}` is not a valid pytest-gpuperf command")


@pytest.mark.parametrize("name", FILES)
def test_every_gpuperf_option_of_pytest_exists(name: str) -> None:
    flags = {spec.flag for spec in OPTIONS}
    found = of(CI / name, "pytest")
    assert found
    used = [word.split("=", 1)[0] for words in found for word in words if word.startswith("--gpuperf-")]
    assert "--gpuperf-asv" in used and "--gpuperf-json" in used
    assert [flag for flag in used if flag not in flags] == []


@pytest.mark.parametrize("name", FILES)
def test_every_asv_command_parses(name: str) -> None:
    from asv.commands import make_argparser

    for words in of(CI / name, "asv"):
        try:
            make_argparser()[0].parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"{name}: `{shlex.join(words)}` is not a valid asv command")


def _github() -> dict[Any, Any]:
    workflow: dict[Any, Any] = yaml.safe_load((CI / "github-workflow.yml").read_text(encoding="utf-8"))
    return workflow


def _gitlab() -> dict[str, Any]:
    pipeline: dict[str, Any] = yaml.safe_load((CI / "gitlab-ci.yml").read_text(encoding="utf-8"))
    return pipeline


def test_the_github_workflow_gates_pull_requests_and_publishes_main() -> None:
    workflow = _github()
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    gate, history, deploy = (workflow["jobs"][name] for name in ("gate", "history", "deploy"))
    assert "self-hosted" in gate["runs-on"] and "gpu-pr" in gate["runs-on"]
    assert any("pytest-gpuperf ab" in s for s in scripts(gate))
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in gate["steps"])
    assert any(step.get("uses", "").startswith("actions/upload-pages-artifact") for step in history["steps"])
    assert any(step.get("uses", "").startswith("actions/deploy-pages") for step in deploy["steps"])
    assert deploy["needs"] == "history" and deploy["permissions"]["pages"] == "write"


# ---------------------------------------------------------------- untrusted code on a self-hosted runner (issue 23)

#: Triggers that run with the base repository's token and secrets, on code a pull request may control.
PRIVILEGED_TRIGGERS = frozenset({"pull_request_target", "workflow_run"})
#: Labels every self-hosted runner has: they say nothing about which runner a job gets.
COMMON_LABELS = frozenset({"self-hosted", "linux", "x64"})


def _text(node: Any) -> str:
    return str(yaml.safe_dump(node))


def test_no_github_job_runs_with_credentials_on_pull_request_code() -> None:
    workflow = _github()
    assert PRIVILEGED_TRIGGERS.isdisjoint(workflow[True])
    assert workflow["permissions"] == {}  # nothing by default; each job asks for its own
    jobs = workflow["jobs"]
    for name, job in jobs.items():
        assert "permissions" in job, name
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False, name
    writers = {name for name, job in jobs.items() if set(job["permissions"].values()) - {"read"}}
    assert writers == {"deploy"}
    deploy = jobs["deploy"]
    assert deploy["runs-on"] == "ubuntu-latest" and deploy["environment"]["name"] == "github-pages"
    assert [step["uses"].split("@")[0] for step in deploy["steps"]] == ["actions/deploy-pages"]  # no repo code


def test_the_github_publishing_jobs_never_run_on_a_pull_request() -> None:
    jobs = _github()["jobs"]
    assert jobs["gate"]["if"] == "github.event_name == 'pull_request'"
    assert jobs["history"]["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert jobs["deploy"]["needs"] == "history" and "if" not in jobs["deploy"]


def test_the_github_nightly_job_records_against_the_anchor_and_hunts_those_series() -> None:
    workflow = _github()
    assert workflow[True]["schedule"] and "gpu-trusted" in workflow["jobs"]["regressions"]["runs-on"]
    job = workflow["jobs"]["regressions"]
    assert job["if"] == "github.event_name == 'schedule'"
    assert job["concurrency"]["group"] == workflow["jobs"]["history"]["concurrency"]["group"]
    checkout = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # the bisection checks out commits between recorded ones
    found = [words for words in _job_commands(job) if words[:1] == ["pytest-gpuperf"]]
    record, hunt = (parser().parse_args(words[1:]) for words in found)
    assert (record.history_command, record.anchor, record.no_publish) == ("record", "$ANCHOR", True)
    assert (hunt.history_command, hunt.benchmarks, hunt.since) == ("regressions", ["ab_vs_"], "$SINCE")
    assert record.out == hunt.out and record.machine == hunt.machine


def test_the_github_pull_request_job_shares_no_runner_environment_or_folder_with_publishing() -> None:
    jobs = _github()["jobs"]
    gate, history = jobs["gate"], jobs["history"]
    assert set(gate["runs-on"]) & set(history["runs-on"]) <= COMMON_LABELS
    text = _text(gate)
    assert "GPUPERF_HOME" not in text and "/srv/" not in text and "secrets." not in text
    assert "environment" not in gate
    for job in (gate, history):
        installs = [words for words in _job_commands(job) if "install" in words]
        assert installs and all(words[0] == "$JOB_DIR/venv/bin/python" for words in installs)
        assert any('rm -rf "$RUNNER_TEMP/gpuperf"' in s for s in scripts(job))  # removed after the job
    for script in scripts(gate):  # values from the event reach scripts through env, never pasted in
        assert "${{" not in script, script


def test_the_gitlab_merge_request_job_shares_no_runner_environment_or_folder_with_pages() -> None:
    pipeline = _gitlab()
    gate, pages = pipeline["gate"], pipeline["pages"]
    assert [rule["if"] for rule in gate["rules"]] == ['$CI_PIPELINE_SOURCE == "merge_request_event"']
    assert [rule["if"] for rule in pages["rules"]] == [
        '$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH'
    ]
    assert set(gate["tags"]).isdisjoint(pages["tags"]) and pages["tags"] == ["gpu-protected"]
    assert "default" not in pipeline  # nothing shared by default
    assert "GPUPERF_HOME" not in _text(gate) and "GPUPERF_HOME" not in _text(pipeline["variables"])
    for job in (gate, pages):
        installs = [words for words in _job_commands(job) if "install" in words]
        assert installs and all(words[:3] == ["python", "-m", "pip"] for words in installs)
        before = [s for s in scripts({"before_script": job["before_script"]})]
        assert 'export PATH="$JOB_DIR/venv/bin:$PATH"' in before
        assert before.index('export PATH="$JOB_DIR/venv/bin:$PATH"') < before.index(
            next(s for s in before if "pip install" in s)
        )
        assert 'rm -rf "$JOB_DIR"' in scripts({"after_script": job["after_script"]})


def _job_commands(job: Any) -> list[list[str]]:
    out = []
    for script in scripts(job):
        for line in script.splitlines():
            if line.strip() and not line.strip().startswith("#"):
                out.append(shlex.split(line, comments=True))
    return out


@pytest.mark.e2e  # makes a virtual environment with pip in it
def test_the_venv_a_job_makes_sees_the_runners_torch(tmp_path: Path) -> None:
    """The GitLab jobs' own-venv lines (GitHub's are the same), run with this interpreter as the runner's."""
    lines = [line for line in _gitlab()[".own-venv"] if "cuda" not in line]
    lines.append('python -c "import sys, torch; print(sys.prefix)"')
    env = {**os.environ, "GPUPERF_TORCH_PYTHON": sys.executable, "JOB_DIR": str(tmp_path / "job")}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(["bash", "-ec", "\n".join(lines)], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "job" / "venv")


def test_no_file_installs_torch() -> None:
    """The runner's torch is its administrator's (the build that matches the GPU's driver); pip must not replace it."""
    for name in FILES:
        for words in commands(CI / name):
            if "install" in words:
                rest = words[words.index("install") + 1 :]
                assert not [w for w in rest if re.match(r"torch\b", w)], f"{name}: {shlex.join(words)}"


# ---------------------------------------------------------------- what the templates run is pinned (issue 36)

#: A requirement on this package in a file's text, with what follows its extras (the version specifier).
REQUIREMENT = re.compile(r"pytest-gpuperf\[[\w,]+\]([^\s\"'`]*)")
#: An action pinned to a commit, its release in a trailing comment (GitHub's hardening guide: a tag can be moved).
PINNED_USES = re.compile(r"uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def _installs(job: Any) -> list[list[str]]:
    """What each `pip install` of a job installs: the words after `install`."""
    return [
        words[words.index("install") + 1 :] for words in _job_commands(job) if words[1:4] == ["-m", "pip", "install"]
    ]


#: The templates and the page that says how to lock what their trusted jobs install.
PINNED_FILES = [CI / name for name in FILES] + [CI.parent / "ci.md"]


@pytest.mark.parametrize("path", PINNED_FILES, ids=lambda p: p.name)
def test_every_requirement_on_pytest_gpuperf_names_this_version(path: Path) -> None:
    from pytest_gpuperf import __version__

    pins = REQUIREMENT.findall(path.read_text(encoding="utf-8"))  # install lines, and the one to lock
    assert pins and all(pin == f"=={__version__}" for pin in pins), pins


@pytest.mark.parametrize("name", FILES)
def test_every_install_is_pinned_to_this_version_or_hashed(name: str) -> None:
    from pytest_gpuperf import __version__

    installs = _installs(yaml.safe_load((CI / name).read_text(encoding="utf-8")))
    assert installs
    for words in installs:
        hashed = "--require-hashes" in words and "-r" in words
        assert hashed or [w for w in words if not w.startswith("-")] == [f"pytest-gpuperf[nvml]=={__version__}"], words


def test_the_jobs_that_hold_the_history_install_only_hashed_files() -> None:
    jobs = _github()["jobs"]
    for job in (jobs["history"], jobs["regressions"], _gitlab()["pages"]):
        installs = _installs(job)
        assert installs and all("--require-hashes" in words for words in installs), installs


@pytest.mark.parametrize("path", PINNED_FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit(path: Path) -> None:
    lines = [line.strip().removeprefix("- ") for line in path.read_text(encoding="utf-8").splitlines()]
    uses = [line for line in lines if line.startswith("uses:")]
    assert uses or path.name == "gitlab-ci.yml"
    assert [line for line in uses if not PINNED_USES.match(line)] == []


def test_no_gitlab_job_measures_in_after_script() -> None:
    """GitLab cuts `after_script` short (5 minutes by default) and ignores its failures: results could go missing."""
    pipeline = _gitlab()
    jobs = {name: job for name, job in pipeline.items() if isinstance(job, dict) and "script" in job}
    assert set(jobs) == {"gate", "pages"}
    for name, job in jobs.items():
        after = _job_commands({"after_script": job.get("after_script", [])})
        assert all(words[:2] == ["rm", "-rf"] for words in after), (name, after)
    gate = pipeline["gate"]
    script = _job_commands({"script": gate["script"]})
    assert [words[:2] for words in script if words[0] in {"pytest", "pytest-gpuperf"}] == [
        ["pytest-gpuperf", "ab"],
        ["pytest", "suites/"],
        ["pytest-gpuperf", "export"],
        ["pytest-gpuperf", "export"],
        ["pytest-gpuperf", "export"],
    ]
    assert script[-1][0] == "exit"  # the gate's verdict, after the measuring
    assert gate["artifacts"]["when"] == "always"
