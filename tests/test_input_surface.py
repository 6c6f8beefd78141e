"""Every value a user can give, of every awkward kind (huge, tiny, negative, zero, NaN, infinite,
empty, not a number, unicode, a path that leaves the folder): every value-taking flag and
argument of every command, every field of the default scenario and fleet files, every field of
an imported trace's rows. Each case runs in this process under a memory limit (2 GiB past what
the test process maps: tests.conftest.memory_limit) and a time limit, and must end with an exit
code of the contract (0-3), no traceback, and, for bad input, one to three lines on stderr.
Every case of a fixed list, then values Hypothesis draws (seeded, a fixed count per command).

Commands whose valid input starts something long-lived are taken up to that point: the replaying
commands against servers that are not there, `cluster up` up to the fleet's start, `sim` up to
serving (its socket is opened, then closed)."""

from __future__ import annotations

import argparse
import copy
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadtest.commands.arguments import build_parser, subparsers
from loadtest.commands.table import COMMANDS
from tests.conftest import DATA, ROOT, CommandTimeout, cli, memory_limit

DEAD = ("--endpoints", "baseline=http://127.0.0.1:9")   # nothing listens: every case ends before a replay
AWKWARD = ["0", "-1", "1e-9", "99999999999999", "1e308", "nan", "inf", "-inf", "", "x", "é", "../..", "1,2,,3",
           "0.5", "3", "-0", "٣", "1" * 400]
TIME_LIMIT_S = 60


@dataclass(frozen=True)
class Surface:
    """One command's input surface: its words, a valid base (`{folder}` the case's folder, `{run}`
    a finished run folder, `{jsonl}` a trace file to import), and the flags not varied (where
    output goes, or what would reach beyond this machine)."""

    words: tuple[str, ...]
    positionals: dict[str, str] = field(default_factory=dict)   # <dest> -> its base value
    options: tuple[str, ...] = ()
    skip: frozenset[str] = frozenset()


REPLAYING = frozenset({"--endpoints", "--fleet", "--address", "--out", "--metrics-port", "--metrics-host"})
SURFACES = {s.words: s for s in [
    *(Surface((c,), options=(*DEAD, "--out", "{folder}"), skip=REPLAYING) for c in ("run", "sweep", "capacity",
                                                                                    "soak", "ui")),
    Surface(("report",), {"<runs>": "{run}"}, ("--out", "{folder}/r")),
    Surface(("compare",), {"<base>": "{run}", "<new>": "{run}"}),
    Surface(("calibrate",), {"<result>": "{run}"}, ("--out", "{folder}/c.toml")),
    Surface(("plan",), options=("--modes", "baseline", "--requests", "5", "--rate-scale", "1", "--out", "{folder}"),
            skip=frozenset({"--fleet"})),
    Surface(("trace", "build"), options=("--requests", "5", "--out", "{folder}/t.parquet")),
    Surface(("trace", "import"), {"<file>": "{jsonl}"}, ("--format", "jsonl", "--out", "{folder}/t.parquet")),
    Surface(("trace", "show"), {"<file>": "{jsonl}"}),
    Surface(("scenario", "show"), {"<name>": "saas-mix"}),
    Surface(("scenario", "validate"), {"<path>": str(DATA / "tiny-mix.toml")}),
    Surface(("cluster", "up"), options=("--state", "{folder}/s.json", "--logs", "{folder}/logs"),
            skip=frozenset({"--fleet"})),
    Surface(("cluster", "status"), options=("--state", "{folder}/s.json")),
    Surface(("cluster", "down"), options=("--state", "{folder}/s.json")),
    Surface(("sim",), {"<model_tag>": "m"}, ("--port", "0")),
]}


