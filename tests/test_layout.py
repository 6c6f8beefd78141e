"""The house's rules, checked: imports flow one way between the four rooms, only the commands
import all four, no module imports one that imports it back (at any distance, inside functions
and under TYPE_CHECKING included), and the simulator starts without the client packages. Files
are split by job, not held under a length."""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys

import pytest

from tests.conftest import ROOT

ROOMS = ("scenarios", "cluster", "loadtest", "analysis", "contract")
# What each room may import of the others (DESIGN.md, "The way data flows"); `common` is beneath all.
# The record contract (`contract`: the request schema and outcomes, the manifest, the part files) is
# beneath both the client and the analysis, so analysis reads records without importing loadtest;
# and beneath the cluster, whose scraper writes the GPU samples (contract.gpu_metrics) analysis reads.
ALLOWED = {"scenarios": set(), "cluster": {"contract"}, "contract": set(), "loadtest": {"scenarios", "contract"},
           "analysis": {"contract"}}
# Inside loadtest: the engine (engine/) composes the four rooms and knows nothing of the command
# line nor of the views; the live views (live/: the bars, /metrics, the board, the web UI's session)
# hear its events; the options records (options/, which name the rooms' defaults) are beneath both;
# the commands (commands/) wire the command line to all of it and may import anything.
ENGINE = ("loadtest", "engine")
LIVE = ("loadtest", "live")
OPTIONS = ("loadtest", "options")
# The command lines: ours, and the simulator's own (`loadtest sim` = `python -m cluster.sim`).
COMMAND_LINES = ("loadtest/commands/", "loadtest/__main__.py", "cluster/sim/cli.py", "cluster/sim/__main__.py")


