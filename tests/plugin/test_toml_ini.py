"""pytest 9's native ``[tool.pytest]`` TOML table: ini values come with their TOML types, unquoted numbers included."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.skipif(pytest.version_tuple < (9,), reason="native [tool.pytest] TOML config is pytest 9's")

_TEST = """
def test_settings(gpuperf):
    s = gpuperf.settings
    print("SETTINGS", s.measure.max_time, s.measure.min_samples, s.measure.target, s.rounds, s.tolerance, s.confirm)
    print("MEMORY", s.measure.memory, "THREADS", s.measure.threads)
    gpuperf.measure(lambda: None, items=1)
"""


def test_unquoted_numbers_and_booleans_in_tool_pytest(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(
        """
        [tool.pytest]
        gpuperf_device = "cpu"
        gpuperf_max_time = 0.5
        gpuperf_warmup_time = 0.05
        gpuperf_min_samples = 5
        gpuperf_target = 0.05
        gpuperf_rounds = 2
        gpuperf_tolerance = 0.1
        gpuperf_confirm = 0
        gpuperf_memory = false
        gpuperf_threads = 1
        """
    )
    pytester.makepyfile(test_toml=_TEST)
    result = pytester.runpytest("-s", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*SETTINGS 0.5 5 0.05 2 0.1 0*", "*MEMORY False THREADS 1*"])


def test_a_bad_toml_value_names_the_key_and_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.pytest]\ngpuperf_max_time = -1\n")
    pytester.makepyfile(test_toml=_TEST)
    result = pytester.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*gpuperf_max_time = -1*positive time*"])
    assert "Traceback" not in result.stderr.str()
