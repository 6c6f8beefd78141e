"""Locust workers as Ray actors (`--ray-workers`): on a local Ray here, the same code that spreads
them over a cluster's nodes. Every row is still recorded, and no worker outlives the run."""

from __future__ import annotations

import json
import os
import re

import pytest

from analysis.reader import read_requests
from tests.conftest import ROOT, loadtest, pid_alive, sim_server


@pytest.mark.e2e
def test_workers_on_ray_replay_every_row_and_leave_nothing(tmp_path):
    # A relative --out (workers get absolute paths) and a server that wants an API key (workers get
    # it through their environment, never their command line).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_KEY": "s3cret-key"}
    with sim_server("--tensor-parallel-size", "4", "--served-model-name", "m", "--api-key", "s3cret-key") as url:
        run = loadtest("run", "--endpoints", f"baseline={url}", "--workers", "2", "--ray-workers",
                       "--api-key-env", "BENCH_KEY", "--scenario", "chat", "--requests", "40", "--out", "res",
                       "--run-id", "rw", timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    records = read_requests(tmp_path / "res" / "rw")
    assert records.num_rows == 40 and set(records["status"].to_pylist()) == {"ok"}
    assert len(set(records["request_id"].to_pylist())) == 40
    for path in (tmp_path / "res" / "rw").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".txt", ".log"):
            assert "s3cret-key" not in path.read_text(errors="replace"), f"the API key leaked into {path}"
    assert set(records["worker"].to_pylist()) == {"w0", "w1"}  # both shards, one per Ray worker
    manifest = json.loads((tmp_path / "res" / "rw" / "manifest.json").read_text())
    placed = manifest["mode_runs"]["baseline"]["ray_workers"]
    assert len(placed) == 2 and all(p["node"] and p["pid"] for p in placed)
    assert all(len(p["node_id"]) == 56 and int(p["node_id"], 16) for p in placed), placed   # Ray's node ids
    for p in placed:
        assert not pid_alive(p["pid"]), "a Locust worker outlived the run"


@pytest.mark.e2e
def test_too_many_ray_workers_is_a_clear_error(tmp_path):
    with sim_server("--tensor-parallel-size", "4", "--served-model-name", "m") as url:
        run = loadtest("run", "--endpoints", f"baseline={url}", "--workers", "64", "--ray-workers",
                       "--requests", "5", "--out", str(tmp_path), timeout=300)
    assert run.returncode == 2, run.stdout + run.stderr  # the cluster lacks room: refused before the replay
    said = (r"--ray-workers: \d+ CPU\(s\) are left for Locust workers on every Ray node with CPUs \(1 of 1; none "
            r"has GPUs\), and the 1 mode\(s\) replayed at once need 64 \(at least 64 worker\(s\) each")
    assert re.search(said, run.stderr), run.stderr
