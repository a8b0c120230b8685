"""The CI files in docs/ci/ parse, and every pytest-gpuperf, pytest and asv command in them exists as written."""

from __future__ import annotations

import re
import shlex
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
                out += [value] if isinstance(value, str) else [str(v) for v in value]
            else:
                out += scripts(value)
    elif isinstance(node, list):
        for item in node:
            out += scripts(item)
    return out


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


def test_the_github_workflow_gates_pull_requests_and_publishes_main() -> None:
    workflow = yaml.safe_load((CI / "github-workflow.yml").read_text(encoding="utf-8"))
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    gate, history = workflow["jobs"]["gate"], workflow["jobs"]["history"]
    assert "self-hosted" in gate["runs-on"] and "gpu" in gate["runs-on"]
    assert any("pytest-gpuperf ab" in s for s in scripts(gate))
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in gate["steps"])
    assert any(step.get("uses", "").startswith("actions/deploy-pages") for step in history["steps"])
    assert history["permissions"]["pages"] == "write"


def test_no_file_installs_torch() -> None:
    """The runner's torch is its administrator's (the build that matches the GPU's driver); pip must not replace it."""
    for name in FILES:
        for words in commands(CI / name):
            if "install" in words:
                rest = words[words.index("install") + 1 :]
                assert not [w for w in rest if re.match(r"torch\b", w)], f"{name}: {shlex.join(words)}"
