"""The load generator against a reference, in one run: this project's Locust worker (the full
per-chunk measurement and Parquet records on) and a plain asyncio + aiohttp client (the technique
of `vllm bench serve`), against the same fast streaming server (bench/stream_server.py: 64 events
of 4 tokens per response).

    python bench/loadgen.py [--seconds 10]

1. no delay (closed loop, 64 in flight): streamed requests/s and SSE events/s of each, and the
   ratio; the server runs on CPU 0, the client on CPU 1;
2. paced (open loop, 100 requests/s, server TTFT 50 ms then an event every 10 ms): TTFT error,
   client TTFT minus the server's own TTFT for the same request, p50/p99, and client CPU;
3. one Locust worker against a master with two, no delay, unpinned;
and the peak RSS of the Locust worker process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from helpers import free_port, pin, start_server  # noqa: E402

from analysis.reader import read_requests  # noqa: E402
from loadtest.replay import protocol  # noqa: E402
from loadtest.replay.options import ReplayConfig  # noqa: E402
from scenarios.trace import META_CLOSED, trace_table, write_trace  # noqa: E402


def start_stream_server(ttft_ms: float = 0, gap_ms: float = 0) -> tuple[subprocess.Popen, str]:
    port = free_port()
    return start_server([sys.executable, str(ROOT / "bench" / "stream_server.py"), str(port), "--ttft-ms",
                         str(ttft_ms), "--gap-ms", str(gap_ms)], port, 0, "bench server")


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def trace(n: int, rate: float | None, closed: int | None) -> pa.Table:
    t = trace_table({
        "request_id": [f"q{i:06d}" for i in range(n)], "tenant": ["bench"] * n, "domain": ["chat"] * n,
        "language": [None] * n, "offset_s": [i / rate if rate else 0.0 for i in range(n)],
        "api": ["completions"] * n, "prompt": ["hello"] * n, "messages": [None] * n, "max_tokens": [256] * n,
        "temperature": [0.0] * n, "ignore_eos": [False] * n, "prompt_tokens_est": [2] * n,
        "slo_ttft_p99_ms": [None] * n, "slo_tpot_p99_ms": [None] * n, "slo_e2e_p99_ms": [None] * n,
        "prompt_source": ["bench"] * n, "category": [None] * n,
    })
    return t.replace_schema_metadata({META_CLOSED: str(closed).encode()}) if closed else t


def ours(url: str, table: pa.Table, workers: int = 1,
         cpu: int | None = 1) -> tuple[pa.Table, float, float, float | None]:
    """Replay `table` with this project's Locust replay; return records, wall seconds, CPU seconds
    (process start included) and the worker's own CPU share while replaying (start-up excluded)."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        (run_dir / "logs").mkdir()
        path = run_dir / "trace.parquet"
        write_trace(table, path, "bench", "0" * 64)
        config = ReplayConfig(path, "bench", (url,), "bench", "b", run_dir, workers=workers)
        cpu0, t0 = children_cpu(), time.perf_counter()
        cpu_mean = None
        if workers == 1:  # the Locust process pinned to its own core: run here, not by LocustProcess
            out = subprocess.run(config.main_argv(), check=True, capture_output=True, text=True,
                                 preexec_fn=pin(cpu)).stdout
            cpu_mean = next((m.load.cpu_mean for m in map(protocol.parse_line, out.splitlines())
                             if isinstance(m, protocol.LoadReport)), None)
        else:
            port = free_port()
            procs = [subprocess.Popen(config.worker_argv(i, "127.0.0.1", port), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL) for i in range(workers)]
            subprocess.run(config.main_argv("127.0.0.1", port), check=True, capture_output=True)
            for p in procs:
                p.wait(30)
        wall, cpu_s = time.perf_counter() - t0, children_cpu() - cpu0
        return read_requests(run_dir), wall, cpu_s, cpu_mean


