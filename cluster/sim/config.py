"""The simulator's configuration, typed: what `loadtest sim` reads from its command line
(cluster/sim/cli.py) and what a plan builds from a fleet (cluster/argv.sim_config), so no argv is
parsed on the engine's path; `build_server` turns it into a server, refusing what vLLM would refuse."""

from __future__ import annotations

import os
from dataclasses import dataclass

from cluster.sim import perf_model, sim_profile
from cluster.sim.engine import Engine
from cluster.sim.faults import parse_faults
from cluster.sim.profiles import model_profile
from cluster.sim.server import ServerConfig, SimServer
from cluster.speculation import SpeculativeConfigError, parse_speculative_config

# Llama 3.x and Qwen 2.5 instruct models ship max_position_embeddings of 131072 and 32768; vLLM
# takes it from the model's config. The simulator defaults to the smaller.
DEFAULT_MAX_MODEL_LEN = 32768


class SimArgsError(ValueError):
    """A configuration the simulator (as vLLM) refuses; the message is one line naming the flag."""


@dataclass(frozen=True)
class SimConfig:
    """One simulated server: vLLM's flags (named as `vllm serve` names them) and the simulator's own.
    Each default here is the one default; the command line takes its defaults from this record."""

    model: str
    served_model_names: tuple[str, ...] = ()       # default: (model,)
    host: str = "127.0.0.1"
    port: int = 8000
    tensor_parallel_size: int = 1
    speculative_config: str | None = None          # vLLM's --speculative-config JSON
    max_num_seqs: int = 256                         # vLLM's default
    max_model_len: int | None = None                # default: DEFAULT_MAX_MODEL_LEN
    gpu_memory_utilization: float = 0.9
    api_key: str | None = None                      # $VLLM_API_KEY first, as vLLM reads it
    per_request_spec_decode_metrics: str = "none"
    hardware: str = "h100-sxm"
    seed: int = 0
    fault: str | None = None
    max_concurrent_requests: int = 4096
    time_scale: float = 1.0


def build_server(cfg: SimConfig) -> SimServer:
    """The server `cfg` describes, built without listening; SimArgsError, one line, on a value
    vLLM (or the simulator) would refuse."""
    if not cfg.model:
        raise SimArgsError("the following arguments are required: MODEL (positional or --model)")
    if cfg.tensor_parallel_size < 1:
        raise SimArgsError(f"--tensor-parallel-size must be >= 1, got {cfg.tensor_parallel_size}")
    if not 1 <= cfg.port <= 65535:
        raise SimArgsError(f"--port must be a TCP port (1-65535), got {cfg.port}")
    if cfg.max_num_seqs < 1:
        raise SimArgsError(f"--max-num-seqs must be >= 1, got {cfg.max_num_seqs}")
    if cfg.max_model_len is not None and cfg.max_model_len < 1:
        raise SimArgsError(f"--max-model-len must be >= 1, got {cfg.max_model_len}")
    if not 0 < cfg.gpu_memory_utilization <= 1:
        raise SimArgsError(f"--gpu-memory-utilization must be in (0, 1], got {cfg.gpu_memory_utilization}")
    if cfg.max_concurrent_requests < 1:
        raise SimArgsError(f"--max-concurrent-requests must be >= 1, got {cfg.max_concurrent_requests}")
    if not 0 < cfg.time_scale < float("inf"):
        raise SimArgsError(f"--time-scale must be > 0, got {cfg.time_scale}")
    try:
        target = model_profile(cfg.model)
        spec = draft = None
        if cfg.speculative_config:
            spec = parse_speculative_config(cfg.speculative_config, cfg.tensor_parallel_size)
            if spec.method == "draft_model":
                draft = model_profile(spec.model or "")
        faults = parse_faults(cfg.fault)
        try:
            profile = sim_profile.resolve(cfg.hardware)
        except sim_profile.ProfileError as exc:
            raise SimArgsError(f"--hardware {exc}") from None
    except (SpeculativeConfigError, ValueError) as exc:
        raise SimArgsError(str(exc)) from None
    dep = perf_model.Deployment(profile.hardware, target, cfg.tensor_parallel_size, spec, draft,
                                cfg.gpu_memory_utilization, acceptance=profile.acceptance)
    if perf_model.kv_capacity_tokens(dep) <= 0:
        raise SimArgsError(
            f"No available memory for the cache blocks: {cfg.model} at TP{dep.tp} on {cfg.hardware} "
            f"does not fit in gpu_memory_utilization={dep.gpu_memory_utilization}. "
            "Try increasing `gpu_memory_utilization` or `tensor_parallel_size`."
        )
    engine = Engine(dep, max_num_seqs=cfg.max_num_seqs, time_scale=cfg.time_scale, seed=cfg.seed)
    key = os.environ.get("VLLM_API_KEY") or cfg.api_key   # vLLM's order (api_server.py)
    server_cfg = ServerConfig(cfg.model, cfg.served_model_names or (cfg.model,),
                              cfg.max_model_len or DEFAULT_MAX_MODEL_LEN, key, faults, cfg.seed,
                              cfg.per_request_spec_decode_metrics, cfg.max_concurrent_requests, cfg.port)
    return SimServer(server_cfg, engine)
