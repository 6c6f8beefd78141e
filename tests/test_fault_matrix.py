"""The fault matrix's server-side rows (docs/reliability.md): `loadtest run` against `loadtest sim`
processes with injected faults, through --endpoints. Each checks what a user sees: the exit code,
exactly one record per scheduled request, the errors classified by kind, what the manifest says,
and that none of the replay's processes outlived it."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.compute as pc
import pytest

from analysis.reader import read_requests
from tests.conftest import DATA, loadtest, pid_alive, sim_server

pytestmark = pytest.mark.e2e
TP4 = ("--tensor-parallel-size", "4", "--served-model-name", "m")
N = 60   # tiny-mix at 12 requests/s: about 5 s of arrivals


def _run(url: str, tmp_path, run_id: str, *extra: str):
    out = loadtest("run", "--endpoints", f"baseline={url}", "--scenario", str(DATA / "tiny-mix.toml"),
                   "--requests", str(N), "--out", str(tmp_path), "--run-id", run_id, *extra, timeout=240)
    run_dir = tmp_path / run_id
    assert (run_dir / "manifest.json").is_file(), out.stdout + out.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    records = read_requests(run_dir)
    assert records.num_rows == N and len(set(records["request_id"].to_pylist())) == N  # exactly one each
    for pid in manifest["mode_runs"]["baseline"]["locust_pids"]:
        assert not pid_alive(pid), f"Locust process {pid} outlived the run"
    return out, manifest, records


def _outcomes(records) -> Counter:
    return Counter(f"{s}/{k}" if k else s for s, k in zip(records["status"].to_pylist(),
                                                          records["error_kind"].to_pylist(), strict=True))


def test_streams_that_stall_past_the_timeout_are_timeouts_that_say_where(tmp_path):
    with sim_server(*TP4, "--fault", "stall=0.4:30", "--seed", "5") as url:  # 40% of streams pause 30 s
        out, manifest, records = _run(url, tmp_path, "stall", "--timeout", "3")
    outcomes = _outcomes(records)
    assert set(outcomes) == {"ok", "timeout/stream"} and outcomes["timeout/stream"] > 5, outcomes
    # past --max-errors: the gate fails, naming the kind
    assert out.returncode == 1 and "timeout/stream" in out.stdout, out.stdout + out.stderr
    stalled = records.filter(pc.equal(records["status"], "timeout")).to_pylist()
    for r in stalled:   # the chunks before the stall are kept, and the message says how far it got
        assert r["n_chunks"] >= 1 and r["error"].endswith("then no end of the stream within 3 s"), r["error"]
        assert r["e2e_ms"] is not None and r["e2e_ms"] < 3000
    assert manifest["status"] == "completed" and manifest["checks"][0]["kinds"] == {
        "timeout/stream": outcomes["timeout/stream"]}


def test_slow_headers_are_measured_and_past_the_timeout_are_timeouts_of_their_own(tmp_path):
    slow = ("--fault", "slow-headers=0.5:2.5", "--seed", "2")   # half the answers start 2.5 s late
    with sim_server(*TP4, *slow) as url:
        cut, _, cut_records = _run(url, tmp_path, "cut", "--timeout", "1.5", "--max-errors", "100%")
    with sim_server(*TP4, *slow) as url:
        waited, _, waited_records = _run(url, tmp_path, "waited", "--timeout", "30")
    outcomes = _outcomes(cut_records)
    assert set(outcomes) == {"ok", "timeout/headers"} and outcomes["timeout/headers"] > 10, outcomes
    assert cut.returncode == 0, cut.stdout + cut.stderr
    late = cut_records.filter(pc.equal(cut_records["status"], "timeout")).to_pylist()
    assert all(r["error"] == "no response headers within 1.5 s" and r["n_chunks"] == 0 for r in late)
    # within the timeout, a slow start is what the user waits for: it is in the TTFT
    assert waited.returncode == 0 and set(waited_records["status"].to_pylist()) == {"ok"}, waited.stdout
    ttft = waited_records["ttft_ms"].to_pylist()
    assert sum(t >= 2500 for t in ttft) > 10 and sum(t < 1000 for t in ttft) > 10, sorted(ttft)


def test_429_bursts_are_recorded_with_their_retry_after_by_default(tmp_path):
    # every 2 s after start, 1 s of 429s, each saying Retry-After: 1
    with sim_server(*TP4, "--fault", "burst=2:1:429,retry-after=1") as url:
        out, manifest, records = _run(url, tmp_path, "burst")
    outcomes = _outcomes(records)
    assert set(outcomes) == {"ok", "error/http"} and outcomes["error/http"] > 10, outcomes
    assert out.returncode == 1 and "error/http" in out.stdout, out.stdout + out.stderr
    refused = records.filter(pc.equal(records["status"], "error")).to_pylist()
    assert all(r["http_status"] == 429 and r["retry_after_s"] == 1.0 and r["attempts"] == 1 for r in refused)
    assert "TooManyRequestsError" in refused[0]["error"]
    assert set(records["attempts"].to_pylist()) == {1}
    assert manifest["checks"][0]["kinds"] == {"error/http": outcomes["error/http"]}


def test_503_bursts_with_retry_after_are_waited_out_when_honoured(tmp_path):
    with sim_server(*TP4, "--fault", "burst=2:1:503,retry-after=1") as url:
        out, _, records = _run(url, tmp_path, "honour", "--retry-after", "honour", "--timeout", "20")
    assert out.returncode == 0, out.stdout + out.stderr
    assert set(records["status"].to_pylist()) == {"ok"}
    retried = records.filter(pc.greater(records["attempts"], 1)).to_pylist()
    assert len(retried) > 10
    for r in retried:   # it waited the second it was told, and the wait is in what the user saw
        assert r["retry_after_s"] == 1.0 and r["attempts"] == 2 and r["ttft_ms"] >= 1000, r
    assert records.filter(pc.equal(records["attempts"], 1))["retry_after_s"].null_count == N - len(retried)


def test_honoured_retries_stop_at_max_retries_and_at_the_timeout(tmp_path):
    # always 503 with Retry-After: 0.2: resent --max-retries times, then recorded as the 503 it is
    always = ("--fault", "http-error=1:503,retry-after=0.2")
    with sim_server(*TP4, *always) as url:
        out, _, records = _run(url, tmp_path, "giveup", "--retry-after", "honour", "--max-retries", "2")
    with sim_server(*TP4, *always) as url:
        late, _, late_records = _run(url, tmp_path, "late", "--retry-after", "honour", "--timeout", "0.5")
    assert out.returncode == 1 and set(_outcomes(records)) == {"error/http"}, out.stdout
    assert set(records["attempts"].to_pylist()) == {3} and set(records["http_status"].to_pylist()) == {503}
    # a wait that would pass the timeout is not taken: at most two waits of 0.2 s fit in 0.5 s
    assert late.returncode == 1 and set(late_records["attempts"].to_pylist()) <= {2, 3}, late.stdout
