"""The fleet and the load spread over a Ray cluster of three nodes on this machine: a head without
GPUs (the driver and the Locust workers) and two nodes of 4 fake H100s each (the replicas, whose
`vllm` is tests/data/fake_vllm serving the simulator). Nothing is told where to go: the pre-flight
puts one TP4 mode on each GPU node, and the Locust workers take the node without GPUs, and each
replica's GPUs are read from its own node's dcgm-exporter (tests/fake_dcgm.py). Then one GPU node
is lost mid-replay, its raylet and every process of it killed at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from cluster.sim.gpu import gpu_uuid
from tests.conftest import ROOT, finished, pid_alive
from tests.fake_dcgm import FOREIGN_W, fake_dcgm
from tests.ray_nodes import RayTestCluster, cpu_node, gpu_node, node_of, ray_cluster
from tests.test_turns import MODES, epoch, fleet_file

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("three-ray-nodes")]   # one worker builds the cluster once


@pytest.fixture(scope="module")
def three_nodes() -> Iterator[RayTestCluster]:
    with ray_cluster(cpu_node(6), [gpu_node(), gpu_node()]) as cluster:
        yield cluster


def start_run(cluster: RayTestCluster, out: Path, run_id: str, requests: int, *extra: str,
              modes: str = "baseline,eagle", tp: int = 4, exporter: str | None = None) -> subprocess.Popen:
    """`exporter`: the fleet's dcgm-exporter URL ({node_id} in it), read in place of NVML."""
    # TP1 replicas hold an 8B model (70B takes more than one H100's memory: the simulator refuses it)
    fleet = fleet_file(out.parent, tp=tp, **({"model": "meta-llama/Llama-3.1-8B-Instruct"} if tp == 1 else {}))
    if exporter is not None:
        fleet.write_text(fleet.read_text() + f'\n[gpu_telemetry]\nexporter = "{exporter}"\nnvml = false\n')
    argv = [sys.executable, "-m", "loadtest", "run", "--fleet", str(fleet), "--modes", modes,
            "--address", cluster.address, "--ray-workers", "--scenario", "chat", "--requests", str(requests),
            "--cooldown", "0", "--out", str(out), "--run-id", run_id, "--no-metrics", *extra]
    return subprocess.Popen(argv, cwd=ROOT, env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def manifest_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def test_replicas_go_one_mode_per_gpu_node_and_locust_workers_to_the_node_without_gpus(three_nodes, tmp_path):
    """...and one dcgm-exporter per GPU node (one fake answering for each node id, each node's GPUs
    at a power of their own, beside a GPU of another job at FOREIGN_W): each replica's figures come
    from its own node's exporter and its own GPUs only."""
    with fake_dcgm() as dcgm:
        run = start_run(three_nodes, tmp_path / "results", "placed", 24, "--workers", "2",
                        exporter=f"{dcgm.url}/node/{{node_id}}/metrics")
        out, err = finished(run, 400)
    assert run.returncode == 0, out + err
    manifest = manifest_of(tmp_path / "results" / "placed")
    cluster = {n["node_id"]: n for n in manifest["plan"]["cluster"]}
    assert len(cluster) == 3 and sorted(n["gpus"] for n in cluster.values()) == [0, 4, 4], cluster
    (head,) = [node for node, n in cluster.items() if n["gpus"] == 0]
    assert "8 H100 GPUs on 2 nodes: all modes at once" in manifest["plan"]["text"]
    runs = manifest["mode_runs"]
    replica_nodes = [r["node_id"] for m in ("baseline", "eagle") for r in runs[m]["replicas"]]
    assert len(set(replica_nodes)) == 2 and head not in replica_nodes, (replica_nodes, head)   # one mode per GPU node
    for mode in ("baseline", "eagle"):
        workers = runs[mode]["ray_workers"]
        assert [w["node_id"] for w in workers] == [head, head], workers   # never on a GPU node
        assert all(w["node"] == cluster[head]["address"] and not pid_alive(w["pid"]) for w in workers)
        assert runs[mode]["ray_worker_nodes"] == "the 1 Ray node(s) without GPUs, of 3"
        assert runs[mode]["end"] == "completed" and runs[mode]["records"] == 24
    rows = ds.dataset(tmp_path / "results" / "placed" / "requests", partitioning="hive").to_table(
        columns=["mode", "status", "worker"])
    assert Counter(zip(rows["mode"].to_pylist(), rows["status"].to_pylist(), strict=True)) == {
        ("baseline", "ok"): 24, ("eagle", "ok"): 24}
    assert set(rows["worker"].to_pylist()) == {"w0", "w1"}
    # GPU telemetry: each mode read from its own node's exporter, never the head's, 4 GPUs each
    node_of_mode = {m: runs[m]["replicas"][0]["node_id"] for m in ("baseline", "eagle")}
    assert set(dcgm.nodes) == set(node_of_mode.values()), (dcgm.nodes, node_of_mode)   # one exporter per GPU node
    watts = {m: dcgm.nodes[n].watts for m, n in node_of_mode.items()}
    assert watts["baseline"] != watts["eagle"] and FOREIGN_W not in watts.values(), watts
    gpu = ds.dataset(tmp_path / "results" / "placed" / "gpu_metrics", partitioning="hive").to_table(
        columns=["mode", "replica", "source", "uuid", "gpu", "power_w"]).to_pylist()
    summary = {(r["mode"], r["metric"], r["statistic"]): r["value"]
               for r in pq.read_table(tmp_path / "results" / "placed" / "summary.parquet").to_pylist()
               if r["tenant"] == "all"}
    for mode in ("baseline", "eagle"):
        assert runs[mode]["gpu_metrics"] == "read", runs[mode]["gpu_metrics"]
        (replica,) = runs[mode]["replicas"]
        mine = [r for r in gpu if r["mode"] == mode]
        assert len(mine) >= 8 and {r["replica"] for r in mine} == {replica["label"]}, mine[:5]
        assert {r["source"] for r in mine} == {"dcgm-exporter"}, {r["source"] for r in mine}
        assert {(r["gpu"], r["uuid"]) for r in mine} == {(i, gpu_uuid(node_of_mode[mode], 9400, i)) for i in range(4)}
        assert {r["power_w"] for r in mine} == {watts[mode]}   # the foreign GPU (index 4) never kept
        assert summary[(mode, "gpus", "count")] == 4
        assert summary[(mode, "gpu_power_w", "peak")] == watts[mode]
        # the mean is the energy counter's rise over the time between readings, each stamped when its
        # answer arrived: over this run's few seconds a loaded suite's delays move it by a percent or
        # so (404.8 W once); another GPU's 999 W in it would move it by a fifth
        assert summary[(mode, "gpu_power_w", "mean")] == pytest.approx(watts[mode], rel=0.05), summary
        assert any(m == mode and metric == "gpu_samples" and stat.startswith("dcgm-exporter/")
                   for m, metric, stat in summary), summary
        windowed = {metric: v for (m, metric, _window), v in summary.items() if m == mode and metric in (
            "gpu_energy_j", "energy_per_output_token_j")}   # over the steady window, else the makespan
        assert len(windowed) == 2 and all(v > 0 for v in windowed.values()), summary


def test_workers_the_cpu_nodes_cannot_hold_are_refused_before_any_mode_replays(three_nodes, tmp_path):
    run = start_run(three_nodes, tmp_path / "results", "crowded", 24, "--workers", "4")
    out, err = finished(run, 300)
    assert run.returncode == 2, out + err   # bad input: refused before any replica starts
    assert ("loadtest run: error: --ray-workers: 6 CPU(s) are left for Locust workers on the 1 Ray node(s) without "
            "GPUs, of 3, and the 2 mode(s) replayed at once need 8 (at least 4 worker(s) each, one CPU a "
            "worker)") in err, err
    manifest = manifest_of(tmp_path / "results" / "crowded")
    assert manifest["status"] == "refused" and not any(mr["replicas"] for mr in manifest["mode_runs"].values())
    assert not (tmp_path / "results" / "crowded" / "requests").exists() or not any(
        (tmp_path / "results" / "crowded" / "requests").rglob("*.parquet"))


# Five modes side by side against one alone, in the suite: measured 1.10x alone, 1.27x-1.41x beside
# the suite's other tests on 2 cores; in turns about 5x (test_five_modes_side_by_side_...).
SIDE_BY_SIDE = 1.5


def replay_span(manifest: dict) -> float:
    """From the first mode's replay start to the last one's end, in seconds."""
    runs = manifest["mode_runs"].values()
    return max(epoch(r["ended_at"]) for r in runs) - min(epoch(r["started_at"]) for r in runs)


def test_five_modes_side_by_side_take_about_the_time_of_one_with_workers_sized_from_the_trace(three_nodes, tmp_path):
    """Five TP1 modes fit on the 8 GPUs at once: replayed side by side, from one trace long enough for
    a steady state, they take about the time one mode takes alone, and no mode is client-limited.
    Run alone the five take 1.10x the time of one (38.7 s against 42.7 s, 2026-12-06); in the
    suite, whose other tests share these 2 cores, clean-clone runs measured 1.27x to 1.41x (39.1 s
    against 55.0 s at worst). In turns they would take about 5x. So the bound is 1.5x, and when the
    first pair misses it is measured once more (one, then five) and the best of each compared: a
    real loss of the side-by-side replay misses both times."""
    spans: dict[str, list[float]] = {"one": [], "five": []}
    for attempt, (kind, modes) in enumerate((("one", "baseline"), ("five", ",".join(MODES))) * 2):
        if attempt == 2 and spans["five"][0] < SIDE_BY_SIDE * spans["one"][0]:
            break   # the first pair decided it
        run_id = f"{kind}{attempt // 2}"
        started = time.monotonic()
        # The suite runs several tests at once on this machine's 2 cores, which stalls any client now
        # and then (send lateness p99 of 41 to 55 ms seen so, and 101.9 ms once in CI's clean-clone
        # run of 2026-12-06): here the verdict holds it to 250 ms, which a client short of workers
        # passes by seconds. Run alone, every mode met the default 10 ms (2026-12-05,
        # `pytest tests/test_ray_cluster.py -s`: p99 1.8 to 3.4 ms).
        run = start_run(three_nodes, tmp_path / "results", run_id, 240, "--lateness-limit", "250", modes=modes, tp=1)
        out, err = finished(run, 500)
        assert run.returncode == 0, out + err
        manifest = manifest_of(tmp_path / "results" / run_id)
        spans[kind].append(replay_span(manifest))
        print(f"{run_id}: {time.monotonic() - started:.1f} s in all, replays {spans[kind][-1]:.1f} s")
        assert "client: 1 Locust worker(s) per mode (auto: the trace peaks at " in out, out
        assert manifest["workers"]["per_mode"] == 1 and manifest["workers"]["sizing"]["peak_requests_per_s"] > 0
        head = next(n["node_id"] for n in manifest["plan"]["cluster"] if n["gpus"] == 0)
        for mode, mr in manifest["mode_runs"].items():
            assert [w["node_id"] for w in mr["ray_workers"]] == [head], (mode, mr["ray_workers"])
            assert mr["end"] == "completed" and mr["records"] == 240
            assert mr["client"]["client_limited"] is False, (mode, mr["client"])
            print(f"  {mode}: send lateness p99 {mr['client']['lateness_ms']['p99']:.1f} ms")
        assert "too short for a steady state" not in out, out
    assert manifest["mode_order"].startswith("parallel") and manifest["plan"]["turns"] == [MODES]
    assert min(spans["five"]) < SIDE_BY_SIDE * min(spans["one"]), spans


def test_a_gpu_node_lost_mid_replay_fails_its_mode_and_the_other_goes_on(three_nodes, tmp_path):
    """Runs last in the module: it kills one of the cluster's GPU nodes."""
    run_dir = tmp_path / "results" / "lost"
    run = start_run(three_nodes, tmp_path / "results", "lost", 200, "--workers", "2")
    try:
        deadline, victim, mode = time.monotonic() + 300, None, None
        while victim is None and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.5)
            parts = {p.parent.name for p in (run_dir / "requests").glob("mode=*/part-*.parquet")}
            if parts >= {"mode=baseline", "mode=eagle"}:   # both replays are recording
                replica = manifest_of(run_dir)["mode_runs"]["eagle"]["replicas"][0]
                victim, mode = node_of(replica["pid"], three_nodes.nodes[1:]), "eagle"
        assert victim is not None, "the replays never started, or eagle's node was not found"
        victim.kill()
        out, err = finished(run, 400)
    finally:
        if run.poll() is None:
            run.kill()
    manifest = manifest_of(run_dir)
    runs = manifest["mode_runs"]
    statuses = ds.dataset(run_dir / "requests", partitioning="hive").to_table(columns=["mode", "status"])
    counts = Counter(zip(statuses["mode"].to_pylist(), statuses["status"].to_pylist(), strict=True))
    for m in ("baseline", "eagle"):   # every scheduled request accounted for, once
        assert sum(n for (mm, _s), n in counts.items() if mm == m) == 200, counts
        assert runs[m]["unrecorded"] == 0 and runs[m]["end"] == "completed"
    assert counts[("baseline", "ok")] == 200, counts   # the other mode went on, untouched
    assert counts[(mode, "error")] > 0, counts
    # the replica that lived there, said with what was sent to it and where it ran
    (lost,) = runs[mode]["replicas"]
    # (chat's later turns whose first turn failed were never sent to it: not_sent, and not its)
    assert lost["actor"] == "died during the run" and lost["requests"] == {
        s: n for (m, s), n in counts.items() if m == mode and s != "not_sent"}, lost
    said = (f"replica {mode}-0's Ray actor died during the run; requests sent to it failed ("
            + ", ".join(f"{n:,} {s}" for s, n in sorted(lost["requests"].items()))
            + f") (Ray node {lost['node_id'][:12]} at {lost['node']}; see ")
    assert said in out, out
    # exit 1: the run completed and the mode failed the error gate (DESIGN's exit codes)
    assert run.returncode == 1, out + err
    assert f"gate failed: {mode}:" in out + err, out + err
    assert manifest["status"] == "completed" and "Traceback" not in err
