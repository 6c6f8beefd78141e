"""`loadtest soak` as a scheduler runs it: a soak that misses an impossible SLO exits 1 and names
the window; one killed with SIGKILL (the command and its Locust processes, as a crashed machine
would) and resumed ends with every scheduled request recorded once. Beside them, the streamed
trace against the one built whole, and the drift checks against series made to drift or not."""

from __future__ import annotations

import collections
import json
import os
import signal
import time

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from analysis.soak import LATENCY_DRIFT, drift, error_bursts, slo_windows
from loadtest.replay.shards import iter_shard, shard_size, trace_rows
from scenarios.spec import load_scenario
from scenarios.stream import TraceStream
from scenarios.trace import build_trace, write_trace
from tests.conftest import DATA, cli, loadtest, loadtest_process, pid_alive

SOAK = str(DATA / "tiny-soak.toml")


def _records(run_dir) -> list[dict]:
    return ds.dataset(run_dir / "requests", format="parquet", partitioning="hive").to_table(
        columns=["mode", "request_id", "status", "error_kind", "scheduled_ns"]).to_pylist()


def _trace_ids(run_dir) -> list[str]:
    return ds.dataset(run_dir / "trace", format="parquet").to_table(columns=["request_id"])["request_id"].to_pylist()


def test_the_streamed_trace_is_the_trace_built_whole_and_shards_the_same(tmp_path):
    scenario, _raw = load_scenario(SOAK)
    stream = TraceStream(scenario, "sha", 40.0, 10.0)
    folder = tmp_path / "trace"
    stream.start(folder)
    for k in range(stream.parts):
        assert stream.write(folder, k) and not stream.write(folder, k)   # a part is written once
    whole = build_trace(scenario, duration=40.0)
    parts = ds.dataset(folder, format="parquet").to_table()
    assert parts.column("request_id").to_pylist() == whole.column("request_id").to_pylist()
    assert parts.column("messages").to_pylist() == whole.column("messages").to_pylist()
    assert trace_rows(folder) == whole.num_rows
    write_trace(whole, tmp_path / "whole.parquet", "tiny-soak", "sha")
    for first in (0, 57):
        for index in range(3):
            a = [(i, r["request_id"]) for i, r in iter_shard(folder, index, 3, first=first)]
            b = [(i, r["request_id"]) for i, r in iter_shard(tmp_path / "whole.parquet", index, 3, first=first)]
            assert a == b and len(a) == shard_size(whole.num_rows, index, 3, first)
            assert all(i >= first and i % 3 == index for i, _ in a)


def test_a_drift_is_found_where_it_is_and_a_day_shaped_load_is_not_one():
    starts = np.arange(24) * 300.0
    load = 4 + 2 * np.sin(2 * np.pi * starts / 7200)          # two days of load in 2 h
    rng = np.random.default_rng(5)
    by_load = 20 + 3 * load + rng.normal(0, 0.2, 24)          # latency that follows the load, nothing else
    assert drift("latency_trend", "m", by_load, starts, load, 300, LATENCY_DRIFT, True, "TPOT p50") is None
    leaking = by_load + np.linspace(0, 15, 24)                # the same, plus a leak
    found = drift("latency_trend", "m", leaking, starts, load, 300, LATENCY_DRIFT, True, "TPOT p50")
    assert found is not None and found.first > 0 and "TPOT p50 drifted +" in found.message
    assert found.start_s == starts[found.first] and "0:" in found.message
    kv = 0.2 + np.linspace(0, 0.3, 24) + rng.normal(0, 0.01, 24)
    grew = drift("kv_growth", "m", kv, starts, load, 300, 0.1, False, "KV-cache use")
    assert grew is not None and grew.check == "kv_growth"
    errors = np.zeros(24, dtype=int)
    errors[9:11] = [30, 12]
    bursts = error_bursts("m", errors, np.full(24, 100), starts, 300)
    assert [(b.first, b.last) for b in bursts] == [(9, 10)] and "0:45:00-0:55:00" in bursts[0].message


def test_slo_windows_are_the_p99_numpy_gives_over_each_window():
    rng = np.random.default_rng(2)
    offsets = np.sort(rng.uniform(0, 100, 2000))
    ttft = np.where((offsets > 40) & (offsets < 60), 900.0, 100.0) + rng.normal(0, 5, 2000)
    records = pa.table({"mode": ["m"] * 2000, "tenant": ["t"] * 2000, "status": ["ok"] * 2000, "offset_s": offsets,
                        "ttft_ms": ttft, "tpot_ms": np.full(2000, 10.0), "e2e_ms": np.full(2000, 500.0)})
    found = slo_windows(records, 10.0, 5.0, 100.0, {"t": {"slo_ttft_p99_ms": 500.0}})
    assert len(found) == 1
    f = found[0]
    starts = np.arange(0, 95, 5.0)
    p99 = [np.percentile(ttft[(offsets >= s) & (offsets < s + 10)], 99) for s in starts]
    missed = [i for i, p in enumerate(p99) if p > 500]
    assert (f.first, f.last) == (missed[0], missed[-1]) and f.start_s == starts[missed[0]]
    assert "0:00:35-0:01:05" in f.message


