"""The fault matrix's server-side rows (docs/reliability.md): `loadtest run` against `loadtest sim`
processes with injected faults, through --endpoints. Each checks what a user sees: the exit code,
exactly one record per scheduled request, the errors classified by kind, what the manifest says,
and that none of the replay's processes outlived it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import requests

from analysis.reader import read_requests
from tests.conftest import DATA, ROOT, cli, finished, pid_alive, sim_server

pytestmark = pytest.mark.e2e
TP4 = ("--tensor-parallel-size", "4", "--served-model-name", "m")
N = 60   # tiny-mix at 12 requests/s: about 5 s of arrivals


def _run(url: str, tmp_path, run_id: str, *extra: str):
    out = cli("run", "--endpoints", f"baseline={url}", "--scenario", str(DATA / "tiny-mix.toml"),
              "--requests", str(N), "--out", str(tmp_path), "--run-id", run_id, *extra)
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


@pytest.mark.parametrize(("fault", "kind"), [("malformed=0.3", "malformed_stream"), ("drop=0.3", "connection"),
                                           ("no-done=0.3", "incomplete_stream")],
                         ids=["malformed-chunk", "connection-reset", "no-done"])
def test_a_broken_stream_is_one_error_of_its_own_kind_and_the_run_goes_on(tmp_path, fault, kind):
    """A malformed chunk, a connection reset mid-stream, a stream closed without `[DONE]`: each
    such request is one `error` of its kind (the others `ok`), the gate fails naming the kind, the
    manifest says the run completed with those counts, and no Locust process is left (_run)."""
    with sim_server(*TP4, "--fault", fault, "--seed", "3") as url:
        out, manifest, records = _run(url, tmp_path, "broken")
    outcomes = _outcomes(records)
    assert set(outcomes) == {"ok", f"error/{kind}"} and outcomes[f"error/{kind}"] > 5, outcomes
    assert out.returncode == 1 and f"error/{kind}" in out.stdout and "Traceback" not in out.stderr, out.stdout
    assert manifest["status"] == "completed" and manifest["checks"][0]["kinds"] == {
        f"error/{kind}": outcomes[f"error/{kind}"]}
    for r in records.filter(pc.equal(records["status"], "error")).to_pylist():   # broken after it began
        assert r["n_chunks"] >= 1 and r["ttft_ms"] is not None and r["error"], r
        if kind == "connection":   # the message says how far it got
            assert r["error"].startswith(f"the connection broke after {r['n_chunks']} chunk(s): "), r["error"]


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
    # 1 s of 503s every 3 s: a request refused in one waits 1 s, so it is resent in the 2 s gap after it
    with sim_server(*TP4, "--fault", "burst=3:1:503,retry-after=1") as url:
        out, _, records = _run(url, tmp_path, "honour", "--retry-after", "honour", "--timeout", "20")
    assert out.returncode == 0, out.stdout + out.stderr
    assert set(records["status"].to_pylist()) == {"ok"}
    retried = records.filter(pc.greater(records["attempts"], 1)).to_pylist()
    assert len(retried) > 5   # about 5 s of arrivals at 12/s hold at least one burst
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


def _start(url: str, tmp_path, run_id: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "loadtest", "run", "--endpoints", f"baseline={url}", "--scenario",
                             str(DATA / "tiny-mix.toml"), "--out", str(tmp_path), "--run-id", run_id, *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(ROOT)})  # Ray's workers too


def _wait_for(proc: subprocess.Popen, ready, what: str, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while not ready():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, f"no {what} within {limit_s:g} s"
        time.sleep(0.2)


def _locust_pids(run_dir) -> list[int]:
    try:
        return json.loads((run_dir / "manifest.json").read_text())["mode_runs"]["baseline"]["locust_pids"]
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        return []


def _running(url: str) -> float:
    """Requests the server is working on, from its vLLM gauge."""
    for line in requests.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith("vllm:num_requests_running"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_killed_locust_master_stops_its_workers_and_the_run_says_what_was_recorded(tmp_path):
    run_dir = tmp_path / "master"
    parts = run_dir / "requests" / "mode=baseline"
    with sim_server(*TP4) as url:
        proc = _start(url, tmp_path, "master", "--requests", "120", "--workers", "2")
        both = lambda: len({p.name.split("-")[1] for p in parts.glob("part-w*")}) == 2  # noqa: E731
        _wait_for(proc, both, "records of both workers")
        pids = _locust_pids(run_dir)
        assert len(pids) == 3   # the master, then its two workers
        os.kill(pids[0], signal.SIGKILL)
        killed = time.monotonic()
        output = finished(proc)[0]
    assert proc.returncode == 3, output
    assert time.monotonic() - killed < 60, output   # the workers stopped by themselves, in seconds
    line = ("the Locust master of baseline was killed by SIGKILL before the replay ended; the records hold 120 of "
            "the 120 requests scheduled")
    assert line in output and "Traceback" not in output, output
    records = read_requests(run_dir)   # each worker recorded its whole shard: what it sent, and not_sent
    assert records.num_rows == 120 and len(set(records["request_id"].to_pylist())) == 120
    assert {"ok", "not_sent"} <= set(records["status"].to_pylist()) <= {"ok", "not_sent", "error"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and line in manifest["reason"]
    assert manifest["mode_runs"]["baseline"]["end"] == "crashed" and manifest["mode_runs"]["baseline"]["records"] == 120
    for pid in pids:
        assert not pid_alive(pid), f"Locust process {pid} outlived the run"


@pytest.mark.parametrize("workers", [("1",), ("2",), ("2", "--ray-workers")], ids=["lone", "master", "ray"])
def test_a_second_sigint_stops_at_once_and_still_records_every_request(tmp_path, workers):
    """The second signal reaches every worker, on Ray nodes too (the command passes it on: a master
    has quit after the first)."""
    run_dir = tmp_path / "twice"
    # every stream pauses 30 s: a graceful stop would wait its 10 s grace for the requests in flight
    with sim_server(*TP4, "--fault", "stall=1:30") as url:
        proc = _start(url, tmp_path, "twice", "--requests", "60", "--timeout", "60", "--workers", *workers)
        _wait_for(proc, lambda: _running(url) >= 5, "requests in flight")   # stalled
        manifest = json.loads((run_dir / "manifest.json").read_text())["mode_runs"]["baseline"]
        pids = [*manifest["locust_pids"], *(w["pid"] for w in manifest.get("ray_workers") or [])]
        in_flight = _running(url)   # at least 5: each of them must end interrupted, none lost
        proc.send_signal(signal.SIGINT)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        second = datetime.now(UTC)
        output = finished(proc)[0]
    assert proc.returncode == 130, output
    assert "stopping gracefully" in output and "SIGINT: stopping now" in output and "Traceback" not in output, output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["mode_runs"]["baseline"]["end"] == "interrupted"
    assert manifest["mode_runs"]["baseline"]["records"] == 60   # what is on disk, not a master's last count
    stopped = datetime.fromisoformat(manifest["mode_runs"]["baseline"]["ended_at"])
    assert (stopped - second).total_seconds() < 8, output   # well inside the 10 s grace it did not wait
    records = read_requests(run_dir)
    assert records.num_rows == 60 and len(set(records["request_id"].to_pylist())) == 60
    outcomes = _outcomes(records)
    assert set(outcomes) == {"error/interrupted", "not_sent"}, outcomes
    assert outcomes["error/interrupted"] >= in_flight >= 5, (in_flight, outcomes)
    for pid in pids:
        assert not pid_alive(pid), f"Locust process {pid} outlived the run"


@pytest.mark.rows_may_be_lost("a third signal kills the replay: what it had not written is lost, as it says")
def test_a_third_sigint_kills_the_replay_and_is_still_an_interrupt(tmp_path):
    """A third signal kills the Locust processes, as it says: what they had not written is lost,
    and the run is interrupted (exit 130), not a crash (exit 3)."""
    run_dir = tmp_path / "thrice"
    with sim_server(*TP4, "--fault", "stall=1:30") as url:
        proc = _start(url, tmp_path, "thrice", "--requests", "60", "--timeout", "60")
        _wait_for(proc, lambda: _running(url) >= 5, "requests in flight")
        pids = _locust_pids(run_dir)
        for _ in range(3):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
        output = finished(proc)[0]
    assert proc.returncode == 130, output
    assert "Traceback" not in output and "killed by SIGKILL" not in output, output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["mode_runs"]["baseline"]["end"] == "interrupted", manifest
    # the end's recount: the rows the kill lost are counted, in the manifest and on the console
    lost = 60 - (read_requests(run_dir).num_rows if (run_dir / "requests").is_dir() else 0)
    assert manifest["mode_runs"]["baseline"]["unrecorded"] == lost, manifest
    assert manifest["unrecorded"] == ({"baseline": lost} if lost else {}), manifest
    if lost:
        said = f"{lost} scheduled requests have no record (baseline: {lost})"
        assert said in manifest["reason"] and said in output, (manifest["reason"], output)
    for pid in pids:
        assert not pid_alive(pid), f"Locust process {pid} outlived the run"


@pytest.mark.rows_may_be_lost("the test removes a part file the replay wrote")
def test_a_replay_whose_records_lost_rows_never_ends_completed(tmp_path):
    """The end's recount: a part file removed while the replay runs (the replay itself says it
    completed) leaves rows with no record; the run says how many, in one line and in the
    manifest, ends `failed` and exits 3."""
    run_dir = tmp_path / "recount"
    parts = run_dir / "requests" / "mode=baseline"
    with sim_server(*TP4) as url:
        proc = _start(url, tmp_path, "recount", "--requests", str(N))
        _wait_for(proc, lambda: any(parts.glob("part-*.parquet")), "a part file")
        first = min(parts.glob("part-*.parquet"))
        removed = pq.read_metadata(first).num_rows
        first.unlink()
        output = finished(proc)[0]
    assert proc.returncode == 3, output
    line = f"baseline: the records hold {N - removed} of the {N} requests scheduled, {removed} have no record"
    assert line in output and "Traceback" not in output, output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and line in manifest["reason"], manifest
    assert manifest["mode_runs"]["baseline"]["unrecorded"] == removed == manifest["unrecorded"]["baseline"]
    assert manifest["mode_runs"]["baseline"]["end"] == "failed"


@pytest.mark.parametrize("workers", ["1", "2"], ids=["lone", "master"])
def test_a_signal_while_the_replay_is_starting_still_records_every_request(tmp_path, workers):
    """Locust installs its SIGTERM handler late (a master: after its workers connect); the command
    holds the signal back until the process says it is ready, so nothing dies unrecorded."""
    run_dir = tmp_path / "early"
    with sim_server(*TP4) as url:
        proc = _start(url, tmp_path, "early", "--requests", "40", "--workers", workers)
        _wait_for(proc, lambda: bool(_locust_pids(run_dir)), "Locust process")
        pids = _locust_pids(run_dir)
        proc.send_signal(signal.SIGINT)
        output = finished(proc)[0]
    assert proc.returncode == 130 and "Traceback" not in output, output
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
    records = read_requests(run_dir)
    assert records.num_rows == 40 and len(set(records["request_id"].to_pylist())) == 40
    assert set(records["status"].to_pylist()) <= {"ok", "not_sent", "error"}
    for pid in pids:
        assert not pid_alive(pid), f"Locust process {pid} outlived the run"
