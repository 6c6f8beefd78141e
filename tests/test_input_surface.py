"""Every value-taking flag of the replaying commands, given values of every awkward kind (huge,
tiny, negative, zero, NaN, infinite, empty, not a number, unicode, a path that leaves the folder),
against servers that are not there, and every field of the default scenario and fleet files with
values of the same kinds: each case must end with an exit code of the contract (0-3), no
traceback, and, for bad input, one to three lines on stderr. Every case, not a sample; in
process."""

from __future__ import annotations

import argparse
import copy
import json
import math
import tomllib

import pytest

from loadtest.commands.arguments import build_parser, subparsers
from tests.conftest import ROOT, cli

COMMANDS = ("run", "sweep", "capacity", "soak", "ui")
DEAD = ("--endpoints", "baseline=http://127.0.0.1:9")   # nothing listens: every case ends before a replay
SKIP = {"--endpoints", "--fleet", "--address", "--out", "--metrics-port", "--metrics-host"}   # where it goes
AWKWARD = ["0", "-1", "1e-9", "99999999999999", "1e308", "nan", "inf", "-inf", "", "x", "é", "../..", "1,2,,3",
           "0.5", "3", "-0", "٣", "1" * 400]


def _flags(command: str) -> list[str]:
    sub = subparsers(build_parser())[command]
    return [a.option_strings[-1] for a in sub._actions
            if a.option_strings and a.nargs != 0 and not isinstance(a, argparse._HelpAction)
            and a.help != argparse.SUPPRESS and a.option_strings[-1] not in SKIP]


CASES = [(c, f) for c in COMMANDS for f in _flags(c)]


@pytest.mark.parametrize("command", COMMANDS)
def test_the_surface_is_every_value_taking_flag(command):
    assert len(_flags(command)) >= 8


@pytest.mark.parametrize("command", COMMANDS)
def test_any_value_of_any_flag_ends_in_the_contract(tmp_path, command):
    """Every value-taking flag of `command` with every awkward value: all of them, not a sample."""
    for flag in _flags(command):
        for value in AWKWARD:
            ran = cli(command, flag, value, *DEAD, "--out", str(tmp_path), timeout=60)
            said = ran.stdout + ran.stderr
            assert ran.returncode in (0, 1, 2, 3), (command, flag, value, said[-2000:])
            assert "Traceback" not in said, (command, flag, value, said[-2000:])
            if ran.returncode == 2:
                lines = [line for line in ran.stderr.splitlines() if line.strip()]
                assert 1 <= len(lines) <= 3, (command, flag, value, ran.stderr)


def _toml(value) -> str:
    """A value as TOML (inline tables and arrays; TOML's own nan and inf)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"


def _leaves(data, path=()) -> list[tuple]:
    if isinstance(data, dict):
        return [leaf for k, v in data.items() for leaf in _leaves(v, (*path, k))]
    if isinstance(data, list):
        return [leaf for i, v in enumerate(data) for leaf in _leaves(v, (*path, i))]
    return [path]


def _with(data, path, value):
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


SCENARIO = tomllib.loads((ROOT / "scenarios" / "builtin" / "saas-mix.toml").read_text())
FLEET = tomllib.loads((ROOT / "cluster" / "fleets" / "local-sim.toml").read_text())
VALUES = [0, -1, 10**20, 2**63, 1e308, -1e-300, math.nan, math.inf, -math.inf, "", "x", "é" * 300, True, [], {}]


def _file_case(folder, data: dict, leaf: tuple, value, *argv: str) -> None:
    """`data` with `leaf` set to `value`, written as folder/f.toml, given to `loadtest ARGV` (its
    `{file}` replaced by the file): it ends 0, or 2 in one to three lines, never a traceback."""
    path = folder / "f.toml"
    path.write_text("\n".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in _with(data, leaf, value).items()))
    ran = cli(*(a.format(file=path, folder=folder) for a in argv), timeout=60)
    assert ran.returncode in (0, 2) and "Traceback" not in ran.stdout + ran.stderr, (leaf, value, ran.stderr)
    if ran.returncode == 2:
        assert 1 <= len(ran.stderr.strip().splitlines()) <= 3, (leaf, value, ran.stderr)


@pytest.mark.parametrize("section", sorted(SCENARIO))
def test_any_value_of_any_scenario_field_builds_a_trace_or_says_why_in_a_line(tmp_path, section):
    for leaf in _leaves({section: SCENARIO[section]}):
        for value in VALUES:
            _file_case(tmp_path, SCENARIO, leaf, value,
                       "trace", "build", "--scenario", "{file}", "--requests", "20", "--out", "{folder}/t.parquet")


@pytest.mark.parametrize("section", sorted(FLEET))
def test_any_value_of_any_fleet_field_plans_or_says_why_in_a_line(tmp_path, section):
    for leaf in _leaves({section: FLEET[section]}):
        for value in VALUES:
            _file_case(tmp_path, FLEET, leaf, value,
                       "plan", "--fleet", "{file}", "--modes", "baseline", "--requests", "5", "--rate-scale", "1",
                       "--out", "{folder}", "--run-id", "p")
