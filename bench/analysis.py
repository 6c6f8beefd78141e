"""How fast the analysis summarises a large run, against DuckDB computing the same exact
percentiles on the same files, in the same run.

    .venv/bin/python bench/analysis.py                 # 10,000,000 rows (writes ~2.9 GB once)
    .venv/bin/python bench/analysis.py --rows 1000000

It writes a synthetic result dataset in the record contract (bench/synthetic_records.py: 5 modes,
5 tenants, list columns as long as the completions), then runs each engine in its own process
(so each has its own peak RSS) on two parts of the summary:

- per request: counts by status and error kind, TTFT/TPOT/E2E (from the send and from the
  scheduled time) and lateness at p50/p90/p95/p99/max, token and completion sums, per (mode,
  tenant) and per mode; this project also pairs every mode's requests with the baseline's and
  bootstraps the speedup intervals, which DuckDB does not, and that time is printed apart;
- per chunk: ITL per chunk and per token, and tokens per step, over the list columns.

It prints each engine's seconds, the ratio (this project / DuckDB), the peak RSS, and the largest
difference between the two engines' percentiles (they compute the same linear interpolation).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

# this file's folder would shadow the `analysis` package: import from the project root instead
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

QS = (0.5, 0.9, 0.95, 0.99)
SCALARS = ("ttft_ms", "tpot_ms", "e2e_ms", "ttft_sched_ms", "e2e_sched_ms")


def _stats_of(rows, names) -> dict[str, float]:
    """DuckDB rows (mode, tenant or None, then per name a list of quantiles and a max) as keys
    like this project's long summary."""
    out = {}
    for row in rows:
        mode, tenant = row[0], row[1] or "all"
        for i, name in enumerate(names):
            qs, top = row[2 + 2 * i], row[3 + 2 * i]
            for q, v in zip(QS, qs or [], strict=False):
                out[f"{mode}|{tenant}|{name}|p{round(q * 100)}"] = v
            out[f"{mode}|{tenant}|{name}|max"] = top
    return out


def duckdb_engine(data: Path, part: str) -> dict:
    import duckdb

    con = duckdb.connect()
    src = f"read_parquet('{data}/requests/*/*.parquet', hive_partitioning = true)"
    qs = "[" + ", ".join(map(str, QS)) + "]"
    sets = "GROUP BY GROUPING SETS ((mode, tenant), (mode))"
    t0 = time.perf_counter()
    if part == "requests":
        con.sql(f"SELECT mode, tenant, status, error_kind, count(*) FROM {src} "
                "GROUP BY GROUPING SETS ((mode, tenant, status, error_kind), (mode, status, error_kind))").fetchall()
        agg = ", ".join(f"quantile_cont({c}, {qs}), max({c})" for c in SCALARS)
        ok = con.sql(f"SELECT mode, tenant, {agg}, sum(completion_tokens), sum(n_chunks), max(last_token_ns), "
                     f"min(scheduled_ns) FROM {src} WHERE status = 'ok' {sets}").fetchall()
        late = con.sql(f"SELECT mode, tenant, quantile_cont(lateness_ms, {qs}), max(lateness_ms) FROM {src} {sets}"
                       ).fetchall()
        stats = {**_stats_of(ok, SCALARS), **_stats_of(late, ["lateness_ms"])}
    else:
        rows = con.sql(f"""WITH chunk AS (
            SELECT mode, tenant, unnest(itl_ms[2:]) AS gap, unnest(chunk_tokens[2:]) AS tokens
            FROM {src} WHERE status = 'ok')
            SELECT mode, tenant, quantile_cont(gap, {qs}), max(gap),
                   quantile_cont(gap / tokens, {qs}) FILTER (WHERE tokens > 0), max(gap / tokens) FILTER (tokens > 0),
                   sum(tokens) / count(tokens)
            FROM chunk {sets}""").fetchall()
        stats = _stats_of(rows, ["itl_chunk_ms", "itl_token_ms"])
    return {"seconds": {"total": time.perf_counter() - t0}, "stats": stats}


