"""GPU placement without GPUs: a real Ray head that declares 8 (fake) H100s, joined with
`--address`, provisions a TP4 vLLM fleet whose `vllm` is a stand-in (tests/data/fake_vllm) that
prints the CUDA_VISIBLE_DEVICES Ray handed it and serves the simulator with vLLM's flags. Each
replica must get 4 GPUs of its own, on the accelerator type the fleet names."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import DATA, ROOT, loadtest, pid_alive

FLEET = """
name = "fake-h100-tp4"
engine = "vllm"
vllm_python = "{python}"
model = "meta-llama/Llama-3.3-70B-Instruct"
accelerator_type = "H100"
tensor_parallel_size = 4
cpus_per_replica = 0.25
startup_timeout_s = 120
env = {{ PYTHONPATH = "{fake}:{root}" }}
[modes.baseline]
method = "none"
[modes.ngram]
method = "ngram"
num_speculative_tokens = 4
prompt_lookup_min = 2
prompt_lookup_max = 4
"""


def test_tp4_replicas_get_four_gpus_each_on_a_joined_ray_cluster(tmp_path):
    ray_bin = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [str(ray_bin), "start", "--head", "--block", "--num-cpus", "4", "--num-gpus", "8", "--resources",
         '{"accelerator_type:H100": 8}', "--port", "0", "--include-dashboard", "false", "--disable-usage-stats"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(head.stdout), daemon=True)
        reader.start()
        address, deadline = None, time.monotonic() + 90
        while address is None and time.monotonic() < deadline and head.poll() is None:
            match = re.search(r"ray start --address='([^']+)'", "".join(lines))
            address = match.group(1) if match else None
            time.sleep(0.2)
        assert address, "".join(lines)
        fleet = tmp_path / "fleet.toml"
        fleet.write_text(FLEET.format(python=sys.executable, fake=DATA / "fake_vllm", root=ROOT))
        env = {**os.environ, "RAY_AUTH_MODE": "token"}  # the head enables Ray's token auth by default
        run = loadtest("run", "--fleet", str(fleet), "--address", address, "--scenario", "chat", "--requests", "6",
                       "--out", str(tmp_path / "results"), "--run-id", "g", timeout=300, env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        logs = sorted((tmp_path / "results" / "g" / "logs").glob("*-0.log"))
        gpus = [re.search(r"CUDA_VISIBLE_DEVICES=(\S*)", p.read_text()).group(1).split(",") for p in logs]
        assert len(gpus) == 2 and all(len(g) == 4 for g in gpus), gpus
        assert not set(gpus[0]) & set(gpus[1]), f"two replicas share GPUs: {gpus}"
        assert "fleet ready: 2 replica(s) on Ray" in run.stdout
        manifest = json.loads((tmp_path / "results" / "g" / "manifest.json").read_text())
        servers = [r["pid"] for mr in manifest["mode_runs"].values() for r in mr["replicas"]]
        assert len(servers) == 2 and not any(pid_alive(p) for p in servers), "a server outlived the run"
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            head.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(10)
        try:  # Ray's own processes the head started, in its process group
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not pid_alive(head.pid)