def _parser(words: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        parser = subparsers(parser)[word]
    return parser


def _inputs(surface: Surface) -> list[str]:
    """Every value-taking flag (its last spelling) and every positional (`<dest>`) of the command."""
    out = []
    for a in _parser(surface.words)._actions:
        if isinstance(a, argparse._HelpAction | argparse._SubParsersAction) or a.nargs == 0 \
                or a.help == argparse.SUPPRESS:
            continue
        name = a.option_strings[-1] if a.option_strings else f"<{a.dest}>"
        if name not in surface.skip:
            out.append(name)
    return out


def _argv(surface: Surface, name: str, value: str, places: dict[str, str]) -> list[str]:
    """The command with `name` given `value` and everything else at its base."""
    fill = lambda text: text.format(**places)  # noqa: E731
    positionals = [value if p == name else fill(v) for p, v in surface.positionals.items()]
    options, rest = list(surface.options), []
    while options:   # the base's own value of `name` gives way to the case's
        flag, given = options.pop(0), options.pop(0)
        if flag != name:
            rest += [flag, fill(given)]
    return [*surface.words, *positionals, *rest, *([] if name.startswith("<") else [name, value])]


class _Reached(Exception):
    """`cluster up`'s checks passed: the fleet would start now."""


@pytest.fixture
def held_back(monkeypatch):
    """What would start something long-lived stops at its door: `cluster up` before the fleet
    starts, `sim` once it listens (the socket is closed)."""
    import cluster.commands
    import cluster.sim.cli

    def fleet(*args, **kwargs):
        raise _Reached()

    async def serve(server, sock) -> int:
        sock.close()
        return 0

    monkeypatch.setattr(cluster.commands, "Fleet", fleet)
    monkeypatch.setattr(cluster.sim.cli, "_main", serve)


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, str]:
    """A finished run (a plan's level: records like a run's, in a second) and a trace to import."""
    base = tmp_path_factory.mktemp("surface-base")
    planned = cli("plan", "--modes", "baseline,eagle", "--requests", "20", "--rate-scale", "1", "--out", str(base),
                  "--run-id", "p")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    jsonl = base / "t.jsonl"
    jsonl.write_text("".join(json.dumps({"prompt": f"p{i}", "max_tokens": 5, "timestamp": i}) + "\n"
                             for i in range(5)))
    return {"run": str(base / "p" / "levels" / "scale-1"), "jsonl": str(jsonl)}


def _problem(argv: list[str], folder: Path, codes: tuple[int, ...] = (0, 1, 2, 3)) -> str | None:
    """`loadtest ARGV` in `folder` (a relative path lands there) under the memory and time limits:
    what it did against the contract, ending with one of `codes` (None: nothing, or it reached a
    held-back door)."""
    try:
        with memory_limit():
            ran = cli(*argv, cwd=folder, timeout=TIME_LIMIT_S)
    except _Reached:
        return None
    except CommandTimeout:
        return f"{argv}: still running after {TIME_LIMIT_S} s"
    except Exception as exc:   # out of the command: a traceback for a user
        return f"{argv}: raised {type(exc).__name__}: {str(exc)[:300]}"
    said = ran.stdout + ran.stderr
    if ran.returncode not in codes:
        return f"{argv}: exit {ran.returncode}: {said[-500:]}"
    if "Traceback" in said or "MemoryError" in said:
        return f"{argv}: a traceback: {said[-1500:]}"
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    if ran.returncode == 2 and not 1 <= len(lines) <= 3:
        return f"{argv}: exit 2 in {len(lines)} lines: {ran.stderr[-1000:]}"
    return None


def test_the_memory_limit_holds_and_the_estimates_see_it():
    from scenarios.limits import machine_memory

    with memory_limit():
        assert machine_memory() <= 2 << 30
        with pytest.raises(MemoryError):
            bytearray(3 << 30)
    assert machine_memory() > 2 << 30


@pytest.mark.parametrize("words", list(SURFACES), ids=" ".join)
def test_the_surface_is_every_value_taking_flag_and_argument(words):
    """Nothing of the grammar is left out: every command has a surface, and each one varies."""
    commands = {tuple(c.words.split()) for c in COMMANDS} | {("sim",)}   # and the simulator's own command line
    assert set(SURFACES) == commands - {("scenario", "list")}   # `scenario list` takes no value
    assert len(_inputs(SURFACES[words])) >= 1


