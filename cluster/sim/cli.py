"""`loadtest sim`: the simulator's command line, shaped like `vllm serve`."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import signal
import socket
import sys

from cluster.sim.config import DEFAULT_MAX_MODEL_LEN, SimArgsError, SimConfig, build_server
from cluster.sim.faults import FAULT_HELP
from cluster.sim.profiles import HARDWARE
from cluster.sim.server import SimServer, listen, serve

D = SimConfig(model="")   # the defaults, written once in the record


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_tag", nargs="?", metavar="MODEL",
                   help="Model to serve (Hugging Face name), as in `vllm serve MODEL`.")
    p.add_argument("--model", dest="model_flag", help="Same as the positional MODEL.")
    p.add_argument("--host", default=D.host, help=f"Address to bind (default {D.host}, loopback only).")
    p.add_argument("--port", type=int, default=D.port, help=f"Port to listen on (default {D.port}).")
    p.add_argument("--served-model-name", nargs="+", help="Name(s) the API answers to (default: MODEL).")
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=D.tensor_parallel_size,
                   help="GPUs the target is split over.")
    p.add_argument("--speculative-config", help="vLLM speculative config as JSON, e.g. "
                   '\'{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}\'.')
    p.add_argument("--max-num-seqs", type=int, default=D.max_num_seqs,
                   help=f"Most sequences in one batch (vLLM default {D.max_num_seqs}).")
    p.add_argument("--max-model-len", type=int, default=None, help=f"Context length (default {DEFAULT_MAX_MODEL_LEN}).")
    p.add_argument("--gpu-memory-utilization", type=float, default=D.gpu_memory_utilization,
                   help=f"Fraction of GPU memory vLLM may use (default {D.gpu_memory_utilization}).")
    p.add_argument("--api-key", help="Require `Authorization: Bearer KEY` on /v1 routes (default: $VLLM_API_KEY, "
                   "as vLLM reads it; the environment keeps the key off the command line).")
    p.add_argument("--per-request-spec-decode-metrics", choices=("none", "summary", "detailed"),
                   default=D.per_request_spec_decode_metrics,
                   help="As vLLM 0.29+: add each request's acceptance (metrics.speculative_decoding) to its "
                        "response, on the final usage chunk of a stream (default none; detailed = summary here).")
    sim = p.add_argument_group("simulator-only options")
    sim.add_argument("--hardware", default=D.hardware, metavar="NAME|FILE",
                     help=f"GPU profile: {', '.join(sorted(HARDWARE))} (default {D.hardware}), or a profile file "
                          "fitted to a real fleet by `loadtest calibrate` (efficiencies, overheads, acceptance).")
    sim.add_argument("--seed", type=int, default=D.seed, help=f"Seed of the acceptance draws (default {D.seed}).")
    sim.add_argument("--fault", default=None, metavar="LIST", help=FAULT_HELP)
    sim.add_argument("--max-concurrent-requests", type=int, default=D.max_concurrent_requests, metavar="N",
                     help=f"Answer 503 to requests past N in flight at once (default {D.max_concurrent_requests}), "
                          "so a stray client cannot exhaust the simulator's memory; bodies over 64 MiB get 413.")
    sim.add_argument("--time-scale", type=float, default=D.time_scale,
                     help="Multiply every simulated duration by this (e.g. 0.1 runs 10x faster; default 1).")


def config_of(args: argparse.Namespace) -> SimConfig:
    """The parsed command line as the simulator's typed configuration."""
    return SimConfig(model=args.model_flag or args.model_tag or "",
                     served_model_names=tuple(args.served_model_name or ()), host=args.host, port=args.port,
                     tensor_parallel_size=args.tensor_parallel_size, speculative_config=args.speculative_config,
                     max_num_seqs=args.max_num_seqs, max_model_len=args.max_model_len,
                     gpu_memory_utilization=args.gpu_memory_utilization, api_key=args.api_key,
                     per_request_spec_decode_metrics=args.per_request_spec_decode_metrics, hardware=args.hardware,
                     seed=args.seed, fault=args.fault, max_concurrent_requests=args.max_concurrent_requests,
                     time_scale=args.time_scale)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s sim: %(message)s")
    cfg = config_of(args)
    host, port = cfg.host, cfg.port
    try:
        server = build_server(cfg)
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
