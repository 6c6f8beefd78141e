"""`loadtest run` as a user runs it: real Ray, real simulator processes, real Locust, real Parquet."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.long_summary import SummaryView
from analysis.reader import read_requests
from contract.parts import replaced_by
from contract.records import STATUSES
from tests.conftest import DATA, ROOT, loadtest, pid_alive

pytestmark = pytest.mark.e2e
MODES = ["baseline", "draft", "ngram"]


def _run_until(argv: list[str], run_dir, writers: int, act) -> tuple[subprocess.Popen, str]:
    """Start `loadtest run`, wait until `writers` workers have written baseline part files, call
    `act(proc)`, and return the finished process and its output."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while len({p.name.split("-")[1] for p in (run_dir / "requests" / "mode=baseline").glob("part-*")}) < writers:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.2)
        act(proc)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, output


def _server_pids(manifest: dict) -> list[int]:
    return [r["pid"] for mr in manifest["mode_runs"].values() for r in mr["replicas"]]


def _elapsed_s(line: str) -> int:
    h, m, sec = re.search(r" (\d+):(\d\d):(\d\d) ", line).groups()
    return int(h) * 3600 + int(m) * 60 + int(sec)


def test_run_writes_the_result_contract_and_leaves_no_server(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}  # Ray's default: it says so
    out = loadtest("run", "--scenario", str(DATA / "tiny-mix.toml"), "--fleet", str(DATA / "fast-sim.toml"),
                   "--out", str(tmp_path), "--run-id", "e2e", "--cooldown", "0", timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    run_dir = tmp_path / "e2e"
    assert f"results: {run_dir}/" in out.stdout
    # make run's path (a fleet provisioned here, on the simulator): its first screen says so, and what it models
    assert out.stdout.splitlines()[1].startswith("SIMULATED: these numbers come from loadtest's simulator (a "
                                                 "performance model of "), out.stdout.splitlines()[:3]
    # Ray's own chatter is in the logs, not on the console
    assert "Token authentication" not in out.stdout + out.stderr
    assert "Token authentication is enabled" in (run_dir / "logs" / "ray.log").read_text()
    for mode in MODES:
        assert mode in out.stdout
    assert "speedup" in out.stdout and "p50 / p99" in out.stdout

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["modes"] == MODES and manifest["gate"] == "passed"
    assert len(manifest["scenario"]["sha256"]) == 64 and manifest["versions"]["locust"]
    assert manifest["started_at"] < manifest["ended_at"]
    # each mode's bar shows its own replay time and what was done and sent, not the run's clock
    for mode in MODES:
        bar = next(line for line in out.stdout.splitlines() if line.strip().startswith(f"{mode} ━"))
        assert "16/16 done · 16 sent" in bar and "not sent" not in bar, bar
        mr = manifest["mode_runs"][mode]
        own = (datetime.fromisoformat(mr["ended_at"]) - datetime.fromisoformat(mr["started_at"])).total_seconds()
        assert _elapsed_s(bar) <= own + 1, (bar, own)
    # one file of figures: the per-tenant speedups are summary.parquet's rows, no projection beside it
    assert not (run_dir / "tenant_speedups.parquet").exists() and not (run_dir / "modes.parquet").exists()
    view = SummaryView(pq.read_table(run_dir / "summary.parquet"))
    assert all(view.ratio(m, "speedup_e2e", t) is not None for m in MODES[1:] for t in view.tenants)

    trace = pq.read_table(run_dir / "trace.parquet")
    records = read_requests(run_dir)
    ids = set(trace["request_id"].to_pylist())
    for mode in MODES:
        rows = records.filter(pc.equal(records["mode"], mode))
        assert rows.num_rows == trace.num_rows == 16
        assert set(rows["request_id"].to_pylist()) == ids
        assert set(rows["status"].to_pylist()) <= set(STATUSES)
        ok = rows.filter(pc.equal(rows["status"], "ok"))
        assert ok.num_rows == 16, rows.filter(pc.not_equal(rows["status"], "ok")).to_pylist()
        for r in ok.to_pylist():
            assert r["completion_tokens"] > 0 and sum(r["chunk_tokens"]) == r["completion_tokens"]
            assert len(r["itl_ms"]) == r["n_chunks"] == len(r["chunk_tokens"])
            assert r["ttft_ms"] <= r["e2e_ms"] and r["lateness_ms"] >= 0
        tokens_per_chunk = pc.sum(ok["completion_tokens"]).as_py() / pc.sum(ok["n_chunks"]).as_py()
        # n-gram finds a match in few steps of chat and code (V1 proposes nothing without one)
        least = 1.05 if mode == "ngram" else 1.2
        assert (tokens_per_chunk == 1.0) if mode == "baseline" else (tokens_per_chunk > least), mode
        # Server-side acceptance, scraped from /metrics, agrees with what the client saw per
        # verification pass (every chunk after the first, which comes from prefill).
        server_length = view.get(mode, "mean_acceptance_length", "server")
        passes = pc.sum(ok["n_chunks"]).as_py() - ok.num_rows
        client_len = (pc.sum(ok["completion_tokens"]).as_py() - ok.num_rows) / passes
        if mode == "baseline":
            assert server_length is None
            assert ok["spec_steps"].null_count == 16      # no speculation, no per-request counts
        else:
            if mode == "ngram":   # V1's n-gram verifies drafts only on the steps that found a match
                assert server_length > client_len, mode
            else:
                assert server_length == pytest.approx(client_len, rel=0.05), mode
            assert 0 < view.get(mode, "acceptance_rate", "server") < 1
            # each response's own count (--per-request-spec-decode-metrics summary): the prefill's
            # token, then 1 + accepted per decode step, of which spec_steps verified drafts
            # (none at all for a request none of whose steps drafted, as vLLM)
            for r in ok.to_pylist():
                steps, accepted = r["spec_steps"] or 0, r["spec_accepted_tokens"] or 0
                assert r["n_chunks"] + accepted == r["completion_tokens"], r
                assert steps == r["n_chunks"] - 1 if mode != "ngram" else steps < r["n_chunks"]
                assert sum(r["spec_acceptance_histogram"] or []) == steps
            long = {(r["tenant"], r["metric"], r["statistic"]): r["value"]
                    for r in pq.read_table(run_dir / "summary.parquet").to_pylist() if r["mode"] == mode}
            steps, accepted = pc.sum(ok["spec_steps"]).as_py(), pc.sum(ok["spec_accepted_tokens"]).as_py()
            assert long[("all", "mean_acceptance_length", "requests")] == pytest.approx(1 + accepted / steps)
            assert any(t != "all" and m == "mean_acceptance_length" and st == "requests" for t, m, st in long)
    assert list((run_dir / "server_metrics").glob("mode=*/part-*.parquet"))
    # what each replica's memory held, recorded at start-up: a draft model's weights and KV cost capacity
    memory = {m: manifest["mode_runs"][m]["replicas"][0]["memory"] for m in MODES}
    assert memory["draft"]["proposer_weights_gb_per_gpu"] > 0 == memory["baseline"]["proposer_weights_gb_per_gpu"]
    assert 0 < memory["draft"]["kv_capacity_tokens"] < memory["baseline"]["kv_capacity_tokens"]
    assert "## Memory" in (run_dir / "report.md").read_text()
    # the chunk statistics, read a mode at a time from the records' list columns
    long = pq.read_table(run_dir / "summary.parquet").to_pylist()
    for mode in MODES:
        gaps = [g for r in records.filter(pc.equal(records["mode"], mode)).to_pylist() for g in r["itl_ms"][1:]]
        p99 = next(r["value"] for r in long if (r["mode"], r["tenant"], r["metric"], r["statistic"])
                   == (mode, "all", "itl_chunk_ms", "p99"))
        assert p99 == pytest.approx(float(np.percentile(np.array(gaps, dtype=np.float32), 99)), rel=1e-5)
    for mode in MODES:  # the client's report on itself
        client = manifest["mode_runs"][mode]["client"]
        assert client["lateness_ms"]["count"] == 16 and client["client_limited"] in (True, False)

    for pid in _server_pids(manifest):
        assert not pid_alive(pid), f"server {pid} outlived the run"


@pytest.mark.parametrize(("sig", "fleet"), [(signal.SIGINT, "own"), (signal.SIGTERM, "default"),
                                           (signal.SIGINT, "held")],
                         ids=["ctrl-c-own-fleet", "sigterm-default-fleet", "ctrl-c-held-fleet"])
def test_a_signal_stops_gracefully_and_keeps_every_record(tmp_path, sig, fleet, request):
    """A fleet of the run's own (fast-sim, or the built-in default, local-sim), which it must tear
    down, and a fleet held up by `cluster up` (`--endpoints`), which it must leave running."""
    held = request.getfixturevalue("world_fleet") if fleet == "held" else None
    fleet = {"own": ["--fleet", str(DATA / "fast-sim.toml")], "default": [],
             "held": ["--endpoints", str(held.state) if held else ""]}[fleet]
    argv = [sys.executable, "-m", "loadtest", "run", "--scenario", str(DATA / "tiny-mix.toml"), *fleet,
            "--modes", "baseline,draft", "--mode-order", "turns", "--requests", "150", "--out", str(tmp_path),
            "--run-id", "stop"]   # in turns: a stop during the first mode leaves the second never started
    run_dir = tmp_path / "stop"
    proc, output = _run_until(argv, run_dir, 1, lambda p: p.send_signal(sig))
    assert proc.returncode == 130, output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert manifest["mode_runs"]["baseline"]["end"] == "interrupted"
    bars = {line.split()[0]: line for line in output.splitlines() if "━" in line}
    unsent = re.search(r"· ([\d,]+) not sent", bars["baseline"])
    assert "interrupted:" in bars["baseline"] and unsent, bars
    assert "waiting" in bars["draft"] and "-:--:--" in bars["draft"], bars  # never started: no time
    said = " ".join(output.split())   # the console's and report.md's note on what the stop left out
    assert "interrupted (stopped before its trace ended)" in said and "never started: draft" in said, output
    assert "never started: draft" in (run_dir / "report.md").read_text()
    assert "arrivals lasted" not in said and "replay more requests" not in said, output
    records = read_requests(run_dir)
    assert records.filter(pc.equal(records["status"], "not_sent")).num_rows == int(unsent.group(1).replace(",", ""))
    assert set(records["mode"].to_pylist()) == {"baseline"}  # the second mode never started
    assert records.num_rows == 150 and len(set(records["request_id"].to_pylist())) == 150
    statuses = set(records["status"].to_pylist())
    assert "not_sent" in statuses and statuses <= set(STATUSES)
    for pid in _server_pids(manifest):
        if held:
            assert pid_alive(pid), f"the held fleet's server {pid} was stopped by an interrupted run against it"
        else:
            assert not pid_alive(pid), f"server {pid} outlived the interrupted run"


def test_a_lost_worker_is_noticed_and_its_share_recorded(tmp_path, world_fleet):
    argv = [sys.executable, "-m", "loadtest", "run", "--scenario", str(DATA / "tiny-mix.toml"), "--endpoints",
            str(world_fleet.state), "--modes", "baseline", "--requests", "180", "--workers", "2",
            "--out", str(tmp_path), "--run-id", "lost"]
    run_dir = tmp_path / "lost"
    pids: list[int] = []

    def kill_a_worker(_proc) -> None:
        pids.extend(json.loads((run_dir / "manifest.json").read_text())["mode_runs"]["baseline"]["locust_pids"])
        assert len(pids) == 3  # master, two workers
        os.kill(pids[2], signal.SIGKILL)

    proc, output = _run_until(argv, run_dir, 2, kill_a_worker)
    assert proc.returncode == 0, output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["mode_runs"]["baseline"]["end"] == "worker_lost"
    records = read_requests(run_dir)
    assert records.num_rows == 180 and len(set(records["request_id"].to_pylist())) == 180
    lost = records.filter(pc.is_in(records["status"], pa.array(["not_sent", "error"])))
    assert lost.num_rows > 0
    assert all("lost" in e for e in lost["error"].to_pylist())
    assert set(lost["status"].to_pylist()) <= {"not_sent", "error"}
    folder = run_dir / "requests" / "mode=baseline"   # its parts, compacted into one file when the replay ended
    assert [p.name for p in folder.iterdir()] == ["part-compact-00000.parquet"]
    assert "master" in {name.split("-")[1] for name in replaced_by(folder / "part-compact-00000.parquet")}
    for pid in pids:
        assert not pid_alive(pid)


def test_a_simulator_fleet_replays_every_mode_at_once_by_default(tmp_path):
    # a fleet of its own that the machine holds at once, on no shared processor: the modes side by side
    out = loadtest("run", "--scenario", str(DATA / "tiny-mix.toml"), "--fleet", str(DATA / "fast-sim.toml"),
                   "--modes", "baseline,ngram", "--workers", "1", "--out", str(tmp_path),
                   "--run-id", "par", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    manifest = json.loads((tmp_path / "par" / "manifest.json").read_text())
    assert manifest["mode_order"].startswith("parallel")
    runs = manifest["mode_runs"]
    assert runs["baseline"]["started_at"] < runs["ngram"]["ended_at"]
    assert runs["ngram"]["started_at"] < runs["baseline"]["ended_at"]  # they overlapped
    records = read_requests(tmp_path / "par")
    for mode in ("baseline", "ngram"):
        assert records.filter(pc.equal(records["mode"], mode)).num_rows == 16


def test_a_replica_that_crashes_mid_run_is_reported_and_the_run_goes_on(tmp_path):
    out = loadtest("run", "--scenario", str(DATA / "tiny-mix.toml"), "--fleet", str(DATA / "crashing-sim.toml"),
                   "--requests", "120", "--workers", "1", "--timeout", "20", "--out", str(tmp_path),
                   "--run-id", "crash", timeout=300)
    # the run completes, and its error gate fails: most of the mode's requests failed
    assert out.returncode == 1, out.stdout + out.stderr
    assert "replica baseline-0 exited with code 1 during the run" in out.stdout
    assert "gate failed: baseline:" in out.stdout
    manifest = json.loads((tmp_path / "crash" / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["gate"] == "failed"
    replica = manifest["mode_runs"]["baseline"]["replicas"][0]
    assert replica["exit_code"] == 1 and not pid_alive(replica["pid"])
    records = read_requests(tmp_path / "crash")
    statuses = records["status"].to_pylist()
    assert records.num_rows == 120 and "ok" in statuses and "error" in statuses
    assert {k for k, s in zip(records["error_kind"].to_pylist(), statuses, strict=True) if s == "error"} <= {
        "connection", "incomplete_stream"}
