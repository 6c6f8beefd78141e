"""How fast traces build, and how much memory a million-request build takes.

    python bench/trace_build.py [--requests 50000] [--file-requests 1000000] [--scenario NAME|PATH]
                                [--tokenizer TOKENIZER.json]

Builds `saas-mix` at 50,000 requests in memory (`build_trace`), then 1,000,000 requests straight to
Parquet (`build_trace_file`, one row group per 65,536 rows) in a fresh process, and prints wall
time and that process's peak RSS (ru_maxrss). The reference in the same run: the time to draw the
arrivals and lengths alone, so the ratio shows what prompt text costs. With --tokenizer, the
in-memory build again with its prompts cut to that tokenizer's counts (scenarios/tokens.py), and
how many of its generated prompts landed on their drawn length.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import resource, sys, time
from pathlib import Path
from scenarios.spec import load_scenario
from scenarios.trace import build_trace_file, scenario_hash
s, raw = load_scenario("saas-mix")
t = time.perf_counter()
n = build_trace_file(s, Path(sys.argv[1]), scenario_hash(raw), requests=int(sys.argv[2]))
print(n, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def main() -> int:
    from scenarios.spec import load_scenario
    from scenarios.tokens import load_tokenizer
    from scenarios.trace import _plan, build_trace

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=50_000, help="built in memory (default 50,000)")
    ap.add_argument("--file-requests", type=int, default=1_000_000, help="built to Parquet (default 1,000,000)")
    ap.add_argument("--scenario", default="saas-mix", help="built in memory (default saas-mix)")
    ap.add_argument("--tokenizer", help="also build it in memory with this tokenizer.json")
    a = ap.parse_args()
    s, _ = load_scenario(a.scenario)
    t = time.perf_counter()
    _plan(s, a.requests, None, None, None)
    plan_s = time.perf_counter() - t
    t = time.perf_counter()
    table = build_trace(s, requests=a.requests)
    build_s = time.perf_counter() - t
    print(f"{s.name} {a.requests:,} requests in memory: {build_s:.2f} s ({table.nbytes / 1e6:,.0f} MB of Arrow); "
          f"arrivals and lengths alone {plan_s:.3f} s ({build_s / plan_s:.0f}x)")
    if a.tokenizer:
        tokens = load_tokenizer(a.tokenizer)
        t = time.perf_counter()
        cut = build_trace(s, requests=a.requests, tokens=tokens)
        cut_s = time.perf_counter() - t
        drawn = table["prompt_tokens_est"].to_numpy()   # a generated prompt's estimate is its drawn length
        landed = (cut["prompt_tokens_est"].to_numpy() == drawn).mean()
        print(f"{s.name} {a.requests:,} requests in memory cut by {Path(a.tokenizer).name}: {cut_s:.2f} s "
              f"({cut_s / build_s:.1f}x the estimate's; counted {'whole' if tokens.whole else 'by pieces'}); "
              f"{landed:.1%} of the prompts at their estimated length")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.parquet"
        res = subprocess.run([sys.executable, "-c", CHILD, str(out), str(a.file_requests)], capture_output=True,
                             text=True, check=True)
        n, secs, rss_mb = res.stdout.split()
        print(f"saas-mix {int(n):,} requests to Parquet: {float(secs):.1f} s, peak RSS {float(rss_mb):,.0f} MB, "
              f"file {out.stat().st_size / 1e6:,.0f} MB")
    print(f"(this process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
