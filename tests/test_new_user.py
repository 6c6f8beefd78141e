"""What a new user following the README and `--help` met, held as they see it (console, files, exit
code): simulated numbers said to be simulated where the decision is, with the hardware modelled; a
held fleet's key, missing or wrong, said apart and by its variable, by `cluster status` as by a run;
bounds that agree, and errors that blame the flag the user gave."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from cluster.fleet import load_fleet
from tests.conftest import cli, loadtest_process

SIMULATED = ("SIMULATED: these numbers come from loadtest's simulator (a performance model of "
             "meta-llama/Llama-3.3-70B-Instruct at TP4 on h100-sxm), not from a GPU fleet")


def test_make_runs_default_fleet_says_it_is_the_simulator_and_what_it_models():
    spec, _ = load_fleet("local-sim")   # what `make run` replays against
    text = spec.simulated()
    assert text is not None and text.startswith("SIMULATED: ") and spec.sim.hardware in text and spec.model in text
    assert load_fleet("h100-70b")[0].simulated() is None   # real vLLM: nothing to say


@pytest.mark.e2e
def test_a_run_on_the_simulator_says_so_before_its_decision_everywhere(session_run):
    run_dir, ran = session_run   # against the shared simulator fleet, held up by `cluster up`
    out = ran.stdout
    said = out.index(SIMULATED)
    assert said < out.index("decision: ") and said < out.index("speedup"), out
    assert out.splitlines()[1] == SIMULATED, out.splitlines()[:3]   # the first screen: right under the run's line
    report = (run_dir / "report.md").read_text().splitlines()
    assert report[2] == f"**{SIMULATED}.**" and report[4].startswith("**Decision: "), report[:6]
    html = (run_dir / "report.html").read_text()
    assert html.index("SIMULATED: these numbers") < html.index("Decision: ") < html.index("<h2>Plots</h2>")
    assert json.loads((run_dir / "manifest.json").read_text())["simulated"] == SIMULATED


MISSING = ("the server requires an API key and none was sent (LOADTEST_API_KEY is not set; set it to the key, or "
           "name another variable with --api-key-env)")
REFUSED = "the server refused the API key in LOADTEST_API_KEY (it is not the server's key)"


@pytest.mark.e2e
def test_a_held_fleets_key_missing_or_wrong_is_said_apart_by_status_and_by_a_run(world_fleet, tmp_path):
    """The shared fleet requires the session's key (VLLM_API_KEY in its fleet's env)."""
    state = str(world_fleet.state)
    assert cli("cluster", "status", "--state", state).returncode == 0   # the session's key: every replica ok
    for key, said in ((None, MISSING), ("sk-not-the-key", REFUSED)):
        env = {k: v for k, v in os.environ.items() if k != "LOADTEST_API_KEY"}
        env |= {"LOADTEST_API_KEY": key} if key else {}
        status = cli("cluster", "status", "--state", state, env=env)
        assert status.returncode == 1, status.stdout + status.stderr   # replicas up, but a run could not use them
        for mode in world_fleet.replicas:
            assert f"{mode}-0: GET /v1/models answered HTTP 401: {said}" in status.stdout.splitlines(), status.stdout
        run = cli("run", "--endpoints", state, "--modes", "baseline", "--requests", "4", "--out", str(tmp_path),
                  env=env)
        assert run.returncode == 2 and run.stderr.count("error:") == 1, run.stderr
        assert said in run.stderr, run.stderr


def test_concurrency_levels_stop_where_the_client_does():
    out = cli("sweep", "--modes", "baseline", "--requests", "20", "--concurrency", "1,100000000")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--concurrency: expected at most 65,535 requests in flight" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("flags, blamed", [
    (["--duration", "100000h"], "loadtest soak: error: --duration: 100,000 h at the default window"),
    (["--duration", "1000h", "--window", "60"], "loadtest soak: error: --window: 60 s (each a fifth of it apart)"),
    (["--duration", "1000h", "--window-step", "5"], "loadtest soak: error: --window-step: 5 s over the"),
    (["--duration", "1h", "--window", "2"], "loadtest soak: error: --window: at least 5 s, got 2 s"),
])
def test_a_soak_with_too_many_windows_blames_the_flag_given(flags, blamed, tmp_path):
    out = cli("soak", *flags, "--out", str(tmp_path))
    assert out.returncode == 2 and out.stderr.startswith(blamed), out.stderr
    assert not list(tmp_path.iterdir()), "refused before anything was written"


@pytest.mark.e2e
@pytest.mark.rows_may_be_lost("stopped by SIGTERM while Ray starts: no replay began, so no request was scheduled")
def test_sigterm_while_the_fleet_starts_removes_the_targets_file_and_exits_130(tmp_path):
    """The new user's `timeout 100 loadtest sweep ...`: SIGTERM once /metrics is up and Ray is
    starting (ray.init's own handler, which exited with code 15) leaves no targets file behind, says
    it was interrupted, and exits 130."""
    with loadtest_process("sweep", "--modes", "baseline", "--requests", "20", "--concurrency", "1,4", "--out",
                          str(tmp_path), "--run-id", "conc") as proc:
        targets = tmp_path / "prometheus-targets" / "conc.json"
        deadline = time.monotonic() + 60
        while not targets.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert not targets.exists(), "the targets file outlived the command"
    assert "Traceback" not in out and "sweep: no report was written" in out, out
    manifest = json.loads((tmp_path / "conc" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted", manifest["status"]


def test_a_command_names_only_the_files_it_wrote(tmp_path):
    from rich.console import Console

    from loadtest.commands.console import say_written

    console = Console(record=True, width=300)
    (tmp_path / "levels").mkdir()
    say_written(console, "sweep", tmp_path / "report.md", ("curves", tmp_path / "sweep.parquet"),
                ("levels as run folders", tmp_path / "levels"))
    (tmp_path / "report.md").write_text("# r")
    say_written(console, "sweep", tmp_path / "report.md", ("curves", tmp_path / "sweep.parquet"), took_s=1.0)
    lines = console.export_text().splitlines()
    assert lines == [f"sweep: no report was written (levels as run folders {tmp_path / 'levels'})",
                     f"sweep: {tmp_path / 'report.md'} in 1.0 s"], lines


def test_a_garbled_parquet_trace_is_one_line(tmp_path):
    import random

    from scenarios.spec import load_scenario
    from scenarios.trace import build_trace, write_trace

    good = tmp_path / "good.parquet"
    write_trace(build_trace(load_scenario("chat")[0], requests=50, seed=1), good, "chat", "0" * 64)
    data, rng = bytearray(good.read_bytes()), random.Random(3)
    for _ in range(40):   # the file's metadata garbled: pyarrow's Thrift error ends with a newline
        data[rng.randrange(len(data) // 2, len(data) - 8)] = rng.randrange(256)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    for argv in (["run", "--trace", str(bad), "--out", str(tmp_path / "out")], ["trace", "show", str(bad)]):
        out = cli(*argv)
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
        assert f"{bad}: not a Parquet trace: " in out.stderr, out.stderr


def test_a_jsonl_import_says_every_kind_of_problem_at_once(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "max_tokens": 3}\n{"max_tokens": 3}\nnot json\n{"prompt": "b", "max_tokens": 0}\n'
                   '{"prompt": 1, "max_tokens": 3}\n[1]\n{"prompt": "c", "max_tokens": 3, "timestamp": "x"}\n')
    out = cli("trace", "import", str(bad), "--format", "jsonl", "--out", str(tmp_path / "t.parquet"))
    assert out.returncode == 2 and not (tmp_path / "t.parquet").exists(), out.stderr
    assert out.stderr.splitlines() == [
        f"loadtest trace import: error: {bad}:2: prompt: required string is missing (or give messages, for the chat "
        "API) (and 1 more line(s) like it)",
        f"loadtest trace import: error: {bad}:3: not valid JSON: invalid literal, expected 'null': line 1 column 1 "
        "(char 0)",
        f"loadtest trace import: error: {bad}:4: max_tokens: expected an integer from 1 to 2,147,483,647 (the trace "
        "stores int32), got 0",
        f"loadtest trace import: error: {bad}: and 2 more line(s) with 2 other kind(s) of problem"], out.stderr


@pytest.mark.parametrize("seconds, text", [(45, "45 s"), (120, "2 min"), (150, "2 min 30 s"), (5400, "1 h 30 min"),
                                           (28_800, "8 h"), (360_000_000, "100,000 h")])
def test_a_soaks_length_is_said_as_a_person_reads_it(seconds, text):
    from common.times import span_text

    assert span_text(seconds) == text


def test_the_bar_says_what_the_ended_requests_were_as_the_table_does():
    """After Ctrl-C the bar said `147/400 done` where the table said 146 ok and 1 stopped by the
    client: the bar's live text now names them by the table's outcomes, once any is not ok."""
    from loadtest.live.progress import live_text
    from loadtest.request.tally import TenantTally

    chat, code = TenantTally(), TenantTally()
    for tally, n in ((chat, 100), (code, 46)):
        for _ in range(n):
            tally.observe({"status": "ok", "sent_ns": 1, "e2e_ms": 10.0, "ttft_ms": 5.0}, True)
    assert live_text({"chat": chat, "code": code}).startswith("TTFT p50 ")   # all ok: nothing more to say
    code.observe({"status": "error", "error_kind": "interrupted", "sent_ns": 1}, False)
    code.observe({"status": "not_sent", "sent_ns": None}, False)             # not ended: the bar's own count
    assert live_text({"chat": chat, "code": code}).startswith("146 ok · 1 stopped by the client · TTFT p50 ")
    chat.observe({"status": "timeout", "error_kind": "read", "sent_ns": 1}, False)
    assert live_text({"chat": chat, "code": code}).startswith("146 ok · 1 failed · 1 stopped by the client · ")


@pytest.mark.e2e
def test_a_held_simulator_fleets_modes_replay_side_by_side_as_run_help_says(session_run):
    """`run --endpoints STATE` of a fleet held up by `cluster up` (every mode up at once, the
    simulator) replays its modes side by side, as the same fleet provisioned by `run` would; and
    `run --help` says what the default does, not 'each mode in turn'."""
    run_dir, _ran = session_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["mode_order"].startswith("parallel (all modes at once"), manifest["mode_order"]
    runs = manifest["mode_runs"]
    assert runs["eagle"]["started_at"] < runs["baseline"]["ended_at"], runs   # overlapping, not in turns
    words = " ".join(cli("run", "--help").stdout.split())
    assert "each mode in turn" not in words and "every mode replays side by side" in words


@pytest.mark.e2e
def test_the_console_table_is_narrow_and_the_rest_is_in_report_md(session_run):
    """The modes table was about 170 columns wide; the console keeps its few columns (rates,
    latencies, speedup, goodput, errors) and report.md the rest, with every definition."""
    run_dir, ran = session_run
    table = [line for line in ran.stdout.splitlines() if line.startswith(("┏", "┃", "│", "└"))]
    widest = max(len(line.rstrip()) for line in table[:8])
    assert widest <= 120, (widest, table[:8])
    report = (run_dir / "report.md").read_text()
    for column in ("out tok/s", "acceptance (server)", "tokens/step (client)", "peak in flight"):
        assert column in report and column not in ran.stdout, column
