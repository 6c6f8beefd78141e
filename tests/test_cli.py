"""The command line as a user meets it: help that explains, one-line errors, exit code 2."""

from __future__ import annotations

import pytest

from loadtest.cli import _subparsers, build_parser
from tests.conftest import DATA, loadtest


def test_top_level_help_lists_commands():
    out = loadtest("--help")
    assert out.returncode == 0
    assert "run" in out.stdout and "sim" in out.stdout


@pytest.mark.parametrize("command", ["run", "sim"])
def test_every_option_has_help_text(command):
    out = loadtest(command, "--help")
    assert out.returncode == 0
    sub = _subparsers(build_parser())[command]
    for action in sub._actions:
        assert action.help and len(action.help) > 10, f"{command} {action.option_strings} has no help"
        for flag in action.option_strings:
            assert flag in out.stdout


@pytest.mark.parametrize("args, needle", [
    (["run", "--bogus"], "unrecognized arguments: --bogus"),
    (["run", "--requests", "0"], "positive integer"),
    (["run", "--scenario", "does-not-exist.toml"], "does not exist"),
    (["run", "--scenario", "no-such-builtin"], "no built-in scenario"),
    (["run", "--fleet", "missing/fleet.toml"], "does not exist"),
    (["run", "--fleet", str(DATA / "fast-sim.toml"), "--modes", "baseline,medusa"], "no mode 'medusa'"),
    (["sim"], "MODEL"),
    (["sim", "x-7B", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 0}'],
     "Expected num_speculative_tokens to be greater than zero (0)."),
    (["nonsense"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    out = loadtest(*args)
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, out.stderr
    assert needle in errors[0]
    assert "Traceback" not in out.stderr
