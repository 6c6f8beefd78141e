"""The command line as a user meets it: help that explains, one-line errors, exit code 2."""

from __future__ import annotations

import pytest

from loadtest.commands.arguments import build_parser, subparsers
from tests.conftest import DATA, ROOT, cli, loadtest


def test_top_level_help_lists_commands():
    out = loadtest("--help")
    assert out.returncode == 0
    assert "run" in out.stdout and "sim" in out.stdout


@pytest.mark.parametrize("command", ["run", "sim"])
def test_every_option_has_help_text(command):
    out = cli(command, "--help")
    assert out.returncode == 0
    sub = subparsers(build_parser())[command]
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
    (["run", "--timeout", "0"], "--timeout: expected a positive number, got '0'"),
    (["ui", "--timeout", "0"], "--timeout: expected a positive number, got '0'"),
    (["run", "--cooldown", "-1"], "--cooldown: expected a number of seconds (0 or more)"),
    (["run", "--max-errors", "150"], "--max-errors: expected a percentage from 0 to 100"),
    (["run", "--rate-scale", "inf"], "--rate-scale: expected a positive number"),
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


def test_the_cli_defaults_are_the_analysis_defaults():
    from analysis.gate import DEFAULT_MAX_ERROR_SHARE
    from cluster.state import DEFAULT_STATE
    from loadtest.commands.arguments import DEFAULT_STATE as CLI_STATE
    from loadtest.commands.option_groups import DEFAULT_MAX_ERRORS

    assert DEFAULT_MAX_ERRORS == DEFAULT_MAX_ERROR_SHARE and CLI_STATE == str(DEFAULT_STATE)


# The client's options -> the ReplayConfig field that owns their default (loadtest.replay.options)
REPLAY_OPTIONS = {"--max-inflight": "max_inflight", "--timeout": "timeout_s", "--retry-after": "retry_after",
                  "--max-retries": "max_retries", "--api-key-env": "api_key_env",
                  "--lateness-limit": "lateness_limit_ms"}


@pytest.mark.parametrize("command", ["run", "sweep", "capacity", "soak", "ui"])
def test_the_client_options_take_their_defaults_from_the_replay_config(command):
    from loadtest.replay.options import ReplayConfig

    parser = subparsers(build_parser())[command]
    by_flag = {o: a for a in parser._actions for o in a.option_strings}
    for flag, name in REPLAY_OPTIONS.items():
        assert by_flag[flag].default == getattr(ReplayConfig, name), (command, flag)


def test_no_default_of_the_replays_options_is_written_twice():
    """Each is written once, in ReplayConfig: no add_argument for one of its flags, and no field of
    the same name in another dataclass, takes a literal default anywhere in the packages."""
    import ast

    from tests.test_layout import ROOMS
    names = set(REPLAY_OPTIONS.values())
    seen = []
    for path in (p for room in ROOMS for p in (ROOT / room).rglob("*.py")):
        if path.name == "options.py" and path.parent.name == "replay":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and any(
                    isinstance(a, ast.Constant) and a.value in REPLAY_OPTIONS for a in node.args):
                seen += [f"{path.relative_to(ROOT)}:{node.lineno}" for k in node.keywords
                         if k.arg == "default" and isinstance(k.value, ast.Constant)]
            elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in names
                  and isinstance(node.value, ast.Constant) and node.value.value is not None):
                seen.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not seen, seen


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
