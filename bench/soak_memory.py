"""A soak's memory and open files over time: `loadtest soak` on local-sim for --minutes (default
10) with a Locust master and two workers, sampling every process's resident memory (VmRSS) and
open file descriptors from /proc every --every seconds; then the growth of each after the first
minute. Measured and printed, not a timed test.

    python bench/soak_memory.py [--minutes 10] [--rate-scale 2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate-scale", type=float, default=2.0, help="of the soak scenario's arrivals (mean 4 req/s)")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--mode", default="eagle")
    a = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="soak-memory-"))
    argv = [sys.executable, "-m", "loadtest", "soak", "--modes", a.mode, "--duration", f"{a.minutes * 60:g}s",
            "--window", "1m", "--rate-scale", str(a.rate_scale), "--workers", "2", "--out", str(out), "--run-id", "m"]
    print("$", " ".join(argv[2:]), flush=True)
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    run_dir = out / "m"
    samples: list[dict] = []
    started = None
    try:
        while proc.poll() is None:
            time.sleep(a.every)
            try:
                mr = json.loads((run_dir / "manifest.json").read_text())["mode_runs"].get(a.mode, {})
            except (OSError, ValueError):
                continue
            pids = mr.get("locust_pids") or []
            if len(pids) < 3:
                continue
            started = started or time.monotonic()
            roles = {"driver": proc.pid, "master": pids[0], "worker 0": pids[1], "worker 1": pids[2]}
            samples.append({"t": time.monotonic() - started,
                            **{f"{k} rss": rss_mb(p) for k, p in roles.items()},
                            **{f"{k} fds": fds(p) for k, p in roles.items()},
                            "parts": len(list(run_dir.glob("requests/mode=*/part-*.parquet")))})
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait()
    live = [s for s in samples if all(v is not None for v in s.values())]
    first = next((s for s in live if s["t"] >= 60.0), None)
    if first is None or len(live) < 2:
        print(f"too few samples ({len(live)}); the soak exited with {proc.returncode}")
        return 1
    last = live[-1]
    print(f"{len(live)} samples over {last['t'] / 60:.1f} min of replay; the soak exited with {proc.returncode}; "
          f"{last['parts']} record parts")
    (run_dir / "memory-samples.json").write_text(json.dumps(live, indent=1))
    after = [s for s in live if s["t"] >= 60.0]
    t = np.array([s["t"] for s in after]) / 3600
    print(f"{'process':<10} {'RSS at 1 min':>13} {'RSS at end':>11} {'growth':>8} {'peak':>8} {'trend':>10} "
          f"{'fds at 1 min':>13} {'fds at end':>11} {'fds min-max':>12}")
    for role in ("driver", "master", "worker 0", "worker 1"):
        a1, a2 = first[f"{role} rss"], last[f"{role} rss"]
        rss = np.array([s[f"{role} rss"] for s in after])
        slope = np.polyfit(t, rss, 1)[0] if len(after) > 2 else float("nan")   # least squares, MB per hour
        f = [s[f"{role} fds"] for s in after]
        print(f"{role:<10} {a1:>10.1f} MB {a2:>8.1f} MB {(a2 - a1) / a1:>+7.1%} {rss.max():>5.1f} MB "
              f"{slope:>+6.1f} MB/h {first[f'{role} fds']:>13} {last[f'{role} fds']:>11} {min(f):>5}-{max(f):<6}")
    print("(trend: the least-squares slope of RSS after the first minute; the workers' descriptors are mostly "
          "their HTTP connections, as many as requests in flight, which follow the load)")
    print(f"results: {run_dir} (every sample in memory-samples.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
