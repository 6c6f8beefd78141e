"""Safe by default, checked from the source and the parsers: no shell and no string-built command
anywhere, every server this project starts binds loopback unless told otherwise, names taken from
flags and configs cannot leave the results folder, and the Docker image runs as a non-root user."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from common.names import name_problem, slug
from loadtest.commands.arguments import build_parser, subparsers
from tests.conftest import ROOT, cli

SOURCE_DIRS = ("loadtest", "cluster", "scenarios", "analysis", "common", "bench", "tests", "ops")
RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput"}
SHELLS = {("os", "system"), ("os", "popen"), ("asyncio", "create_subprocess_shell")}


def _sources() -> list[Path]:
    return [p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py") if ".venv" not in p.parts]


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            yield node, node.func.value.id, node.func.attr


def test_no_shell_and_no_command_built_as_a_string():
    problems = []
    files = _sources()
    assert len(files) > 100   # the scan sees the project
    for path in files:
        for node, owner, name in _calls(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if (owner, name) in SHELLS or (owner == "subprocess" and name in ("getoutput", "getstatusoutput")):
                problems.append(f"{where}: {owner}.{name} runs a shell")
            for kw in node.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    problems.append(f"{where}: shell={ast.unparse(kw.value)}")
            if owner == "subprocess" and name in RUNNERS and node.args:
                first = node.args[0]
                if isinstance(first, ast.JoinedStr | ast.BinOp) or (
                        isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    problems.append(f"{where}: the command is a string ({ast.unparse(first)[:60]})")
    assert not problems, "\n".join(problems)


def test_the_scan_catches_what_it_looks_for():
    bad = ast.parse('import subprocess, os\nsubprocess.run(f"ls {x}", shell=True)\nos.system("ls")\n')
    found = [(owner, name, [k.arg for k in node.keywords]) for node, owner, name in _calls(bad)]
    assert ("subprocess", "run", ["shell"]) in found and ("os", "system", []) in found


def _host_defaults(parser: argparse.ArgumentParser, prefix: str = "loadtest") -> dict[str, str]:
    out = {}
    for action in parser._actions:
        if action.dest.endswith("host") and action.dest != "master_host" and isinstance(action.default, str):
            out[f"{prefix} {'/'.join(action.option_strings)}"] = action.default
    for name, sub in subparsers(parser).items():
        out.update(_host_defaults(sub, f"{prefix} {name}"))
    return out


def test_every_server_binds_loopback_by_default():
    from cluster.sim import cli as sim_cli

    sim = argparse.ArgumentParser()
    sim_cli.add_arguments(sim)
    defaults = {**_host_defaults(build_parser()), **_host_defaults(sim, "loadtest sim")}
    assert any("--web-host" in k for k in defaults) and any("--metrics-host" in k for k in defaults)
    assert any(k.startswith("loadtest sim") for k in defaults)
    assert {k: v for k, v in defaults.items() if v != "127.0.0.1"} == {}


def test_the_docker_image_runs_as_a_non_root_user():
    users = re.findall(r"^\s*USER\s+(\S+)", (ROOT / "Dockerfile").read_text(), flags=re.M)
    assert users and users[-1] not in ("root", "0", "0:0")


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".", "", ".hidden", "x" * 129, "a b", "é"])
def test_a_name_that_could_leave_the_results_folder_is_refused(name):
    assert name_problem(name)


@pytest.mark.parametrize("name", ["demo", "run-1", "eagle3", "2026-12-02T0500Z_chat.v2"])
def test_plain_names_pass(name):
    assert name_problem(name) is None and slug(name) == name


def test_a_scenario_name_in_a_default_run_folder_is_made_plain():
    assert slug("../../etc/passwd") == "etc-passwd" and slug("///") == "run" and not name_problem(slug("a:b c"))


def test_run_ids_and_modes_that_leave_the_folder_are_one_line_and_exit_2(tmp_path):
    r = cli("run", "--run-id", "../escape", "--out", str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not a plain name" in r.stderr
    r = cli("run", "--endpoints", "../x=http://127.0.0.1:9", "--out", str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not a plain name" in r.stderr
    fleet = (ROOT / "cluster" / "fleets" / "local-sim.toml").read_text().replace("[modes.baseline]", '[modes."../x"]')
    (tmp_path / "fleet.toml").write_text(fleet)
    r = cli("plan", "--fleet", str(tmp_path / "fleet.toml"), "--out", str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "'../x' is not a plain name" in r.stderr
    assert not (tmp_path.parent / "escape").exists() and not (tmp_path.parent / "x").exists()