@pytest.mark.e2e
def test_a_soak_with_an_impossible_slo_exits_1_and_names_the_window(tmp_path, world_fleet):
    out = cli("soak", "--scenario", SOAK, "--endpoints", str(world_fleet.state), "--modes", "baseline", "--duration",
              "20s", "--window", "10s", "--slo", "ttft_p99_ms=1", "--out", str(tmp_path), "--run-id", "s1")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    assert "slo: baseline / chat: TTFT p99 above its 1 ms target over 0:00:" in out.stdout
    run_dir = tmp_path / "s1"
    findings = json.loads((run_dir / "findings.json").read_text())
    assert findings and all(f["check"] == "slo" and f["end_s"] > f["start_s"] for f in findings)
    assert "TTFT p99 above its 1 ms target" in (run_dir / "soak.md").read_text()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["gate"] == "failed" and manifest["soak"]["findings"] == len(findings)
    ids = collections.Counter(r["request_id"] for r in _records(run_dir))
    assert sorted(ids) == sorted(_trace_ids(run_dir)) and set(ids.values()) == {1}


def test_bad_soak_input_is_one_line_and_exit_2(tmp_path):
    for argv, words in ((["--duration", "10m", "--window", "1h"], "--window"),
                        (["--resume", str(tmp_path / "nothing")], "--resume"),
                        (["--duration", "soon"], "--duration")):
        out = cli("soak", "--scenario", SOAK, *argv, "--out", str(tmp_path))
        assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("fleet", ["own", "held"])
