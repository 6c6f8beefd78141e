"""`loadtest sim`: the simulator's command line, shaped like `vllm serve`."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import signal
import socket
import sys

from cluster.sim import perf_model, sim_profile
from cluster.sim.engine import Engine
from cluster.sim.faults import FAULT_HELP, parse_faults
from cluster.sim.profiles import HARDWARE, model_profile
from cluster.sim.server import ServerConfig, SimServer, listen, serve
from cluster.speculation import SpeculativeConfigError, parse_speculative_config

# Llama 3.x and Qwen 2.5 instruct models ship max_position_embeddings of 131072 and 32768; vLLM
# takes it from the model's config. The simulator defaults to the smaller.
DEFAULT_MAX_MODEL_LEN = 32768


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_tag", nargs="?", metavar="MODEL",
                   help="Model to serve (Hugging Face name), as in `vllm serve MODEL`.")
    p.add_argument("--model", dest="model_flag", help="Same as the positional MODEL.")
    p.add_argument("--host", default="127.0.0.1", help="Address to bind (default 127.0.0.1, loopback only).")
    p.add_argument("--port", type=int, default=8000, help="Port to listen on (default 8000).")
    p.add_argument("--served-model-name", nargs="+", help="Name(s) the API answers to (default: MODEL).")
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1, help="GPUs the target is split over.")
    p.add_argument("--speculative-config", help="vLLM speculative config as JSON, e.g. "
                   '\'{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}\'.')
    p.add_argument("--max-num-seqs", type=int, default=256, help="Most sequences in one batch (vLLM default 256).")
    p.add_argument("--max-model-len", type=int, default=None, help=f"Context length (default {DEFAULT_MAX_MODEL_LEN}).")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                   help="Fraction of GPU memory vLLM may use (default 0.9).")
    p.add_argument("--api-key", help="Require `Authorization: Bearer KEY` on /v1 routes (default: $VLLM_API_KEY, "
                   "as vLLM reads it; the environment keeps the key off the command line).")
    p.add_argument("--per-request-spec-decode-metrics", choices=("none", "summary", "detailed"), default="none",
                   help="As vLLM 0.29+: add each request's acceptance (metrics.speculative_decoding) to its "
                        "response, on the final usage chunk of a stream (default none; detailed = summary here).")
    sim = p.add_argument_group("simulator-only options")
    sim.add_argument("--hardware", default="h100-sxm", metavar="NAME|FILE",
                     help=f"GPU profile: {', '.join(sorted(HARDWARE))} (default h100-sxm), or a profile file "
                          "fitted to a real fleet by `loadtest calibrate` (efficiencies, overheads, acceptance).")
    sim.add_argument("--seed", type=int, default=0, help="Seed of the acceptance draws (default 0).")
    sim.add_argument("--fault", default=None, metavar="LIST", help=FAULT_HELP)
    sim.add_argument("--max-concurrent-requests", type=int, default=4096, metavar="N",
                     help="Answer 503 to requests past N in flight at once (default 4096), so a stray client "
                          "cannot exhaust the simulator's memory; bodies over 64 MiB get 413.")
    sim.add_argument("--time-scale", type=float, default=1.0,
                     help="Multiply every simulated duration by this (e.g. 0.1 runs 10x faster; default 1).")


class SimArgsError(ValueError):
    pass


def build(args: argparse.Namespace) -> tuple[SimServer, str, int]:
    """Turn parsed flags into a server, rejecting what vLLM would reject."""
    model = args.model_flag or args.model_tag
    if not model:
        raise SimArgsError("the following arguments are required: MODEL (positional or --model)")
    if args.tensor_parallel_size < 1:
        raise SimArgsError(f"--tensor-parallel-size must be >= 1, got {args.tensor_parallel_size}")
    if not 1 <= args.port <= 65535:
        raise SimArgsError(f"--port must be a TCP port (1-65535), got {args.port}")
    if args.max_num_seqs < 1:
        raise SimArgsError(f"--max-num-seqs must be >= 1, got {args.max_num_seqs}")
    if args.max_model_len is not None and args.max_model_len < 1:
        raise SimArgsError(f"--max-model-len must be >= 1, got {args.max_model_len}")
    if not 0 < args.gpu_memory_utilization <= 1:
        raise SimArgsError(f"--gpu-memory-utilization must be in (0, 1], got {args.gpu_memory_utilization}")
    if args.max_concurrent_requests < 1:
        raise SimArgsError(f"--max-concurrent-requests must be >= 1, got {args.max_concurrent_requests}")
    if not 0 < args.time_scale < float("inf"):
        raise SimArgsError(f"--time-scale must be > 0, got {args.time_scale}")
    try:
        target = model_profile(model)
        spec = draft = None
        if args.speculative_config:
            spec = parse_speculative_config(args.speculative_config, args.tensor_parallel_size)
            if spec.method == "draft_model":
                draft = model_profile(spec.model or "")
        faults = parse_faults(args.fault)
        try:
            profile = sim_profile.resolve(args.hardware)
        except sim_profile.ProfileError as exc:
            raise SimArgsError(f"--hardware {exc}") from None
    except (SpeculativeConfigError, ValueError) as exc:
        raise SimArgsError(str(exc)) from None
    dep = perf_model.Deployment(profile.hardware, target, args.tensor_parallel_size, spec, draft,
                                args.gpu_memory_utilization, acceptance=profile.acceptance)
    if perf_model.kv_capacity_tokens(dep) <= 0:
        raise SimArgsError(
            f"No available memory for the cache blocks: {model} at TP{dep.tp} on {args.hardware} "
            f"does not fit in gpu_memory_utilization={dep.gpu_memory_utilization}. "
            "Try increasing `gpu_memory_utilization` or `tensor_parallel_size`."
        )
    names = tuple(args.served_model_name or [model])
    engine = Engine(dep, max_num_seqs=args.max_num_seqs, time_scale=args.time_scale, seed=args.seed)
    key = os.environ.get("VLLM_API_KEY") or args.api_key   # vLLM's order (api_server.py)
    cfg = ServerConfig(model, names, args.max_model_len or DEFAULT_MAX_MODEL_LEN, key, faults, args.seed,
                       args.per_request_spec_decode_metrics, args.max_concurrent_requests)
    server = SimServer(cfg, engine)
    return server, args.host, args.port


def server_of(argv: list[str]) -> SimServer:
    """The simulator that `loadtest sim ARGV` would serve (the flags it does not know, a vLLM
    fleet's own, are left out), built without listening: a plan's model of a replica."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args, _vllm_only = parser.parse_known_args(argv)
    return build(args)[0]


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s sim: %(message)s")
    try:
        server, host, port = build(args)
    except SimArgsError as exc:
        print(f"loadtest sim: error: {exc}", file=sys.stderr)
        return 2
    try:
        sock = listen(host, port)
    except OSError as exc:
        why = "the port is in use; pick another --port" if exc.errno == errno.EADDRINUSE else exc.strerror or exc
        print(f"loadtest sim: error: cannot listen on {host}:{port}: {why}", file=sys.stderr)
        return 2
    dep = server.engine.dep
    logging.info("serving %s as %s on http://%s:%d (%s, TP%d, speculation=%s, KV capacity %d tokens, time scale %g)",
                 server.cfg.model, ",".join(server.cfg.served_model_names), host, port, dep.hardware.name,
                 dep.tp, dep.spec.to_json() if dep.spec else "none", server.engine.kv_capacity,
                 server.engine.time_scale)
    return asyncio.run(_main(server, sock))


async def _main(server: SimServer, sock: socket.socket) -> int:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await serve(server, sock)
    except asyncio.CancelledError:
        logging.info("shutting down")
    return 0