def _imports(path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def _within(path, place: tuple[str, ...]) -> bool:
    return path.relative_to(ROOT).parts[:len(place)] == place


def _modules(path) -> set[str]:
    """The dotted modules `path` imports, wherever the import is."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return out


@pytest.mark.parametrize("room", ROOMS)
def test_imports_flow_one_way(room):
    for path in (ROOT / room).rglob("*.py"):
        if any(_within(path, p) for p in (ENGINE, LIVE, OPTIONS)) or str(path.relative_to(ROOT)).startswith(
                COMMAND_LINES):
            continue  # the engine composes the four rooms, the views watch it; the commands wire it (checked below)
        others = _imports(path) & set(ROOMS) - {room}
        assert others <= ALLOWED[room], f"{path.relative_to(ROOT)} imports {sorted(others - ALLOWED[room])}"
        inner = {m for m in _modules(path) if m.startswith(("loadtest.engine", "loadtest.live", "loadtest.commands"))}
        assert not inner, f"{path.relative_to(ROOT)} imports {sorted(inner)}: only the commands reach the engine"


def test_the_engine_knows_nothing_of_the_command_line():
    """Nothing in loadtest/engine/, loadtest/live/ or loadtest/options/ imports the commands, and
    nothing outside the command lines imports argparse or takes a Namespace."""
    for part in (ENGINE, LIVE, OPTIONS):
        for path in ROOT.joinpath(*part).rglob("*.py"):
            assert not {m for m in _modules(path) if m.startswith("loadtest.commands")}, path
    for path in (p for room in ROOMS for p in (ROOT / room).rglob("*.py")):
        if str(path.relative_to(ROOT)).startswith(COMMAND_LINES):
            continue
        assert "argparse" not in _imports(path), f"{path.relative_to(ROOT)} imports argparse"
        assert "Namespace" not in path.read_text(), f"{path.relative_to(ROOT)} names a Namespace"


def _uses_argparse(module: str) -> bool:
    path = ROOT / f"{module.replace('.', '/')}.py"
    return "argparse" in _imports(path if path.is_file() else ROOT / module.replace(".", "/") / "__init__.py")


def argparse_paths(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each chain of imports from a module of the engine (loadtest/engine/) to a module that
    imports argparse, at any distance."""
    found, seen = [], set()
    stack = [[m] for m in sorted(graph) if m.startswith("loadtest.engine")]
    while stack:
        chain = stack.pop()
        if chain[-1] in seen:
            continue
        seen.add(chain[-1])
        if _uses_argparse(chain[-1]):
            found.append(chain)
        stack += [[*chain, m] for m in sorted(graph.get(chain[-1], ()))]
    return found


def engine_shows(path) -> set[str]:
    """What a module of the engine imports of the views: the live views, the commands' views, or
    rich (the console, the bars, markdown drawn)."""
    return {m for m in _modules(path) if m.startswith(("loadtest.live", "loadtest.commands", "rich"))}


def test_the_engine_never_imports_the_views():
    """The engine emits events (loadtest.engine.events) and returns typed results; what a person
    sees (rich's console, bars and markdown, the board, /metrics) is in the views that observe it."""
    for path in ROOT.joinpath(*ENGINE).rglob("*.py"):
        assert not engine_shows(path), f"{path.relative_to(ROOT)} imports {sorted(engine_shows(path))}"


def test_the_views_check_finds_an_engine_that_prints(tmp_path):
    """session/engine.py at fe9a3e3 drew the bars itself and fed /metrics directly."""
    printing = tmp_path / "replays.py"
    printing.write_text("from rich.progress import Progress\nfrom loadtest.live.progress import live_text\n")
    assert engine_shows(printing) == {"rich.progress", "rich.progress.Progress", "loadtest.live.progress",
                                      "loadtest.live.progress.live_text"}


def test_no_argparse_on_the_engines_path():
    """Nothing the engine imports, at any distance, parses a command line: the plan builds the
    simulator's typed configuration (cluster.sim.config) rather than parsing a server's argv."""
    assert not argparse_paths(import_graph()), argparse_paths(import_graph())


def test_the_argparse_check_finds_an_indirect_import():
    graph = import_graph()   # as it was at ef8d684: the plan built its simulator through the simulator's CLI
    graph["loadtest.engine.plan"] = graph["loadtest.engine.plan"] | {"cluster.sim.cli"}
    assert ["loadtest.engine.plan", "cluster.sim.cli"] in [chain[-2:] for chain in argparse_paths(graph)]


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


def _module(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every module of the six packages -> the modules of them it imports, wherever the import is."""
    paths = [p for pkg in (*ROOMS, "common") for p in (ROOT / pkg).rglob("*.py")]
    modules = {_module(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module in modules and node.level == 0:
                # `from pkg import mod` imports the module mod; `from mod import name`, mod itself
                out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                        for a in node.names}
        graph[_module(path)] = out - {_module(path)}
    return graph


def test_no_module_imports_one_that_imports_it_back():
    try:
        tuple(graphlib.TopologicalSorter(import_graph()).static_order())
    except graphlib.CycleError as err:
        pytest.fail("an import circle: " + " -> ".join(err.args[1]))


def test_the_one_way_check_finds_an_import_that_climbs(tmp_path):
    """analysis importing loadtest (as analysis/reader.py did at ef8d684) is refused."""
    climbing = tmp_path / "analysis" / "reader.py"
    climbing.parent.mkdir()
    climbing.write_text("from loadtest.request.compact import record_parts\n")
    assert _imports(climbing) & set(ROOMS) - {"analysis"} == {"loadtest"}
    assert not {"loadtest"} <= ALLOWED["analysis"]


def test_the_circle_check_finds_a_circle():
    graph = import_graph()
    graph["cluster.supervise"] = graph["cluster.supervise"] | {"cluster.provision"}   # as it was at 6c643f3
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter(graph).static_order())


def _named_manifest(node: ast.AST) -> bool:
    """`manifest`, `self.manifest`, `lv.manifest`, `run.manifest`: a name or attribute that says so."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.lower().endswith("manifest")


def manifest_writes(source: str) -> list[int]:
    """The lines of `source` that write a manifest or set one of its fields."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                   if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
        for t in targets:
            for part in t.elts if isinstance(t, ast.Tuple) else [t]:
                if isinstance(part, ast.Attribute) and _named_manifest(part.value):
                    lines.append(node.lineno)
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "write" and _named_manifest(f.value):
                lines.append(node.lineno)
            if isinstance(f, ast.Name) and f.id == "setattr" and node.args and _named_manifest(node.args[0]):
                lines.append(node.lineno)
    return sorted(lines)


def test_only_the_engine_writes_the_manifest():
    """The analysis, the views and the commands hand the engine what they found (`Run.record`);
    only loadtest/engine/ (and the manifest's own module) write manifest.json or set its fields."""
    for room in (*ROOMS, "common"):
        for path in (ROOT / room).rglob("*.py"):
            if _within(path, ENGINE) or _within(path, ("contract",)):
                continue
            writes = manifest_writes(path.read_text())
            assert not writes, f"{path.relative_to(ROOT)} writes the manifest at lines {writes}"


def test_the_manifest_check_finds_a_writer():
    """analysis/gate.judge_gate at fe9a3e3 set the gate in the manifest itself."""
    assert manifest_writes("def judge_gate(manifest, checks):\n    manifest.gate = 'passed'\n") == [2]
    assert manifest_writes("run.manifest.write(run_dir)\nlv.manifest.status, x = 1, 2\n") == [1, 2]


def class_homes(paths) -> dict[str, list[str]]:
    """Each class name defined at the top of a module -> the files that define it."""
    homes: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                homes.setdefault(node.name, []).append(str(path))
    return homes


def test_one_class_per_name():
    """No two classes of the six packages share a name (the engine's `Session` and the
    locustfile's were two classes under one name, as were the plan command's `Plan` and the
    pre-flight's)."""
    homes = class_homes(p for pkg in (*ROOMS, "common") for p in (ROOT / pkg).rglob("*.py"))
    assert not {name: where for name, where in homes.items() if len(where) > 1}


def test_the_class_check_finds_two_homes(tmp_path):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("class Session:\n    pass\n")
    paths = [tmp_path / "a.py", tmp_path / "b.py"]
    assert [n for n, where in class_homes(paths).items() if len(where) > 1] == ["Session"]
