"""Replica faults end to end on local-sim (real Ray, real simulator processes, real Locust): a
replica that never becomes healthy stops the run in one line, and a replica whose server is killed
mid-run is restarted on its port (the fleet's max_restarts) and serves again. Either way no
process is left: the servers are checked by the pids the manifest names, and the Ray processes
the run started by its session (each run is started in a session of its own)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pyarrow.compute as pc
import pytest

from analysis.reader import read_requests
from cluster import FleetError
from cluster.fleet import load_fleet
from contract.records import STATUSES
from tests import invariants
from tests.conftest import DATA, ROOT, cli, finished, loadtest, pid_alive

pytestmark = pytest.mark.e2e


def members(field: str, value: int) -> list[int]:
    """The live processes whose process group (`field` "pgrp") or session ("session") is `value`,
    read from /proc (never by a name)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, _ppid, pgrp, session = (entry / "stat").read_text().rsplit(") ", 1)[1].split()[:4]
        except (OSError, IndexError, ValueError):
            continue
        if int({"pgrp": pgrp, "session": session}[field]) == value and state != "Z":
            out.append(int(entry.name))
    return out


def assert_gone(field: str, value: int) -> None:
    """Every process of that group or session is gone (Ray's head processes stop with
    ray.shutdown: allow a generous while on a loaded machine), else kill them and fail."""
    left = invariants.left_behind(lambda: {pid: "" for pid in members(field, value)})
    assert not left, f"processes of the run's {field} {value} outlived it: {sorted(left)}"


def assert_session_ends(sid: int) -> None:
    """Every process the run started in its own session (Ray's) is gone. Locust's processes lead
    sessions of their own: assert_locust_gone checks them."""
    assert_gone("session", sid)


def assert_locust_gone(manifest: dict) -> None:
    """Each Locust process the manifest names, and its process group, is gone."""
    pids = [pid for mr in manifest["mode_runs"].values() for pid in mr.get("locust_pids") or []]
    assert pids, "the manifest names no Locust process"
    for pid in pids:
        assert not pid_alive(pid), f"Locust process {pid} outlived the run"
        assert_gone("pgrp", pid)


def assert_servers_gone(*pids: int) -> None:
    """Each server and its process group (vLLM's engine process is in it) is gone."""
    for pid in pids:
        assert not pid_alive(pid), f"server {pid} outlived the run"
        assert_gone("pgrp", pid)