def reference(url: str, *args: str) -> tuple[dict, float]:
    cpu0 = children_cpu()
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "reference_client.py"), url, *args], check=True,
                         capture_output=True, text=True, preexec_fn=pin(1))
    return json.loads(out.stdout), children_cpu() - cpu0


def makespan(records: pa.Table) -> float:
    ok = records.filter(pa.compute.equal(records["status"], "ok"))
    return (pa.compute.max(ok["last_token_ns"]).as_py() - pa.compute.min(ok["sent_ns"]).as_py()) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()

    # 1. no delay, closed loop at 64
    server, url = start_stream_server()
    ref, _ = reference(url, "--closed", "64", "--seconds", str(a.seconds))
    ref_rps = ref["requests"] / ref["seconds"]
    n = int(ref_rps * a.seconds)
    recs, _, _, _ = ours(url, trace(n, None, 64))
    peak_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    our_rps = recs.num_rows / makespan(recs)
    events = pa.compute.sum(recs["n_chunks"]).as_py() / makespan(recs)
    print(f"no delay, 64 in flight, one core each: ours {our_rps:,.0f} req/s ({events:,.0f} events/s), "
          f"reference {ref_rps:,.0f} req/s ({ref['events'] / ref['seconds']:,.0f} events/s): "
          f"ratio {our_rps / ref_rps:.2f}")
    print(f"peak RSS of a Locust worker process after {n:,} requests: {peak_rss_mb:,.0f} MB")

    # 3. one worker against two (unpinned; the server shares the machine)
    recs1, _, _, _ = ours(url, trace(n, None, 64), workers=1, cpu=None)
    recs2, _, _, _ = ours(url, trace(n, None, 64), workers=2, cpu=None)
    r1, r2 = recs1.num_rows / makespan(recs1), recs2.num_rows / makespan(recs2)
    print(f"no delay, unpinned: one worker {r1:,.0f} req/s, master + two workers {r2:,.0f} req/s: {r2 / r1:.2f}x "
          f"(on {os.cpu_count()} cores shared with the server)")
    stop(server)

    # 2. paced, open loop at 100 requests/s
    server, url = start_stream_server(ttft_ms=50, gap_ms=10)
    rate = 100.0
    total = int(rate * a.seconds)
    recs, wall, cpu_s, ours_steady = ours(url, trace(total, rate, None))
    server_ttft = json.loads(urllib.request.urlopen(f"{url}/ttfts", timeout=10).read())
    err = np.array([r["ttft_ms"] - server_ttft[f"b-bench-{r['request_id']}"] for r in recs.to_pylist()
                    if r["status"] == "ok"])
    ours_cpu = cpu_s / wall
    urllib.request.urlopen(urllib.request.Request(f"{url}/reset", method="POST"), timeout=5)
    ref, ref_cpu_s = reference(url, "--rate", str(rate), "--seconds", str(a.seconds))
    server_ttft = json.loads(urllib.request.urlopen(f"{url}/ttfts", timeout=10).read())
    ref_err = np.array([t - server_ttft[rid] for rid, t in ref["ttft"].items() if t is not None])
    stop(server)
    print(f"paced at {rate:.0f} req/s, TTFT error (client minus server): ours p50 {np.percentile(err, 50):+.2f} ms "
          f"p99 {np.percentile(err, 99):+.2f} ms over {len(err):,}; reference p50 {np.percentile(ref_err, 50):+.2f} ms "
          f"p99 {np.percentile(ref_err, 99):+.2f} ms over {len(ref_err):,}")
    steady = "unknown" if ours_steady is None else f"{ours_steady:.0%}"
    print(f"client CPU at {rate:.0f} req/s while sending (start-up excluded): ours {steady} of a core, "
          f"reference {ref['cpu_share']:.0%}; with process start: ours {ours_cpu:.0%}, reference "
          f"{ref_cpu_s / ref['seconds']:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