def our_engine(data: Path, part: str) -> dict:
    import pyarrow.compute as pc

    from analysis import long_summary as ls
    from analysis.cells import cells_of
    from analysis.reader import read_requests
    from bench.synthetic_records import MODES

    seconds = {"read": 0.0, "statistics": 0.0}
    rows: ls.Rows = {}
    t0 = time.perf_counter()
    if part == "requests":
        # the columns the per-request figures read (of those `loadtest run`'s summary reads, less the
        # ids, read apart below, and the per-request acceptance counts, which neither engine sums here)
        table = read_requests(data, columns=ls.REQUEST_COLUMNS)
        seconds["read"] = time.perf_counter() - t0
        t = time.perf_counter()
        cells = cells_of(table, list(MODES))
        ok = pc.equal(table["status"], "ok").to_numpy(zero_copy_only=False)
        ls._request_rows(rows, table, cells, ok)
        seconds["statistics"] = time.perf_counter() - t
        seconds["total"] = time.perf_counter() - t0
        t = time.perf_counter()   # DuckDB computes no intervals: their time (reading the ids too) is apart
        table = table.append_column("request_id", read_requests(data, columns=["request_id"])["request_id"])
        ls._speedup_rows(rows, table, cells, ok, "baseline")
        seconds["paired intervals"] = time.perf_counter() - t
    else:
        for mode in MODES:        # one mode's list columns in memory at a time
            t = time.perf_counter()
            table = read_requests(data, columns=["mode", "tenant", "status", "itl_ms", "chunk_tokens"],
                                  filter=pc.field("mode") == mode)
            seconds["read"] += time.perf_counter() - t
            t = time.perf_counter()
            ok = pc.equal(table["status"], "ok").to_numpy(zero_copy_only=False)
            ls._chunk_rows(rows, table, cells_of(table, [mode]), ok)
            seconds["statistics"] += time.perf_counter() - t
            del table
        seconds["total"] = time.perf_counter() - t0
    stats = {f"{m}|{tn}|{metric}|{stat}": v for (m, tn), items in rows.items()
             for metric, stat, v, _, _ in items if stat.startswith("p") or stat == "max"}
    return {"seconds": seconds, "stats": stats}


def run_child(engine: str, data: Path, part: str) -> dict:
    """One engine on one part in a fresh process: its result and its own peak RSS (or, when it
    failed, its last line of error and that peak)."""
    out = data / f".{engine}-{part}.json"
    out.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, __file__, "--child", engine, "--part", part, "--data", str(data),
                             "--out", str(out)], stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        lines = [line for line in err.splitlines() if "Error" in line] or err.splitlines()[-1:] or ["?"]
        return {"failed": lines[-1].strip(), "peak_rss_mb": usage.ru_maxrss / 1024}
    result = json.loads(out.read_text())
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


def largest_difference(a: dict, b: dict) -> tuple[float, int]:
    common = [k for k in a if k in b and a[k] is not None and b[k] is not None]
    worst = max((abs(a[k] - b[k]) / max(abs(b[k]), 1e-12) for k in common), default=float("nan"))
    return worst, len(common)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000_000, help="request rows in all (default 10,000,000)")
    p.add_argument("--data", type=Path, help="where the dataset is written and kept (default /tmp/…-ROWS)")
    p.add_argument("--parts", default="requests,chunks", help="requests, chunks or both (default both)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--part", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        engine = duckdb_engine if args.child == "duckdb" else our_engine
        args.out.write_text(json.dumps(engine(args.data, args.part)))
        return 0
    from bench.synthetic_records import write_dataset

    data = args.data or Path(f"/tmp/loadtest-bench-analysis-{args.rows}")
    marker = data / ".complete"
    if not marker.exists():
        print(f"writing {args.rows:,} rows to {data} ...", flush=True)
        t = time.perf_counter()
        size = write_dataset(data, args.rows)
        marker.write_text(str(args.rows))
        print(f"  {size / 1e9:.2f} GB in {time.perf_counter() - t:.0f} s", flush=True)
    print(f"{args.rows:,} rows in {data}, {os.cpu_count()} cores; each engine in its own process")
    failed = 0
    for part in args.parts.split(","):
        duck = run_child("duckdb", data, part)
        ours = run_child("ours", data, part)
        print(f"\n{part}:")
        for name, r in ((f"duckdb {duckdb_version()}", duck), ("loadtest", ours)):
            if "failed" in r:
                failed += r is ours   # the reference failing (DuckDB out of memory at 10M rows) is a finding
                print(f"  {name:13} failed: {r['failed']} (peak RSS {r['peak_rss_mb']:,.0f} MB)")
                continue
            detail = ", ".join(f"{k} {v:.2f} s" for k, v in r["seconds"].items() if k != "total")
            print(f"  {name:13} {r['seconds']['total']:6.2f} s, peak RSS {r['peak_rss_mb']:,.0f} MB"
                  + (f" ({detail})" if detail else ""))
        if "failed" not in duck and "failed" not in ours:
            worst, compared = largest_difference(ours["stats"], duck["stats"])
            print(f"  ratio loadtest / duckdb: {ours['seconds']['total'] / duck['seconds']['total']:.2f}; "
                  f"{compared} percentiles compared, largest relative difference {worst:.1e}")
    print(f"\n(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB)")
    return 1 if failed else 0


def duckdb_version() -> str:
    import duckdb

    return duckdb.__version__


if __name__ == "__main__":
    sys.exit(main())
