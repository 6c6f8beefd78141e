"""How much one simulator process streams, and how punctual its engine steps are.

    python bench/sim_throughput.py [--seconds 10]

Starts `loadtest sim` pinned to CPU 0 and a minimal asyncio client (raw sockets, line reads) pinned
to CPU 1, then:
1. throughput: 256 concurrent streams of baseline (one token per chunk, the costliest case)
   with the time scale shrunk so the engine, not the model, is the limit; prints streamed
   tokens/s and the simulator's CPU use;
2. punctuality: 64 concurrent streams at real time (time scale 1); prints the engine's
   step-start lateness p50/p99 from /sim/info.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from helpers import free_port, start_server

MODEL = "meta-llama/Llama-3.3-70B-Instruct"


def start_sim(time_scale: float, cpu: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc, _ = start_server([sys.executable, "-m", "loadtest", "sim", MODEL, "-tp", "4", "--port", str(port),
                            "--time-scale", str(time_scale), "--max-num-seqs", "512"], port, cpu, "simulator")
    return proc, port


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_stream(port: int, tokens: int) -> int:
    body = json.dumps({"model": MODEL, "prompt": "Tell me a long story. " * 20, "max_tokens": tokens,
                       "ignore_eos": True, "stream": True}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    chunks = 0
    while line := await reader.readline():
        if line.startswith(b"data: {"):
            chunks += 1
        elif line.startswith(b"data: [DONE]"):
            break
    writer.close()
    return chunks


async def drive(port: int, concurrency: int, tokens: int, seconds: float) -> tuple[int, float]:
    done = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            n = await one_stream(port, tokens)  # not `done += await ...`: that reads `done` before awaiting
            done += n

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of each phase (default 10)")
    args = ap.parse_args()
    os.sched_setaffinity(0, {1 % os.cpu_count()})

    proc, port = start_sim(time_scale=0.01, cpu=0)
    try:
        cpu0 = cpu_seconds(proc.pid)
        tokens, wall = asyncio.run(drive(port, 256, 256, args.seconds))
        cpu = cpu_seconds(proc.pid) - cpu0
        print(f"throughput: {tokens / wall:,.0f} streamed tokens/s at 256 concurrent streams, one token per chunk "
              f"(simulator CPU {cpu / wall:.0%} of one core, {tokens:,} tokens in {wall:.1f} s)")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()

    proc, port = start_sim(time_scale=1.0, cpu=0)
    try:
        asyncio.run(drive(port, 64, 128, args.seconds))
        info = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/sim/info", timeout=5))
        lat = info["step_lateness_ms"]
        print(f"punctuality: engine step-start lateness p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms, "
              f"max {lat['max']:.2f} ms over {lat['steps']:,} steps at 64 concurrent streams, real time")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
