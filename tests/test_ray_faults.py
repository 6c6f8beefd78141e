"""Ray faults mid-run, as a user meets them: a Ray actor dies (a replica's, a Locust worker's), or
the Ray head goes away under a run that joined it with --address. Each test kills the real process
by pid or process group (never by name) and checks what the user sees: the exit code, the printed
line, the manifest, every scheduled request as exactly one record, and no process left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis.reader import read_requests
from tests.conftest import DATA, ROOT, pid_alive, sim_server
from tests.ray_nodes import ray_cluster

pytestmark = pytest.mark.e2e


def parent_pid(pid: int) -> int:
    """The ppid field of /proc/<pid>/stat (the command may hold spaces and parentheses)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(") ", 1)[1].split()[1])


def start_run(*args: str, env: dict | None = None) -> subprocess.Popen:
    """`loadtest run ARGS` in the background, in its own process group, output captured."""
    return subprocess.Popen([sys.executable, "-m", "loadtest", "run", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env)


def wait_for_parts(proc: subprocess.Popen, records: Path, writers: int, timeout_s: float = 150) -> None:
    """Until `writers` distinct workers have written part files under `records` (the run is under way)."""
    deadline = time.monotonic() + timeout_s
    while len({p.name.split("-")[1] for p in records.glob("part-*")}) < writers:
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.stdout.read() if proc.poll() is not None else "(still running)"
            pytest.fail(f"the run never got under way: {out}")
        time.sleep(0.2)


def finish(proc: subprocess.Popen, timeout_s: float = 200) -> str:
    """The run's output once it has ended on its own (killed with its group if it hangs)."""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the run did not end within {timeout_s:g} s of the fault: {out}")
    return out


def kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_dead_locust_worker_actor_is_reported_and_its_rows_recorded(tmp_path):
    """Killing a LocustWorkerActor's process (the parent of the worker pid the manifest records)
    signals its worker through PR_SET_PDEATHSIG (PARENT_GONE, its own signal: the kernel sends it when
    the actor's thread dies, before the worker's ppid changes): the worker records its shard's rest as not_sent,
    says worker_lost (not `interrupted`: nobody interrupted the run), the other worker goes on, and
    the run completes (client-side losses are outside the error gate)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with sim_server("--tensor-parallel-size", "4", "--served-model-name", "m") as url:
        proc = start_run("--endpoints", f"baseline={url}", "--workers", "2", "--ray-workers", "--scenario",
                         str(DATA / "tiny-mix.toml"), "--requests", "150", "--out", str(tmp_path), "--run-id", "rw",
                         env=env)
        try:
            run_dir = tmp_path / "rw"
            wait_for_parts(proc, run_dir / "requests" / "mode=baseline", 2)
            placed = json.loads((run_dir / "manifest.json").read_text())["mode_runs"]["baseline"]["ray_workers"]
            victim = placed[1]["pid"]
            actor = parent_pid(victim)
            with open(f"/proc/{actor}/cmdline", "rb") as f:
                assert b"LocustWorkerActor" in f.read()  # Ray names its worker process after the actor
            os.kill(actor, signal.SIGKILL)
            output = finish(proc)
        finally:
            kill_group(proc)
    assert proc.returncode == 0, output
    assert "its actor died during the run" in output and f"pid {victim}" in output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    mr = manifest["mode_runs"]["baseline"]
    assert manifest["status"] == "completed" and mr["end"] == "worker_lost"
    assert mr["ray_workers"][1]["actor"] == "died during the run"
    assert mr["ray_workers"][0]["exit_code"] is not None and "actor" not in mr["ray_workers"][0]
    records = read_requests(run_dir)
    ids = records["request_id"].to_pylist()
    assert records.num_rows == 150 and len(set(ids)) == 150
    rows = list(zip(records["worker"].to_pylist(), records["status"].to_pylist(),
                    records["error_kind"].to_pylist(), records["error"].to_pylist(), strict=True))
    kinds = Counter((s, k) for _, s, k, _ in rows)
    assert set(kinds) <= {("ok", None), ("not_sent", None), ("error", "interrupted"), ("error", "worker_lost")}, kinds
    unsent = [(w, e) for w, s, _, e in rows if s == "not_sent"]
    assert unsent and all("Ray actor" in e for _, e in unsent)  # why, in each record
    assert len({w for w, _ in unsent}) == 1  # one worker's shard; the other one completed
    for p in [*mr["locust_pids"], *(w["pid"] for w in mr["ray_workers"]), actor]:
        assert not pid_alive(p), f"process {p} outlived the run"


def test_a_dead_replica_actor_fails_its_requests_by_kind_and_the_run_ends(tmp_path):
    """Killing a ReplicaActor's process (the parent of the server pid in the manifest) takes its
    server down with it (PR_SET_PDEATHSIG): the requests sent to it fail as connection errors (or
    streams cut short), the run ends on its own, and its error gate fails (exit 1)."""
    proc = start_run("--scenario", str(DATA / "tiny-mix.toml"), "--fleet", str(DATA / "fast-sim.toml"), "--modes",
                     "baseline", "--requests", "120", "--workers", "1", "--timeout", "20", "--out", str(tmp_path),
                     "--run-id", "ra")
    try:
        run_dir = tmp_path / "ra"
        wait_for_parts(proc, run_dir / "requests" / "mode=baseline", 1)
        server = json.loads((run_dir / "manifest.json").read_text())["mode_runs"]["baseline"]["replicas"][0]["pid"]
        actor = parent_pid(server)
        with open(f"/proc/{actor}/cmdline", "rb") as f:
            assert b"ReplicaActor" in f.read()
        os.kill(actor, signal.SIGKILL)
        output = finish(proc)
    finally:
        kill_group(proc)
    assert proc.returncode == 1, output
    assert "replica baseline-0's Ray actor died during the run; requests sent to it failed" in output
    assert "gate failed: baseline:" in output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["gate"] == "failed"
    assert manifest["mode_runs"]["baseline"]["end"] == "completed"
    replica = manifest["mode_runs"]["baseline"]["replicas"][0]
    assert replica["actor"] == "died during the run" and "exit_code" not in replica and replica["stopped_at"]
    records = read_requests(run_dir)
    assert records.num_rows == 120 and len(set(records["request_id"].to_pylist())) == 120
    statuses, kinds = records["status"].to_pylist(), records["error_kind"].to_pylist()
    assert "ok" in statuses and "error" in statuses and set(statuses) <= {"ok", "error"}
    assert {k for s, k in zip(statuses, kinds, strict=True) if s == "error"} <= {"connection", "incomplete_stream"}
    for p in (server, actor, *manifest["mode_runs"]["baseline"]["locust_pids"]):
        assert not pid_alive(p), f"process {p} outlived the run"


@dataclass(frozen=True)
class Head:
    address: str
    proc: subprocess.Popen   # `ray start --block`: it leads the group of the head's processes
    env: dict[str, str]      # a driver's environment for this head (its token included)

    def kill(self) -> None:
        """SIGKILL the head's whole process group (GCS, raylet, dashboard agents, workers)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def ray_head() -> Iterator[Head]:
    """A Ray head of this test's own (tests/ray_nodes.py: `ray start --head --block`, loopback, its
    own token, temporary folder and process group); its whole group is gone on the way out."""
    with ray_cluster(["--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--num-gpus", "0"], []) as cluster:
        yield Head(cluster.address, cluster.nodes[0].proc, cluster.env())


def descendants(pid: int) -> set[int]:
    """Every live process whose chain of parents leads to `pid` (by /proc's ppid, never by name)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = parent_pid(int(entry.name))
            except (OSError, IndexError, ValueError):
                pass
    found, grew = {pid}, True
    while grew:
        more = {child for child, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return {p for p in found - {pid} if pid_alive(p)}


def kill_head_and_finish(ray_head, proc: subprocess.Popen) -> tuple[str, float]:
    """Kill the Ray head's group; the run's output and how long it took to end after."""
    killed = time.monotonic()
    ray_head.kill()
    output = finish(proc, timeout_s=120)
    took_s = time.monotonic() - killed
    print(f"the run ended {took_s:.1f} s after the head was killed")
    return output, took_s


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_the_ray_head_going_away_ends_the_run_with_exit_3_and_readable_records(ray_head, tmp_path):
    """The head's process group killed mid-run (GCS, raylet and the replicas' actors with it).
    Ray tells the driver nothing: its placement-group calls would block, and Ray's client ends the
    process with exit code 1 once it has not reached the GCS for its reconnect timeout (60 s). The
    run notices the GCS gone (cluster/ray_watch.py), stops its replay, skips the Ray calls of its
    teardown and ends before that: exit 3, one line naming the cluster, the manifest `failed`, every
    scheduled request one record (the rest of the trace not_sent), nothing left running."""
    proc = start_run("--address", ray_head.address, "--scenario", str(DATA / "tiny-mix.toml"), "--fleet",
                     str(DATA / "fast-sim.toml"), "--modes", "baseline", "--requests", "200", "--workers", "2",
                     "--timeout", "20", "--out", str(tmp_path), "--run-id", "head", env=ray_head.env)
    try:
        run_dir = tmp_path / "head"
        wait_for_parts(proc, run_dir / "requests" / "mode=baseline", 2)
        mr = json.loads((run_dir / "manifest.json").read_text())["mode_runs"]["baseline"]
        server = mr["replicas"][0]["pid"]
        actor = parent_pid(server)
        head_tree = descendants(ray_head.proc.pid)   # GCS, raylet, the replicas' actors and servers
        assert {server, actor} <= head_tree
        output, took_s = kill_head_and_finish(ray_head, proc)
    finally:
        kill_group(proc)
    assert proc.returncode == 3, output
    said = [line for line in output.splitlines() if "went away" in line]
    # 10 s, or 11 when the watch's poll came late on a busy machine
    assert len(said) == 1 and re.fullmatch(
        rf"loadtest run: error: the Ray cluster at {re.escape(ray_head.address)} went away \(its GCS at \S+ has "
        r"not answered for 1[01] s\); the run could not complete", said[0]), output
    assert took_s < 60, f"the run took {took_s:.0f} s to end after the head went away"  # before Ray's own exit
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and f"the Ray cluster at {ray_head.address} went away" in manifest["reason"]
    parts = list((run_dir / "requests").rglob("*.parquet"))
    assert parts and all(pq.read_table(p).num_rows >= 0 for p in parts)  # each part file whole
    records = read_requests(run_dir)
    assert records.num_rows == 200 and len(set(records["request_id"].to_pylist())) == 200
    kinds = Counter(zip(records["status"].to_pylist(), records["error_kind"].to_pylist(), strict=True))
    assert set(kinds) <= {("ok", None), ("not_sent", None), ("error", "connection"),
                          ("error", "incomplete_stream"), ("error", "interrupted")}, kinds
    assert kinds[("ok", None)] and kinds[("not_sent", None)], kinds  # it ran, then stopped short of the end
    for p in (*head_tree, *mr["locust_pids"]):
        assert not pid_alive(p), f"process {p} outlived the run"
    assert not group_alive(ray_head.proc.pid), "a process of the Ray head's group outlived it"


def test_the_ray_head_going_away_while_the_fleet_starts_is_ended_by_the_last_resort(ray_head, tmp_path):
    """The head killed while the fleet waits for a replica that is never healthy: the wait fails at
    once (its actor is gone) and the fleet's teardown is then stuck in Ray (a placement group's
    removal blocks on the dead GCS) before the watch has said the cluster is gone. The watch's last
    resort ends the run all the same, before Ray's own exit (code 1, at 60 s): exit 3, one line,
    the manifest `failed`, the replica's server gone with its node."""
    proc = start_run("--address", ray_head.address, "--scenario", str(DATA / "tiny-mix.toml"), "--fleet",
                     str(DATA / "slow-start-sim.toml"), "--requests", "20", "--out", str(tmp_path), "--run-id", "slow",
                     env=ray_head.env)
    try:
        run_dir = tmp_path / "slow"
        log, deadline = run_dir / "logs" / "baseline-0.log", time.monotonic() + 120
        while not (log.exists() and log.stat().st_size):  # its server has started (and is not healthy)
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() else ""
            time.sleep(0.2)
        time.sleep(2)
        head_tree = descendants(ray_head.proc.pid)   # the replica's actor and server among them
        output, took_s = kill_head_and_finish(ray_head, proc)
    finally:
        kill_group(proc)
    assert proc.returncode == 3, output
    said = [line for line in output.splitlines() if "went away" in line]
    assert len(said) == 1 and said[0].startswith(f"loadtest run: error: the Ray cluster at {ray_head.address} went "
                                                 "away") and said[0].endswith("stopped while waiting on Ray"), output
    assert took_s < 60, f"the run took {took_s:.0f} s to end after the head went away"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "went away" in manifest["reason"]
    for p in head_tree:
        assert not pid_alive(p), f"process {p} of the Ray head's tree outlived it"
    assert not group_alive(ray_head.proc.pid)