@pytest.mark.parametrize("words", list(SURFACES), ids=" ".join)
def test_any_value_of_any_flag_ends_in_the_contract(tmp_path, places, held_back, words):
    """Every value-taking flag and argument of the command with every awkward value: all of them."""
    surface, problems = SURFACES[words], []
    for i, name in enumerate(_inputs(surface)):
        for j, value in enumerate(AWKWARD):
            folder = tmp_path / f"{i}-{j}"
            folder.mkdir()
            problems.append(_problem(_argv(surface, name, value, {**places, "folder": str(folder)}), folder))
    problems = [p for p in problems if p]
    assert not problems, "\n".join(problems)


# What Hypothesis draws: any text, and numbers of every sign written as users write them, small
# or far past any bound. Not between: a valid 10^5 (`plan --requests 100000`) is real work of
# minutes, not an awkward value, and the time limit is there to catch a command that hangs.
INTEGER = st.one_of(st.integers(-10**4, 10**4), st.integers(min_value=10**15), st.integers(max_value=-10**15))
FLOAT = st.one_of(st.floats(-1e4, 1e4), st.floats(min_value=1e15), st.floats(max_value=-1e15),
                  st.sampled_from([math.nan, math.inf, -math.inf]))
VALUE = st.one_of(st.text(max_size=40), INTEGER.map(str), FLOAT.map(repr), FLOAT.map(lambda x: f"{x:g}"),
                  st.lists(INTEGER.map(str), max_size=4).map(",".join))
EXAMPLES = 60   # per command, seeded: about 2 s a command


@pytest.mark.parametrize("words", list(SURFACES), ids=" ".join)
def test_values_hypothesis_draws_end_in_the_contract(tmp_path_factory, places, held_back, words):
    surface = SURFACES[words]
    count = iter(range(10**6))

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(name=st.sampled_from(_inputs(surface)), value=VALUE)
    def case(name: str, value: str) -> None:
        if "\x00" in value:   # no argv can hold a NUL byte (the OS refuses it before any command runs)
            value = value.replace("\x00", "")
        folder = tmp_path_factory.mktemp(f"drawn-{next(count)}")
        problem = _problem(_argv(surface, name, value, {**places, "folder": str(folder)}), folder)
        assert problem is None, problem

    case()


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


def _file_case(folder: Path, text: str, leaf, value, *argv: str) -> None:
    """`text` written as folder/f (the case's file), given to `loadtest ARGV` (its `{file}` and
    `{folder}` filled in): it ends 0, or 2 in one to three lines, never a traceback."""
    path = folder / "f"
    path.write_text(text)
    problem = _problem([a.format(file=path, folder=folder) for a in argv], folder, codes=(0, 2))
    assert problem is None, (leaf, value, problem)


def _toml_case(folder: Path, data: dict, leaf: tuple, value, *argv: str) -> None:
    text = "\n".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in _with(data, leaf, value).items())
    _file_case(folder, text, leaf, value, *argv)


@pytest.mark.parametrize("section", sorted(SCENARIO))
def test_any_value_of_any_scenario_field_builds_a_trace_or_says_why_in_a_line(tmp_path, section):
    for leaf in _leaves({section: SCENARIO[section]}):
        for value in VALUES:
            _toml_case(tmp_path, SCENARIO, leaf, value,
                       "trace", "build", "--scenario", "{file}", "--requests", "20", "--out", "{folder}/t.parquet")


@pytest.mark.parametrize("section", sorted(FLEET))
def test_any_value_of_any_fleet_field_plans_or_says_why_in_a_line(tmp_path, section):
    for leaf in _leaves({section: FLEET[section]}):
        for value in VALUES:
            _toml_case(tmp_path, FLEET, leaf, value,
                       "plan", "--fleet", "{file}", "--modes", "baseline", "--requests", "5", "--rate-scale", "1",
                       "--out", "{folder}", "--run-id", "p")