def test_a_soak_killed_with_sigkill_and_resumed_records_every_request_once(tmp_path, fleet, request):
    """On a fleet of its own (the resume provisions it again from the fleet file, and the kill
    leaves no replica or Ray process behind: the session's rules) and on one held by `cluster up`
    (the resume uses the state file again)."""
    where = (["--fleet", str(DATA / "fast-sim.toml")] if fleet == "own"
             else ["--endpoints", str(request.getfixturevalue("world_fleet").state)])
    argv = ("soak", "--scenario", SOAK, *where, "--modes", "baseline,ngram",
            "--window", "10s", "--flush-every", "2s", "--out", str(tmp_path), "--run-id", "k1")
    run_dir = tmp_path / "k1"
    with loadtest_process(*argv) as proc:
        deadline = time.monotonic() + 120
        while len(list(run_dir.glob("requests/mode=*/part-*.parquet"))) < 6:   # a few flushes of each mode
            assert proc.poll() is None and time.monotonic() < deadline, "the soak never wrote its records"
            time.sleep(0.5)
        pids = [p for mr in json.loads((run_dir / "manifest.json").read_text())["mode_runs"].values()
                for p in mr.get("locust_pids", [])]
        assert pids
        killed_ns = time.time_ns()
        for pid in pids:   # the machine goes down: the command and its Locust processes at once
            os.kill(pid, signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pid in pids:
            while pid_alive(pid):
                time.sleep(0.1)
    before = _records(run_dir)
    assert 0 < len(before) < 2 * len(_trace_ids(run_dir))
    # a fleet of its own is provisioned again on Ray: in a process of its own
    out = (loadtest if fleet == "own" else cli)("soak", "--resume", str(run_dir), timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "resumed" in out.stdout
    records = _records(run_dir)
    for mode in ("baseline", "ngram"):
        ids = collections.Counter(r["request_id"] for r in records if r["mode"] == mode)
        assert sorted(ids) == sorted(_trace_ids(run_dir)), f"{mode}: a request missing"
        assert set(ids.values()) == {1}, f"{mode}: a request recorded twice"
    statuses = collections.Counter((r["status"], r["error_kind"]) for r in records)
    assert set(statuses) <= {("ok", None), ("error", "worker_lost")}, statuses
    assert any(r["scheduled_ns"] > killed_ns for r in records), "the rest was sent after the resume"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    stretches = manifest["soak"]["stretches"]
    assert len(stretches) == 2 and stretches[1]["resumed"] and manifest["status"] == "completed"


def test_resume_records_lost_outcomes_once_and_drops_the_stops_not_sent(tmp_path):
    """Rows 0-12 sent with row 5's record lost, rows 13-15 recorded not_sent by the stop: the soak goes
    on from row 13, row 5 becomes an unknown outcome, and the stop's not_sent records are gone."""
    from concurrent.futures import ThreadPoolExecutor

    from analysis.reader import read_requests
    from contract.manifest import Manifest
    from contract.records import REQUEST_SCHEMA, RequestRecord
    from loadtest.engine.soak import Soak, _go_on, _recorded
    from loadtest.options.replaying import SoakOptions
    from loadtest.request.sink import ParquetSink

    scenario, _raw = load_scenario(SOAK)
    stream = TraceStream(scenario, "sha", 40.0, 10.0)
    stream.start(tmp_path / "trace")
    for k in range(stream.parts):
        stream.write(tmp_path / "trace", k)
    trace = ds.dataset(tmp_path / "trace", format="parquet").to_table().to_pylist()
    sink = ParquetSink(tmp_path / "requests" / "mode=m", "w0", REQUEST_SCHEMA, ThreadPoolExecutor(1))
    for i, row in enumerate(trace[:16]):
        if i == 5:
            continue
        status = "not_sent" if i >= 13 else "ok"
        sink.add(RequestRecord(run_id="r", mode="m", worker="w0", tenant=row["tenant"], request_id=row["request_id"],
                               scheduled_ns=10**18 + round(row["offset_s"] * 1e9), offset_s=row["offset_s"],
                               status=status, sent_ns=None if status == "not_sent" else 1).as_row())
    sink.close()
    soak = Soak(tmp_path, Manifest("r", {}, {}, ["m"], 0, stream.info.rows), stream, None, SoakOptions(), {})
    where = _go_on(soak, "m", _recorded(tmp_path), 1)
    assert where == {"first_row": 13, "resume_at_s": trace[12]["offset_s"]}
    assert soak.resumed_unknown == 1 and soak.dropped == 3
    rows = read_requests(tmp_path, columns=["request_id", "status", "error_kind"]).to_pylist()
    assert sorted(r["request_id"] for r in rows) == [r["request_id"] for r in trace[:13]]
    assert [r for r in rows if r["status"] != "ok"] == [
        {"request_id": trace[5]["request_id"], "status": "error", "error_kind": "worker_lost"}]


def test_a_stopped_shard_gives_its_rest_without_waiting_for_parts_not_written(tmp_path):
    """Ctrl-C at hour 1 of 8: the rows of parts not yet written are recorded from the index, at once."""
    from loadtest.replay.shards import ShardRows

    scenario, _raw = load_scenario(SOAK)
    stream = TraceStream(scenario, "sha", 40.0, 10.0)
    stream.start(tmp_path)
    stream.write(tmp_path, 0)   # parts 1-3 never come
    rows = ShardRows(tmp_path, 1, 2)
    taken = [next(rows) for _ in range(3)]
    started = time.monotonic()
    rest = list(rows.rest())
    assert time.monotonic() - started < 5, "it waited for a part"
    expected = [stream.request_id(i) for i in range(1, stream.info.rows, 2)]
    assert [r["request_id"] for _, r in taken] + [r["request_id"] for _, r in rest] == expected
    assert set(rest[0][1]) == {"request_id", "tenant", "offset_s"}


@pytest.mark.e2e
def test_ctrl_c_early_in_a_long_soak_ends_it_promptly_with_every_request_recorded(tmp_path, world_fleet):
    """SIGINT ten seconds into ten minutes: exit 130 within a minute, not after the rest of the
    schedule; the unsent rest recorded as not_sent from the index (its parts were never written)."""
    argv = ("soak", "--scenario", SOAK, "--endpoints", str(world_fleet.state), "--modes", "baseline",
            "--duration", "10m", "--window", "10s", "--out", str(tmp_path), "--run-id", "c1")
    run_dir = tmp_path / "c1"
    with loadtest_process(*argv) as proc:
        deadline = time.monotonic() + 120
        while not list(run_dir.glob("requests/mode=*/part-*.parquet")):
            assert proc.poll() is None and time.monotonic() < deadline, "the soak never wrote its records"
            time.sleep(0.5)
        time.sleep(5)
        os.kill(proc.pid, signal.SIGINT)
        stopped = time.monotonic()
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 130, out[-3000:]
        assert time.monotonic() - stopped < 60
    assert len(list((run_dir / "trace").glob("part-*.parquet"))) < 60, "the parts were not all written"
    records = _records(run_dir)
    ids = collections.Counter(r["request_id"] for r in records)
    index = ds.dataset(run_dir / "trace" / "_index.parquet").to_table()["request_id"].to_pylist()
    assert sorted(ids) == sorted(index) and set(ids.values()) == {1}
    assert collections.Counter(r["status"] for r in records)["not_sent"] > len(index) // 2
    assert (run_dir / "soak.md").exists()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