def start_run(*args: str) -> subprocess.Popen:
    """`loadtest run ARGS` in a session of its own, stdout and stderr apart."""
    return subprocess.Popen([sys.executable, "-m", "loadtest", "run", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def epoch_ns(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1e9)


def test_a_replica_that_never_becomes_healthy_stops_the_run_in_one_line(tmp_path):
    proc = start_run("--scenario", str(DATA / "tiny-mix.toml"), "--fleet", str(DATA / "never-healthy-sim.toml"),
                     "--requests", "10", "--out", str(tmp_path), "--run-id", "nh")
    try:
        out, err = finished(proc, 300)
    finally:
        assert_session_ends(proc.pid)
    assert proc.returncode == 3, out + err
    run_dir = tmp_path / "nh"
    log = run_dir / "logs" / "baseline-0.log"
    assert "Traceback" not in out + err
    first, *rest = err.splitlines()
    # then the last lines of the replica's log, for its why
    assert rest and rest[0] == "loadtest run: error: last lines of its log:", err
    assert first == (f"loadtest run: error: replica baseline-0 not ready within 8 s (the fleet's startup_timeout_s): "
                     f"still waiting for /health at {first.split(' at ')[1].split()[0]} (last answer: HTTP 503); "
                     f"its log: {log}"), err
    assert log.is_file() and "serving" in log.read_text()

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["reason"].splitlines()[0] == first.split("error: ", 1)[1]
    mr = manifest["mode_runs"]["baseline"]
    # no replay started, so no request was scheduled: no records at all, and the manifest says so
    assert mr["end"] == "not started" and mr["records"] == 0 and mr["started_at"] is None
    assert not (run_dir / "requests").exists()
    (replica,) = mr["replicas"]
    assert replica["label"] == "baseline-0" and replica["log"] == str(log)
    assert replica["healthy_s"] is None and replica["ready_s"] is None and replica["stopped_at"]
    assert_servers_gone(replica["pid"])


def wait_for_replay(proc: subprocess.Popen, manifest_path: Path) -> dict:
    """The manifest once the baseline replay has started (it is rewritten at each stage)."""
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the replay did not start in time"
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError):
            manifest = {}
        mr = manifest.get("mode_runs", {}).get("baseline", {})
        if mr.get("started_at") and mr.get("replicas"):
            return manifest
        time.sleep(0.2)


def test_a_killed_replica_is_restarted_on_its_port_and_serves_again(tmp_path):
    proc = start_run("--scenario", str(DATA / "tiny-mix.toml"), "--fleet", str(DATA / "restarting-sim.toml"),
                     "--requests", "240", "--workers", "1", "--timeout", "20", "--max-errors", "1",
                     "--out", str(tmp_path), "--run-id", "restart")
    run_dir = tmp_path / "restart"
    try:
        before = wait_for_replay(proc, run_dir / "manifest.json")["mode_runs"]["baseline"]["replicas"][0]
        time.sleep(3)   # some requests succeed first
        os.kill(before["pid"], signal.SIGKILL)   # the server this run started, by the pid its manifest names
        out, err = finished(proc, 300)
    finally:
        assert_session_ends(proc.pid)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    replica = manifest["mode_runs"]["baseline"]["replicas"][0]
    (restart,) = replica["restarts"]
    assert restart["old_pid"] == before["pid"] and restart["exit_code"] == -9 and restart["error"] is None
    assert replica["pid"] == restart["pid"] != before["pid"] and replica["url"] == before["url"]
    assert 0 < restart["ready_s"] < 60
    assert (f"replica baseline-0 exited with code -9 during the run (pid {before['pid']}); restarted (1 of 1) as "
            f"pid {restart['pid']}, ready again in ") in out, out
    assert "exit_code" not in replica   # it is running again when the mode ends: not reported dead
    assert "Traceback" not in out + err
    # scrapes failed during the outage, and the server-side view is kept: the restarted server's
    # counters start from 0, and the deltas count the reset
    assert manifest["mode_runs"]["baseline"]["server_metrics"] == "scraped" and "no server-side metrics" not in out

    records = read_requests(run_dir)
    ids = records["request_id"].to_pylist()
    assert records.num_rows == 240 and len(set(ids)) == 240   # every scheduled request, once
    statuses = records["status"].to_pylist()
    assert set(statuses) <= set(STATUSES) and "ok" in statuses and "error" in statuses
    kinds = {k for k, s in zip(records["error_kind"].to_pylist(), statuses, strict=True) if s == "error"}
    assert kinds <= {"connection", "incomplete_stream"}, kinds   # classified, not lumped
    # the gate decides: the outage's errors pass --max-errors 1 (%), so the run completes and fails it
    sent = records.filter(pc.not_equal(records["status"], "not_sent")).num_rows
    assert statuses.count("error") + statuses.count("timeout") > sent / 100
    assert proc.returncode == 1 and manifest["status"] == "completed" and manifest["gate"] == "failed", out + err
    assert "gate failed: baseline:" in out
    after = records.filter(pc.greater_equal(records["sent_ns"], epoch_ns(restart["ready_at"])))
    assert after.num_rows >= 10, "too few requests after the restart to show it serves again"
    failed = after.filter(pc.not_equal(after["status"], "ok"))
    assert failed.num_rows == 0, failed["error"].to_pylist()[:3]
    assert_servers_gone(before["pid"], restart["pid"])
    assert_locust_gone(manifest)


def test_max_restarts_is_a_count_checked_in_one_line(tmp_path):
    fleet = tmp_path / "fleet.toml"
    fleet.write_text((DATA / "restarting-sim.toml").read_text().replace("max_restarts = 1", "max_restarts = -1"))
    with pytest.raises(FleetError) as exc:
        load_fleet(fleet)
    assert str(exc.value).count("\n") == 0 and "max_restarts" in str(exc.value), exc.value
    assert load_fleet(DATA / "restarting-sim.toml")[0].max_restarts == 1
    assert load_fleet("local-sim")[0].max_restarts == 0   # the default: never restart


def test_a_replica_is_restarted_at_most_max_restarts_times(tmp_path):
    """A server that crashes 6 s after every start (--fault crash-at=6) with max_restarts = 1:
    started again once, then reported dead like a replica that is never restarted."""
    fleet = tmp_path / "crash-twice.toml"
    fleet.write_text((DATA / "crashing-sim.toml").read_text().replace("[modes.", "max_restarts = 1\n[modes.", 1))
    proc = start_run("--scenario", str(DATA / "tiny-mix.toml"), "--fleet", str(fleet), "--requests", "240",
                     "--workers", "1", "--timeout", "20", "--out", str(tmp_path), "--run-id", "twice")
    try:
        out, err = finished(proc, 300)
    finally:
        assert_session_ends(proc.pid)
    assert proc.returncode == 1 and "gate failed: baseline:" in out, out + err
    manifest = json.loads((tmp_path / "twice" / "manifest.json").read_text())
    replica = manifest["mode_runs"]["baseline"]["replicas"][0]
    (restart,) = replica["restarts"]
    assert restart["exit_code"] == 1 and restart["error"] is None and replica["pid"] == restart["pid"]
    assert f"restarted (1 of 1) as pid {restart['pid']}" in out
    assert replica["exit_code"] == 1 and "replica baseline-0 exited with code 1 during the run; requests" in out
    records = read_requests(tmp_path / "twice")
    statuses = records["status"].to_pylist()
    assert records.num_rows == 240 and len(set(records["request_id"].to_pylist())) == 240
    assert {k for k, s in zip(records["error_kind"].to_pylist(), statuses, strict=True) if s == "error"} <= {
        "connection", "incomplete_stream"}
    ready_ns = epoch_ns(restart["ready_at"])   # the restarted server served until its own crash
    assert "ok" in records.filter(pc.greater_equal(records["sent_ns"], ready_ns))["status"].to_pylist()
    assert_servers_gone(restart["old_pid"], restart["pid"])
    assert_locust_gone(manifest)


def test_a_held_fleet_restarts_a_killed_replica_and_its_state_names_the_new_pid(tmp_path):
    state = tmp_path / "fleet.json"
    up = loadtest("cluster", "up", "--fleet", str(DATA / "restarting-sim.toml"), "--detach", "--state", str(state),
                  "--logs", str(tmp_path / "logs"), timeout=180)
    assert up.returncode == 0, up.stdout + up.stderr
    held = json.loads(state.read_text())
    old = held["replicas"][0]["pid"]
    try:
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 90
        while json.loads(state.read_text())["replicas"][0]["pid"] == old:
            assert time.monotonic() < deadline, "the state file never named the restarted server"
            time.sleep(0.5)
        new = json.loads(state.read_text())["replicas"][0]["pid"]
        deadline = time.monotonic() + 60
        while "1/1 replicas healthy" not in (status := cli("cluster", "status", "--state", str(state))).stdout:
            assert time.monotonic() < deadline, status.stdout + status.stderr
            time.sleep(1)
        assert pid_alive(new) and not pid_alive(old)
    finally:
        down = cli("cluster", "down", "--state", str(state))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "restarted as pid" in (tmp_path / "logs" / "supervisor.log").read_text()
    assert not pid_alive(held["supervisor_pid"])
    assert_servers_gone(old, new)
