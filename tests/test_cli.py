"""The command line as a user meets it: help that explains, one-line errors, exit code 2."""

from __future__ import annotations

import argparse

import pytest

from loadtest.commands.arguments import build_parser, subparsers
from loadtest.commands.table import BY_WORDS, COMMANDS, GROUPS
from tests.conftest import DATA, ROOT, cli, loadtest


def test_top_level_help_lists_commands():
    out = loadtest("--help")
    assert out.returncode == 0
    assert "run" in out.stdout and "sim" in out.stdout


@pytest.mark.parametrize("command", sorted(subparsers(build_parser())))
def test_every_option_has_help_text(command):
    out = cli(*command.split(), "--help")
    assert out.returncode == 0
    sub = subparsers(build_parser())[command]
    for action in sub._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue   # the subcommands (each with its own --help) and the options a command hides
        assert action.help and len(action.help) > 10, f"{command} {action.option_strings} has no help"
        assert "{default" not in action.help and "{scope" not in action.help, \
            f"{command} {action.option_strings}: a placeholder left in its help: {action.help!r}"
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
    (["run", "--timeout", "0"], "--timeout: expected a positive number, got '0'"),
    (["ui", "--timeout", "0"], "--timeout: expected a positive number, got '0'"),
    (["run", "--cooldown", "-1"], "--cooldown: expected a number of seconds (0 or more)"),
    (["run", "--max-errors", "150"], "--max-errors: expected a percentage from 0 to 100"),
    (["run", "--rate-scale", "inf"], "--rate-scale: expected a positive number"),
    # sizes the machine cannot hold or a month cannot span, refused before anything is allocated
    (["run", "--requests", "99999999999999"], "would last 634,195.8 years, past the 30.0 days a trace may span"),
    (["run", "--requests", "99999999999999", "--rate-scale", "1e9"], "needs about 492.3 PiB of memory to build"),
    (["run", "--rate-scale", "1e-9", "--requests", "10"], "would last 63.4 years"),
    (["plan", "--rate-scale", "1e-9,1", "--requests", "10"], "level scale-1e-09: 10 requests would last 84.4 years"),
    (["trace", "build", "--scenario", "chat", "--requests", "99999999999", "--out", "t.parquet"], "792.7 years"),
    # an --out that cannot be written (a file in the way, or above; a read-only mount: test_bad_input_by_kind.py)
    (["run", "--out", str(DATA / "tiny-mix.toml"), "--run-id", "x"], "expected a folder to write in, got "),
    (["plan", "--out", str(DATA / "tiny-mix.toml" / "sub"), "--run-id", "x"], "cannot write"),
    (["trace", "import", str(DATA / "import"), "--format", "jsonl", "--out", str(DATA)], "(a folder is there)"),
    (["calibrate", "x" * 300, "--out", "p.toml"], "(File name too long)"),
    (["sim", "x-7B", "--port", "70000"], "--port must be a TCP port (1-65535), got 70000"),
    (["sim", "x-7B", "--max-num-seqs", "0"], "--max-num-seqs must be >= 1, got 0"),
    (["sim", "x-7B", "--max-model-len", "0"], "--max-model-len must be >= 1, got 0"),
    (["sim", "x-7B", "--time-scale", "nan"], "--time-scale must be > 0"),
    (["sim", "x-7B", "--fault", "metrics=500"], "KIND must be one of html, 404"),
    (["trace", "import", "x.jsonl", "--format", "jsonl", "--out", "o.parquet", "--window", "60:10"],
     "--window: expected 0 <= START < END, got '60:10'"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    """Each case failed before: a traceback, a silent default, or a value accepted that no run can use."""
    out = cli(*args)
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, out.stderr
    assert needle in errors[0]
    assert "Traceback" not in out.stderr


def _parser(words: str):
    parser = build_parser()
    for word in words.split():
        parser = subparsers(parser)[word]
    return parser


@pytest.mark.parametrize("command", sorted(BY_WORDS))
def test_each_commands_grammar_is_its_options_record(command):
    """Every option of the command's record is on its parser with the record's default and help,
    and nothing else is; what the parser's defaults read back to is the record's defaults."""
    import argparse

    from loadtest.commands.grammar import read_options
    from loadtest.options.replaying import option_fields

    record = BY_WORDS[command].options
    parser = _parser(command)
    actions = [a for a in parser._actions if a.dest != "help"]
    by_dest = {a.dest: a for a in actions}
    defaults = record()
    offered = [(path, f) for path, f, within in option_fields(record) if f.name not in within.get("omit", ())]
    for path, f in offered:
        value = defaults
        for name in path:
            value = getattr(value, name)
        assert by_dest[f.name].default == getattr(value, f.name), (command, f.name)
        assert by_dest[f.name].help, (command, f.name)
    assert len(offered) == len(actions), "an option not from the record"
    assert read_options(record, argparse.Namespace(**{a.dest: a.default for a in actions})) == defaults


def _literal_defaults(source: str, names: dict[str, list], flags: dict[str, list]) -> list[tuple[int, str, object]]:
    """Where `source` writes one of the options' defaults as a literal, as (line, option, value): a
    field, keyword or parameter named for the option (or NAME_s, NAME_ms) given that value, or an
    add_argument of its flag with that default."""
    import ast

    def literal(node: ast.AST | None) -> object:
        try:
            return _MISSING if node is None else ast.literal_eval(node)
        except ValueError:
            return _MISSING

    def hit(line: int, name: str | None, node: ast.AST | None, table: dict[str, list]) -> list:
        value = literal(node)
        for suffix in ("_s", "_ms", ""):
            base = name[:len(name) - len(suffix)] if name and name.endswith(suffix) else None
            if base in table and any(value == v and type(value) is type(v) for v in table[base]):
                return [(line, base, value)]
        return []

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            value = node.value
            if isinstance(value, ast.Call) and value.args:   # option(DEFAULT, ...)
                value = value.args[0]
            found += hit(node.lineno, node.target.id, value, names)
        elif isinstance(node, ast.Call):
            flag = next((a.value for a in node.args if isinstance(a, ast.Constant) and a.value in flags), None)
            for k in node.keywords:
                found += hit(node.lineno, flag, k.value, flags) if k.arg == "default" else hit(
                    node.lineno, k.arg, k.value, names)
        elif isinstance(node, ast.arguments):
            params = node.posonlyargs + node.args
            pairs = list(zip(params[len(params) - len(node.defaults):], node.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True) if d is not None]
            for a, d in pairs:
                found += hit(d.lineno, a.arg, d, names)
    return sorted(found, key=lambda h: h[0])


_MISSING = object()


def _defaults() -> tuple[dict[str, list], dict[str, list]]:
    """Every option's defaults (by field name and by flag) over every command's record, but None
    and False, which say only 'not given'."""
    from loadtest.options.replaying import option_fields

    names: dict[str, list] = {}
    flags: dict[str, list] = {}
    for record in {c.options for c in COMMANDS}:
        defaults = record()
        for path, f, _ in option_fields(record):
            value = defaults
            for name in path:
                value = getattr(value, name)
            value = getattr(value, f.name)
            if value is not None and value is not False:
                names.setdefault(f.name, []).append(value)
                flags.setdefault(f.metadata["option"]["flag"] or "--" + f.name.replace("_", "-"), []).append(value)
    return names, flags


def test_no_options_default_is_written_twice():
    """Each default is written once, as a literal, on the command line's path (loadtest/, analysis/,
    common/): in its options record, or where the record takes it from (the replay's limits in
    ReplayConfig, the importer's in scenarios/importers.py). A scenario file's, a fleet file's and
    the simulator's settings are their own (a scenario's `seed`, say), and are not looked at."""
    paths = [p for room in ("loadtest", "analysis", "common") for p in (ROOT / room).rglob("*.py")]
    paths.append(ROOT / "scenarios" / "importers.py")
    names, flags = _defaults()
    seen: dict[tuple[str, str], list[str]] = {}
    for path in paths:
        for line, option, value in _literal_defaults(path.read_text(), names, flags):
            seen.setdefault((option, repr(value)), []).append(f"{path.relative_to(ROOT)}:{line}")
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


def test_the_default_check_finds_a_second_copy():
    names, flags = _defaults()
    copy = ("from dataclasses import dataclass\n@dataclass\nclass Pace:\n    cooldown_s: float = 2.0\n"
            "def f(parser, timeout_s=600.0):\n    parser.add_argument('--max-inflight', default=1024)\n")
    assert [(line, option) for line, option, _ in _literal_defaults(copy, names, flags)] == [
        (4, "cooldown"), (5, "timeout"), (6, "--max-inflight")]


def test_a_busy_port_is_the_simulators_only_word(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = cli("sim", "x-7B", "--port", str(port))
    assert out.returncode == 2, out.stderr
    assert "serving" not in out.stderr + out.stdout
    assert out.stderr.strip().endswith(f"cannot listen on 127.0.0.1:{port}: the port is in use; pick another --port")


def test_a_fleet_file_gets_every_problem_in_its_own_key_names(tmp_path):
    fleet = tmp_path / "f.toml"
    fleet.write_text('name = "f"\nengine = "sim"\nmodel = "m-7B"\ntensor_parallel_size = 0\nreplica = 2\n'
                     '[modes.baseline]\nmethod = "none"\n[modes.ngram]\nmethod = "ngram"\n'
                     'num_speculative_tokens = "five"\n')
    out = cli("run", "--fleet", str(fleet))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert sorted(out.stderr.splitlines()) == sorted([
        f"loadtest run: error: {fleet}: tensor_parallel_size: must be at least 1, got 0",
        f"loadtest run: error: {fleet}: replica: unknown key (a typo?)",
        f"loadtest run: error: {fleet}: modes.ngram.num_speculative_tokens: expected an integer, got 'five'",
    ])


def test_a_trace_or_scenario_past_a_month_is_refused_in_one_line(tmp_path):
    """Found by a new user: timestamps of 1e12 s imported with exit 0, then the replay's sink
    overflowed int64 nanoseconds and lost rows; a scenario of 10^12 requests died in numpy."""
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"prompt": "a", "max_tokens": 5, "timestamp": 0}\n'
                     '{"prompt": "b", "max_tokens": 5, "timestamp": 1e12}\n'
                     '{"prompt": "c", "max_tokens": 5, "timestamp": -50}\n')
    imported = cli("trace", "import", str(jsonl), "--format", "jsonl", "--out", str(tmp_path / "t.parquet"))
    assert imported.returncode == 2 and len(imported.stderr.strip().splitlines()) == 1, imported.stderr
    assert "would last 31,709.8 years, past the 30.0 days a trace may span: a --window of it" in imported.stderr
    assert not (tmp_path / "t.parquet").exists()
    huge = tmp_path / "huge.toml"
    huge.write_text((DATA / "tiny-mix.toml").read_text().replace("requests = ", "requests = 1000000000000 #", 1))
    ran = cli("trace", "build", "--scenario", str(huge), "--out", str(tmp_path / "h.parquet"))   # its full size
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr
    assert "--requests 1,000,000,000,000" in ran.stderr and "a trace may span" in ran.stderr


def test_each_command_is_declared_once_and_every_declared_command_runs():
    """The one table (loadtest/commands/table.py) names each command once, with a function that
    exists and takes its options record; the parser holds exactly those commands (and `sim`)."""
    import importlib
    import inspect

    assert len(BY_WORDS) == len(COMMANDS)
    top = subparsers(build_parser())
    assert set(top) == {c.words.split()[0] for c in COMMANDS} | {"sim"}
    for group in GROUPS:
        assert set(subparsers(top[group])) == {c.words.split()[1] for c in COMMANDS if c.words.startswith(group + " ")}
    for c in COMMANDS:
        module, function = c.main.split(":")
        run = getattr(importlib.import_module(module), function)
        (param,) = inspect.signature(run).parameters.values()
        hint = param.annotation if isinstance(param.annotation, str) else param.annotation.__name__
        assert c.options.__name__ in hint, (c.words, hint)
