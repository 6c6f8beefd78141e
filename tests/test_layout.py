"""The house's rules, checked: imports flow one way between the four rooms, only the commands
import all four, the simulator starts without the client packages, and no module of loadtest/
outgrows one job."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import ROOT

ROOMS = ("scenarios", "cluster", "loadtest", "analysis")
# What each room may import of the others (DESIGN.md, "The way data flows"); `common` is beneath all.
ALLOWED = {"scenarios": set(), "cluster": set(), "loadtest": {"scenarios"}, "analysis": {"loadtest"}}


def _imports(path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("room", ROOMS)
def test_imports_flow_one_way(room):
    for path in (ROOT / room).rglob("*.py"):
        if room == "loadtest" and "commands" in path.parts:
            continue  # the wiring layer imports all four
        others = _imports(path) & set(ROOMS) - {room}
        assert others <= ALLOWED[room], f"{path.relative_to(ROOT)} imports {sorted(others - ALLOWED[room])}"


def test_common_imports_no_room():
    for path in (ROOT / "common").rglob("*.py"):
        assert not _imports(path) & set(ROOMS), path


def test_the_simulator_starts_without_the_client_packages():
    hide = "; ".join(f"sys.modules[{name!r}] = None" for name in ("loadtest", "analysis", "scenarios", "locust"))
    code = (f"import runpy, sys; {hide}; sys.argv = ['cluster.sim', '--help']; "
            "runpy.run_module('cluster.sim', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--speculative-config" in out.stdout and "simulator-only options" in out.stdout


def test_no_module_of_loadtest_outgrows_one_job():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in (ROOT / "loadtest").rglob("*.py")}
    assert max(sizes.values()) <= 300, {k: v for k, v in sizes.items() if v > 300}
