"""Every value-taking flag of the replaying commands, given values of every awkward kind (huge,
tiny, negative, zero, NaN, infinite, empty, not a number, unicode, a path that leaves the folder),
against servers that are not there: each case must end with an exit code of the contract (0-3),
no traceback, and, for bad input, at most three lines on stderr. In process, seeded, a fixed
number of examples."""

from __future__ import annotations

import argparse
import copy
import json
import math
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), value=st.sampled_from(AWKWARD))
def test_any_value_of_any_flag_ends_in_the_contract(tmp_path_factory, case, value):
    command, flag = case
    out = tmp_path_factory.mktemp("o")
    ran = cli(command, flag, value, *DEAD, "--out", str(out), timeout=60)
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


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(leaf=st.sampled_from(_leaves(SCENARIO)), value=st.sampled_from(VALUES))
def test_any_value_of_any_scenario_field_builds_a_trace_or_says_why_in_a_line(tmp_path_factory, leaf, value):
    folder = tmp_path_factory.mktemp("s")
    path = folder / "s.toml"
    path.write_text("\n".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in _with(SCENARIO, leaf, value).items()))
    ran = cli("trace", "build", "--scenario", str(path), "--requests", "20", "--out", str(folder / "t.parquet"),
              timeout=60)
    assert ran.returncode in (0, 2) and "Traceback" not in ran.stdout + ran.stderr, (leaf, value, ran.stderr)
    if ran.returncode == 2:
        assert 1 <= len(ran.stderr.strip().splitlines()) <= 3, (leaf, value, ran.stderr)


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(leaf=st.sampled_from(_leaves(FLEET)), value=st.sampled_from(VALUES))
def test_any_value_of_any_fleet_field_plans_or_says_why_in_a_line(tmp_path_factory, leaf, value):
    folder = tmp_path_factory.mktemp("f")
    path = folder / "f.toml"
    path.write_text("\n".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in _with(FLEET, leaf, value).items()))
    ran = cli("plan", "--fleet", str(path), "--modes", "baseline", "--requests", "5", "--rate-scale", "1",
              "--out", str(folder), "--run-id", "p", timeout=60)
    assert ran.returncode in (0, 2) and "Traceback" not in ran.stdout + ran.stderr, (leaf, value, ran.stderr)
    if ran.returncode == 2:
        assert 1 <= len(ran.stderr.strip().splitlines()) <= 3, (leaf, value, ran.stderr)
