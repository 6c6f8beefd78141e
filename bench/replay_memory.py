"""Worker memory over a long replay: runs `loadtest run` with the given arguments and samples the
resident memory of its Locust processes from /proc every --every seconds, then prints the first
minute's, the last and the peak RSS per process, so flat memory (or a leak) shows as numbers.

    python bench/replay_memory.py -- --fleet bench/fleets/baseline-x3.toml --modes baseline \\
        --requests 50000 --rate-scale 2.5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from helpers import rss_mb  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=float, default=30.0, help="seconds between samples (default 30)")
    ap.add_argument("--out", default="results", help="results directory passed to loadtest run")
    ap.add_argument("run_args", nargs=argparse.REMAINDER, help="arguments for `loadtest run` (after --)")
    a = ap.parse_args()
    args = [x for x in a.run_args if x != "--"]
    run_id = f"memory-{time.strftime('%Y%m%dT%H%M%S')}"
    manifest = ROOT / a.out / run_id / "manifest.json"
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "loadtest", "run", "--out", a.out, "--run-id", run_id, *args],
                            cwd=ROOT)
    samples: dict[int, list[tuple[float, float]]] = {}
    next_sample = 0.0
    while proc.poll() is None:
        time.sleep(1.0)
        if time.monotonic() < next_sample:
            continue
        next_sample = time.monotonic() + a.every
        try:
            runs = json.loads(manifest.read_text()).get("mode_runs", {})
        except (OSError, ValueError):
            continue
        for mr in runs.values():
            for pid in mr.get("locust_pids", []):
                mb = rss_mb(pid)
                if mb is not None:
                    samples.setdefault(pid, []).append((time.monotonic() - t0, mb))
    for pid, s in samples.items():
        first = [mb for t, mb in s if t - s[0][0] <= 60]
        print(f"Locust process {pid}: {len(s)} samples over {s[-1][0] - s[0][0]:,.0f} s; RSS first minute "
              f"{min(first):,.0f}-{max(first):,.0f} MB, last {s[-1][1]:,.0f} MB, peak {max(mb for _, mb in s):,.0f} MB")
    print(f"loadtest run exited with {proc.returncode} after {time.monotonic() - t0:,.0f} s; results {manifest.parent}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
