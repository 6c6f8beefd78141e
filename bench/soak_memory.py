"""A soak's memory and open files over time: `loadtest soak` on local-sim for --minutes (default
10) with a Locust master and two workers, sampling every process's resident memory (VmRSS) and
open file descriptors from /proc every --every seconds; then the growth of each after the first
minute. Measured and printed, not a timed test.

    python bench/soak_memory.py [--minutes 10] [--rate-scale 2] [--settle 60] [-- SOAK-ARGS, e.g. --endpoints STATE]
    python bench/soak_memory.py --from-samples RUN/memory-samples.json --settle 240
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
sys.path.insert(0, str(Path(__file__).parent))

from helpers import rss_mb  # noqa: E402


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
    ap.add_argument("--settle", type=float, default=60.0, help="seconds of replay before growth is counted "
                    "(default 60, the first minute)")
    ap.add_argument("--window", default="1m", help="the soak's SLO window (default 1m)")
    ap.add_argument("--out", type=Path, default=None, help="the results folder (default: a new temporary one)")
    ap.add_argument("--from-samples", type=Path, default=None, metavar="FILE",
                    help="report a finished run's memory-samples.json again (e.g. with another --settle)")
    ap.add_argument("soak_args", nargs=argparse.REMAINDER,
                    help="more arguments for `loadtest soak` (after --), e.g. --endpoints STATE for a held fleet")
    a = ap.parse_args()
    if a.from_samples:
        return report(json.loads(a.from_samples.read_text()), a.settle)
    out = a.out or Path(tempfile.mkdtemp(prefix="soak-memory-"))
    argv = [sys.executable, "-m", "loadtest", "soak", "--modes", a.mode, "--duration", f"{a.minutes * 60:g}s",
            "--window", a.window, "--rate-scale", str(a.rate_scale), "--workers", "2", "--out", str(out),
            "--run-id", "m", *(x for x in a.soak_args if x != "--")]
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
    if len(live) >= 2:
        (run_dir / "memory-samples.json").write_text(json.dumps(live, indent=1))
    print(f"the soak exited with {proc.returncode}; results: {run_dir} (every sample in memory-samples.json)")
    return report(live, a.settle)


def report(live: list[dict], settle_s: float) -> int:
    """Each process's RSS and descriptors from `settle_s` into the replay to the end."""
    after = [s for s in live if s["t"] >= settle_s]
    if len(after) < 3:
        print(f"too few samples after {settle_s:g} s ({len(after)})")
        return 1
    first, last = after[0], after[-1]
    t = np.array([s["t"] for s in after]) / 3600
    print(f"{len(live)} samples over {last['t'] / 60:.1f} min of replay, {last['parts']} record parts; from "
          f"{first['t']:.0f} s on:")
    print(f"{'process':<10} {'RSS then':>10} {'RSS at end':>11} {'growth':>8} {'peak':>9} {'trend':>12} "
          f"{'fds then':>9} {'fds at end':>11} {'fds min-max':>12}")
    for role in ("driver", "master", "worker 0", "worker 1"):
        a1, a2 = first[f"{role} rss"], last[f"{role} rss"]
        rss = np.array([s[f"{role} rss"] for s in after])
        slope = np.polyfit(t, rss, 1)[0]   # least squares, MB per hour
        f = [s[f"{role} fds"] for s in after]
        print(f"{role:<10} {a1:>7.1f} MB {a2:>8.1f} MB {(a2 - a1) / a1:>+7.1%} {rss.max():>6.1f} MB "
              f"{slope:>+7.1f} MB/h {first[f'{role} fds']:>9} {last[f'{role} fds']:>11} {min(f):>6}-{max(f):<5}")
    print("(trend: the least-squares slope of RSS over those samples; the workers' descriptors are mostly their "
          "HTTP connections, as many as requests in flight, which follow the load)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
