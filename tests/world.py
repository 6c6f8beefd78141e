"""The world the tests share when they are not about it: one simulator fleet of every mode on a
local Ray, held up for the session by `loadtest cluster up --detach` (as an SRE holds one), which
tests reach with `--endpoints STATE` (or `MODE=URL` pairs).

Its replicas require the session's API key (VLLM_API_KEY in the fleet's env, as a secured vLLM
fleet is set up), which every command of the session sends (LOADTEST_API_KEY): a run that forgot
the key would fail, and the invariants look for the key in everything the runs wrote.

Only tests about provisioning, placement, restarts or teardown start a fleet of their own. Under
pytest-xdist each worker holds its own world (a test never shares a replica with a test running
beside it, so server-side counters and latencies stay its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("baseline", "draft", "medusa", "eagle", "ngram")
# The local-sim deployment (Llama-3.3-70B at TP4 on H100 SXM, every mode of it) at real time:
# the tests' SLOs and latency expectations were measured on it.
FLEET = """name = "test-world"
engine = "sim"
model = "meta-llama/Llama-3.3-70B-Instruct"
tensor_parallel_size = 4
cpus_per_replica = 0.2
startup_timeout_s = 90
env = {{ VLLM_API_KEY = "{key}" }}

[sim]
hardware = "h100-sxm"
time_scale = 1.0

[modes.baseline]
method = "none"

[modes.draft]
method = "draft_model"
model = "meta-llama/Llama-3.2-1B-Instruct"
num_speculative_tokens = 5

[modes.medusa]
method = "medusa"
model = "FasterDecoding/medusa-heads-for-the-test-world"
num_speculative_tokens = 5

[modes.eagle]
method = "eagle"
model = "yuhuili/EAGLE-LLaMA3-Instruct-70B"
num_speculative_tokens = 5

[modes.ngram]
method = "ngram"
num_speculative_tokens = 5
prompt_lookup_min = 2
prompt_lookup_max = 4
"""


@dataclass(frozen=True)
class World:
    folder: Path
    state: Path          # the state file: `--endpoints STATE`
    fleet_file: Path     # the fleet it holds (for `loadtest plan --fleet`, the same deployment)
    replicas: dict       # mode -> its replica's URL
    supervisor_pid: int

    def replica_pids(self) -> list[int]:
        """The replicas' servers, as the state file names them now."""
        return [r["pid"] for r in json.loads(self.state.read_text())["replicas"]]

    def endpoints(self, *modes: str) -> str:
        """`MODE=URL,...` for `--endpoints`, of `modes` (default: all)."""
        return ",".join(f"{m}={self.replicas[m]}" for m in modes or self.replicas)


def start(folder: Path, key: str) -> World:
    """`loadtest cluster up --detach` of every mode; the world once it is ready."""
    fleet_file, state = folder / "world-fleet.toml", folder / "cluster.json"
    fleet_file.write_text(FLEET.format(key=key))
    up = subprocess.run([sys.executable, "-m", "loadtest", "cluster", "up", "--fleet", str(fleet_file), "--detach",
                         "--state", str(state), "--logs", str(folder / "logs")],
                        cwd=ROOT, capture_output=True, text=True, timeout=300)
    if up.returncode != 0:
        raise RuntimeError(f"the test world did not come up (exit {up.returncode}):\n{up.stdout}\n{up.stderr}")
    held = json.loads(state.read_text())
    return World(folder, state, fleet_file, {r["mode"]: r["url"] for r in held["replicas"]}, held["supervisor_pid"])


def stop(world: World) -> None:
    """`loadtest cluster down`; RuntimeError when it fails."""
    down = subprocess.run([sys.executable, "-m", "loadtest", "cluster", "down", "--state", str(world.state)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    if down.returncode != 0:
        raise RuntimeError(f"the test world did not go down (exit {down.returncode}):\n{down.stdout}\n{down.stderr}")
