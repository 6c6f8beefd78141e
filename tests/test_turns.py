"""Every mode on the GPUs there are, without GPUs: a real Ray cluster of two nodes that declare 4
(fake) H100s each, joined with `--address`, provisions TP4 vLLM fleets whose `vllm` is a stand-in
(tests/data/fake_vllm) that prints the CUDA_VISIBLE_DEVICES Ray handed it and serves the
simulator with vLLM's flags. The five-mode fleet needs 20 GPUs at once; on these 8 it runs in
three turns. The pre-flight refuses, within seconds, what can never fit, and placeholders; on a
local Ray the same planner counts CPUs."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.conftest import DATA, ROOT, cli, loadtest, pid_alive
from tests.ray_nodes import RayTestCluster, gpu_node, ray_cluster

MODES = ["baseline", "draft", "medusa", "eagle", "ngram"]
SPEC_MODES = """
[modes.baseline]
method = "none"
[modes.draft]
method = "draft_model"
model = "meta-llama/Llama-3.2-1B-Instruct"
num_speculative_tokens = 5
[modes.medusa]
method = "medusa"
model = "{medusa}"
num_speculative_tokens = 5
[modes.eagle]
method = "eagle3"
model = "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"
num_speculative_tokens = 5
[modes.ngram]
method = "ngram"
num_speculative_tokens = 4
prompt_lookup_min = 2
prompt_lookup_max = 4
"""
FLEET = """
name = "fake-h100-tp{tp}"
engine = "vllm"
device = "{device}"
vllm_python = "{python}"
model = "{model}"
accelerator_type = "H100"
tensor_parallel_size = {tp}
cpus_per_replica = {cpus}
startup_timeout_s = 600
env = {{ PYTHONPATH = "{fake}:{root}" }}
""" + SPEC_MODES


def fleet_file(tmp_path: Path, tp: int = 4, medusa: str = "FasterDecoding/medusa-heads-for-this-test",
               device: str = "gpu", cpus: float = 0.25, model: str = "meta-llama/Llama-3.3-70B-Instruct") -> Path:
    path = tmp_path / f"fleet-tp{tp}-{device}.toml"
    path.write_text(FLEET.format(tp=tp, device=device, cpus=cpus, python=sys.executable, fake=DATA / "fake_vllm",
                                 root=ROOT, medusa=medusa, model=model))
    return path


@pytest.fixture(scope="module")
def two_gpu_nodes() -> Iterator[RayTestCluster]:
    """A Ray head and a second node on this machine, 4 fake H100s each, with their own token."""
    with ray_cluster(gpu_node(), [gpu_node()]) as cluster:
        yield cluster


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _intervals(manifest: dict) -> list[tuple[str, float, float, str, str]]:
    """(label, asked, stopped, node, log) of every replica, times as epoch seconds."""
    return [(r["label"], epoch(r["requested_at"]), epoch(r["stopped_at"]), r["node_id"], r["log"])
            for mr in manifest["mode_runs"].values() for r in mr["replicas"]]


@pytest.mark.e2e
@pytest.mark.xdist_group("two-gpu-nodes")   # one worker builds the module's cluster once
def test_five_tp4_modes_on_8_gpus_run_in_three_turns_overlapping_loads_with_replays(two_gpu_nodes, tmp_path):
    run = loadtest("run", "--fleet", str(fleet_file(tmp_path)), "--address", two_gpu_nodes.address, "--scenario",
                   "chat", "--requests", "6", "--cooldown", "0", "--out", str(tmp_path / "results"), "--run-id", "t",
                   timeout=400, env=two_gpu_nodes.env())
    assert run.returncode == 0, run.stdout + run.stderr
    assert ("plan: 5 modes x 1 replica x 4 H100 GPUs (TP4); the cluster has 8 H100 GPUs on 2 nodes: 2 mode(s) at "
            "a time, in 3 turns (baseline+draft, medusa+eagle, ngram)") in run.stdout
    assert re.search(r"medusa ready \(turn 2 of 3\): medusa-0 in \d+\.\d s \(healthy \d+\.\d s\)", run.stdout)
    out = tmp_path / "results" / "t"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["plan"]["turns"] == [["baseline", "draft"], ["medusa", "eagle"], ["ngram"]]
    assert [manifest["mode_runs"][m]["turn"] for m in MODES] == [1, 1, 2, 2, 3]
    rows = ds.dataset(out / "requests", partitioning="hive").to_table(columns=["mode", "status"]).to_pylist()
    for mode in MODES:  # every mode replayed the whole trace
        assert [r["status"] for r in rows if r["mode"] == mode] == ["ok"] * 6, mode

    runs = manifest["mode_runs"]
    spans = {label: (asked, stopped) for label, asked, stopped, _n, _l in _intervals(manifest)}
    ended = {m: spans[f"{m}-0"][1] for m in MODES}
    replay_end = {m: epoch(runs[m]["ended_at"]) for m in MODES}
    # The next turn's replicas started while the current turn still replayed, on the GPUs freed.
    assert spans["medusa-0"][0] < replay_end["draft"], "medusa waited for the whole of turn 1"
    assert spans["eagle-0"][0] < replay_end["medusa"] and spans["ngram-0"][0] < replay_end["eagle"]
    assert spans["medusa-0"][0] >= ended["baseline"] - 0.5, "medusa started before baseline gave its GPUs back"
    # Never more than two modes (8 GPUs) up at once.
    for label, (asked, _stopped) in spans.items():
        up = [other for other, (a, s) in spans.items() if a <= asked < s]
        assert len(up) <= 2, f"{label} started while {up} were up"
    # Each replica had 4 GPUs of its own: no two replicas up together on one node shared one.
    gpus = {}
    for label, _a, _s, node, log in _intervals(manifest):
        gpus[label] = (node, set(re.search(r"CUDA_VISIBLE_DEVICES=(\S*)", Path(log).read_text()).group(1).split(",")))
        assert len(gpus[label][1]) == 4, (label, gpus[label])
    for a in spans:
        for b in spans:
            together = a < b and spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
            if together and gpus[a][0] == gpus[b][0]:
                assert not gpus[a][1] & gpus[b][1], f"{a} and {b} shared GPUs: {gpus[a]} {gpus[b]}"
    for r in (r for mr in runs.values() for r in mr["replicas"]):
        assert r["ready_s"] >= r["healthy_s"] > 0 and r["reserved_s"] >= 0
        assert not pid_alive(r["pid"]), f"{r['label']}'s server outlived the run"
    # where each replica ran, by Ray node id and address: both GPU nodes were used
    assert len({r["node_id"] for mr in runs.values() for r in mr["replicas"]}) == 2
    assert all(r["node"] for mr in runs.values() for r in mr["replicas"]), runs


@pytest.mark.e2e
@pytest.mark.xdist_group("two-gpu-nodes")   # one worker builds the module's cluster once
def test_tp8_on_4_gpu_nodes_fails_in_the_pre_flight(two_gpu_nodes, tmp_path):
    start = time.monotonic()
    run = loadtest("run", "--fleet", str(fleet_file(tmp_path, tp=8)), "--address", two_gpu_nodes.address, "--scenario",
                   "chat", "--requests", "6", "--out", str(tmp_path / "results"), "--run-id", "t8", timeout=120,
                   env=two_gpu_nodes.env())
    took = time.monotonic() - start
    assert run.returncode == 2, run.stdout + run.stderr
    errors = [line for line in run.stderr.splitlines() if "error" in line]
    assert errors == ["loadtest run: error: fleet 'fake-h100-tp8' cannot run on this cluster: a replica (TP8) needs "
                      "8 H100 GPUs on one node (Ray packs a replica's 8 bundles on one node: STRICT_PACK); the "
                      "largest node has 4 (8 H100 GPUs on 2 node(s) up in all)"], run.stderr
    assert "Traceback" not in run.stderr
    # Refused by the pre-flight, not after a placement group waited out startup_timeout_s (600 s).
    assert took < 60, took
    manifest = json.loads((tmp_path / "results" / "t8" / "manifest.json").read_text())
    assert manifest["status"] == "refused" and not any(mr["replicas"] for mr in manifest["mode_runs"].values())


@pytest.mark.e2e
@pytest.mark.xdist_group("two-gpu-nodes")   # one worker builds the module's cluster once
def test_cluster_up_refuses_a_fleet_that_needs_turns(two_gpu_nodes, tmp_path):
    state = tmp_path / "cluster.json"
    up = loadtest("cluster", "up", "--fleet", str(fleet_file(tmp_path)), "--address", two_gpu_nodes.address, "--state",
                  str(state), "--logs", str(tmp_path / "logs"), timeout=120, env=two_gpu_nodes.env())
    assert up.returncode == 2, up.stdout + up.stderr
    assert ("`cluster up` keeps every mode up at once, and the cluster holds 2 of 5 at a time (3 turns: "
            "baseline+draft, medusa+eagle, ngram)") in up.stderr
    assert not state.exists()


def test_a_placeholder_checkpoint_is_refused_before_anything_starts(tmp_path):
    for argv in (["run", "--fleet", "h100-70b", "--out", str(tmp_path / "results")],
                 ["cluster", "up", "--fleet", "h100-70b", "--state", str(tmp_path / "c.json")]):
        out = cli(*argv)
        assert out.returncode == 2, out.stdout + out.stderr
        assert out.stderr.splitlines() == [
            f"loadtest {argv[0] if argv[0] == 'run' else 'cluster up'}: error: modes.medusa.model "
            "'your-org/Llama-3.3-70B-Instruct-medusa-5' is a placeholder: put the path or Hugging Face id of your "
            "own medusa checkpoint for meta-llama/Llama-3.3-70B-Instruct there (or pass --skip-unavailable to run "
            "the other modes without it)"]
    assert not (tmp_path / "results").exists() and not (tmp_path / "c.json").exists()


@pytest.mark.e2e
def test_skip_unavailable_runs_the_other_modes_and_the_table_says_so(tmp_path):
    fleet = fleet_file(tmp_path, medusa="your-org/Llama-3.3-70B-Instruct-medusa-5", device="cpu", cpus=0.1)
    run = loadtest("run", "--fleet", str(fleet), "--modes", "baseline,medusa,ngram", "--skip-unavailable",
                   "--scenario", "chat", "--requests", "4", "--cooldown", "0", "--out", str(tmp_path / "results"),
                   "--run-id", "s", timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "loadtest run: skipping medusa: modes.medusa.model 'your-org/" in run.stderr
    assert re.search(r"│ medusa\s+│\s+skipped │", run.stdout), run.stdout
    assert "medusa: skipped (--skip-unavailable): modes.medusa.model 'your-org/" in run.stdout
    manifest = json.loads((tmp_path / "results" / "s" / "manifest.json").read_text())
    assert manifest["modes"] == ["baseline", "ngram"] and "medusa" in manifest["skipped"]
    modes = set(ds.dataset(tmp_path / "results" / "s" / "requests", partitioning="hive")
                .to_table(columns=["mode"])["mode"].to_pylist())
    assert modes == {"baseline", "ngram"}


@pytest.mark.e2e
def test_a_local_fleet_larger_than_the_machine_runs_in_turns_of_cpus(tmp_path):
    cores = os.cpu_count() or 1
    fleet = tmp_path / "big-sim.toml"
    fleet.write_text(f"""
name = "big-sim"
engine = "sim"
model = "meta-llama/Llama-3.3-70B-Instruct"
tensor_parallel_size = 4
cpus_per_replica = {cores}
startup_timeout_s = 60
[sim]
time_scale = 0.2
""" + SPEC_MODES.format(medusa="your-org/x"))   # the simulator loads no checkpoint: no placeholder to refuse
    run = loadtest("run", "--fleet", str(fleet), "--modes", "baseline,draft", "--scenario", "chat", "--requests", "4",
                   "--cooldown", "0", "--out", str(tmp_path / "results"), "--run-id", "c", timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"x {cores} CPU" in run.stdout and "1 mode(s) at a time, in 2 turns (baseline, draft)" in run.stdout
    manifest = json.loads((tmp_path / "results" / "c" / "manifest.json").read_text())
    assert manifest["plan"]["turns"] == [["baseline"], ["draft"]]
    base, draft = (manifest["mode_runs"][m]["replicas"][0] for m in ("baseline", "draft"))
    assert draft["requested_at"] >= base["stopped_at"], "draft started before baseline gave its cores back"
    assert all(mr["records"] == 4 and mr["end"] == "completed" for mr in manifest["mode_runs"].values())
