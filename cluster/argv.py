"""The one place a server's command line is built: `vllm serve` or the simulator, same flags."""

from __future__ import annotations

import sys

from cluster.fleet import FleetSpec


def serve_argv(fleet: FleetSpec, mode: str, port: int, python: str = sys.executable) -> list[str]:
    """argv for one replica of `mode`: `vllm serve MODEL --host ... --speculative-config '{...}'`;
    for engine "sim", the simulator (`python -m cluster.sim`, the same as `loadtest sim`) with
    exactly the same flags plus the simulator's own."""
    if fleet.engine == "vllm" and fleet.vllm_python:
        head = [fleet.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", fleet.model]
    elif fleet.engine == "vllm":
        head = ["vllm", "serve", fleet.model]
    else:
        head = [python, "-m", "cluster.sim", fleet.model]
    argv = [
        *head,
        "--host", fleet.bind_host,
        "--port", str(port),
        "--served-model-name", fleet.served_model_name(mode),
        "--tensor-parallel-size", str(fleet.tensor_parallel_size),
        "--gpu-memory-utilization", str(fleet.gpu_memory_utilization),
        "--max-num-seqs", str(fleet.max_num_seqs),
    ]
    spec = fleet.speculative_config(mode)
    if spec is not None:
        argv += ["--speculative-config", spec.to_json()]
    if fleet.engine == "sim":
        argv += ["--hardware", fleet.sim.hardware, "--seed", str(fleet.sim.seed),
                 "--time-scale", str(fleet.sim.time_scale)]
    return argv + list(fleet.extra_args)
