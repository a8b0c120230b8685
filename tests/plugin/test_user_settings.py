"""``pytest_gpuperf.user_settings``: a conftest's own defaults go below what the user chose, as the suites' do."""

from __future__ import annotations

import pytest

from pytest_gpuperf.plugin._options import chosen

_CONFTEST = """
import pytest

from pytest_gpuperf import user_settings

DEFAULTS = {"max_time": "0.2", "min_samples": "7", "threads": "1"}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    given = user_settings(config)
    print("CHOSEN", ",".join(sorted(given)))
    defaults = {key: value for key, value in DEFAULTS.items() if key not in given}
    for item in items:
        item.add_marker(pytest.mark.gpuperf(**defaults), append=True)
"""

_TEST = """
import pytest


def test_defaults(gpuperf):
    s = gpuperf.settings.measure
    print("SETTINGS", s.max_time, s.min_samples, s.threads, s.per_call)


@pytest.mark.gpuperf(threads=2)
def test_own_marker(gpuperf):
    print("OWN", gpuperf.settings.measure.threads)
"""


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        ((), "", ["CHOSEN device", "*SETTINGS 0.2 7 1 False*"]),
        (
            ("--gpuperf-max-time=0.3", "--gpuperf-per-call"),
            "gpuperf_min_samples = 5\n",
            ["CHOSEN device,max_time,min_samples,per_call", "*SETTINGS 0.3 5 1 True*"],
        ),
    ],
    ids=["nothing chosen", "command line and ini"],
)
def test_a_conftests_defaults_apply_where_the_user_chose_nothing(
    pytester: pytest.Pytester, args: tuple[str, ...], ini: str, expected: list[str]
) -> None:
    pytester.makeini(f"[pytest]\ngpuperf_device = cpu\n{ini}")
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(test_defaults=_TEST)
    result = pytester.runpytest("-s", "-p", "no:randomly", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([*expected, "*OWN 2*"])


def test_chosen_means_given_on_the_command_line_or_written_in_ini() -> None:
    assert chosen({"max_time": None, "replace": None}, {"max_time": None, "target": "", "size": []}) == frozenset()
    assert chosen({"max_time": "1", "replace": True}, {"target": "2%", "missing": "x"}) == {
        "max_time",
        "replace",
        "target",
    }


def test_an_option_not_given_keeps_its_default_parsed() -> None:
    """``Settings.resolve`` parses only what is given (a session that gives nothing loads no parser it does not
    need, bench/startup.py): each option's default, as its help states it, parses to the field's default."""
    from pytest_gpuperf.plugin._options import OPTIONS
    from pytest_gpuperf.plugin._settings import PARSERS, Settings

    defaults = Settings()
    assert sorted(PARSERS) == sorted(spec.field for spec in OPTIONS)  # every option parsed, and nothing else
    for spec in OPTIONS:
        assert PARSERS[spec.field](spec.default) == defaults.value(spec.field), spec.flag
    assert Settings.resolve({}, {}) == defaults
    given = Settings.resolve({"device": "cpu", "max_time": "0.5"}, {"tolerance": "3%", "json": ""})
    assert given.device == ("cpu",) and given.measure.max_time == 0.5 and given.tolerance == 0.03
    assert given.json is None and given.measure.min_samples == defaults.measure.min_samples


def test_the_fail_on_help_names_every_verdict_and_work_name_of_the_gate() -> None:
    """The help is written out (so that every start need not load the gate): it names each of the gate's names, in
    the gate's order, and its default is the gate's."""
    from pytest_gpuperf.gate import DEFAULT_FAIL_ON, MORE_WORK, VERDICTS, WORK_NAMES
    from pytest_gpuperf.plugin._options import BY_FIELD

    spec = BY_FIELD["fail_on"]
    assert spec.default == ",".join(DEFAULT_FAIL_ON) and spec.help.endswith(f"(default: {spec.default})")
    assert f"verdicts: {', '.join(VERDICTS)} (" in spec.help
    assert f"went up: {', '.join(WORK_NAMES)}, or {MORE_WORK}: any of them" in spec.help