# an imported trace's rows: every field of each format's row, with every awkward value
ROWS = {"jsonl": {"prompt": "hello", "max_tokens": 5, "timestamp": 1.5, "tenant": "t"},
        "sharegpt": {"id": "a", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}}
CSV = {"azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
       "burstgpt": ("Timestamp", "Model", "Request tokens", "Response tokens")}
CSV_ROW = {"azure": ("2023-11-16 18:15:46", "12", "4"), "burstgpt": ("5", "ChatGPT", "12", "4")}


def _rows(fmt: str, bad: dict | tuple) -> str:
    """Three rows of `fmt`: a good one, the case's, a good one."""
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in (ROWS[fmt], bad, {**ROWS[fmt], "timestamp": 3.0}))
    if fmt == "sharegpt":
        return json.dumps([ROWS[fmt], bad, {**ROWS[fmt], "id": "c"}])
    later = (CSV_ROW[fmt][0].replace("46", "48"), *CSV_ROW[fmt][1:]) if fmt == "azure" else ("9", *CSV_ROW[fmt][1:])
    return "\n".join(",".join(r) for r in (CSV[fmt], CSV_ROW[fmt], bad, later)) + "\n"


@pytest.mark.parametrize("fmt", ["jsonl", "sharegpt", "azure", "burstgpt"])
def test_any_value_of_any_imported_field_imports_or_says_why_in_a_line(tmp_path, fmt):
    argv = ("trace", "import", "{file}", "--format", fmt, "--out", "{folder}/t.parquet")
    if fmt in ROWS:
        for leaf in _leaves(ROWS[fmt]):
            for value in VALUES:
                _file_case(tmp_path, _rows(fmt, _with(ROWS[fmt], leaf, value)), leaf, value, *argv)
    else:
        for i in range(len(CSV[fmt])):
            for value in AWKWARD:
                bad = tuple(value if j == i else v for j, v in enumerate(CSV_ROW[fmt]))
                _file_case(tmp_path, _rows(fmt, bad), CSV[fmt][i], value, *argv)


# Runs that happen: values drawn for `run`'s own flags against the session's fleet, each run held
# to one record per scheduled request and a manifest that says nothing is missing.
LIVE_SKIP = REPLAYING | {"--scenario", "--trace", "--modes", "--requests", "--run-id", "--progress-every",
                         "--api-key-env", "--metrics-linger"}
SMALL = st.one_of(st.integers(0, 40).map(str), st.floats(0, 8).map(lambda x: f"{x:.3g}"), st.sampled_from(AWKWARD))
LIVE_EXAMPLES = 8   # a run each, about 3 s


@pytest.mark.e2e
def test_runs_with_values_drawn_for_their_flags_record_every_request(tmp_path, world_fleet):
    from tests.invariants import row_problems

    flags = [f for f in _inputs(SURFACES[("run",)]) if f not in LIVE_SKIP]
    assert {"--rate-scale", "--max-inflight", "--timeout", "--workers", "--deadline"} <= set(flags)
    count = iter(range(10**6))
    happened: list[str] = []

    @settings(max_examples=LIVE_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(name=st.sampled_from(flags), value=SMALL)
    def case(name: str, value: str) -> None:
        run_id = f"r{next(count)}"
        base = {"--endpoints": world_fleet.endpoints("baseline"), "--scenario": str(DATA / "tiny-mix.toml"),
                "--requests": "6", "--rate-scale": "4", "--out": str(tmp_path), "--run-id": run_id, name: value}
        problem = _problem(["run", *(word for pair in base.items() for word in pair)], tmp_path)
        assert problem is None, problem
        run = tmp_path / run_id
        if (run / "requests").is_dir():   # it ran: every request once, and the recount agrees
            assert row_problems(run) == [], (name, value)
            assert json.loads((run / "manifest.json").read_text())["unrecorded"] == {}, (name, value)
            happened.append(f"{name} {value}")

    case()
    # About half the drawn values are refused (an awkward value, a number where a word goes): enough
    # runs happen for their rows to be checked, whichever values the draw holds.
    assert len(happened) >= LIVE_EXAMPLES // 4, happened
