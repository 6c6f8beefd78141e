"""A synthetic result dataset in the record contract (contract.records.REQUEST_SCHEMA), for the
analysis benchmark: `requests/mode=M/part-K.parquet`, every mode replaying the same request ids,
five tenants with their own length and latency profiles, a few errors, timeouts and not-sent
rows, and the list columns (`itl_ms`, `chunk_tokens`) as long as the completions make them.

The distributions are shaped like a real run's (lognormal latencies, a tenant's outputs longer
than another's, more tokens per chunk under speculation) but are not a model of any server: the
benchmark measures how fast the analysis reads and summarises, not what it finds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from contract.records import REQUEST_SCHEMA

MODES = ("baseline", "draft", "eagle", "medusa", "ngram")
TENANTS = ("chat", "code-agent", "doc-summarize", "rag", "sql-analytics")
TOKENS_PER_CHUNK = {"baseline": 1.0, "draft": 2.2, "eagle": 2.8, "medusa": 2.4, "ngram": 1.6}
OUTPUT_MEDIAN = {"chat": 96, "code-agent": 160, "doc-summarize": 48, "rag": 64, "sql-analytics": 40}
ROWS_PER_PART = 500_000


def _lists(lengths: np.ndarray, values: np.ndarray, type_: pa.DataType) -> pa.ListArray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=type_.value_type))


def part(rng: np.random.Generator, mode: str, first: int, n: int, run_id: str = "bench") -> pa.Table:
    """Rows `first` .. `first + n` of one mode."""
    ids = np.arange(first, first + n)
    tenant = ids % len(TENANTS)
    median = np.array([OUTPUT_MEDIAN[t] for t in TENANTS])[tenant]
    completion = np.maximum(1, rng.lognormal(np.log(median), 0.6)).astype(np.int32)
    per_chunk = TOKENS_PER_CHUNK[mode]
    chunks = np.maximum(1, np.minimum(completion, np.round(completion / per_chunk))).astype(np.int32)
    status = np.full(n, "ok", dtype=object)
    draw = rng.random(n)
    status[draw < 0.004] = "error"
    status[(draw >= 0.004) & (draw < 0.005)] = "timeout"
    status[(draw >= 0.005) & (draw < 0.006)] = "not_sent"
    sent = status != "not_sent"
    ok = status == "ok"
    scheduled = 1_700_000_000_000_000_000 + (ids * 2_000_000).astype(np.int64)   # 500 req/s offered
    lateness = np.where(sent, rng.exponential(0.8, n), np.nan)
    ttft = np.where(ok, rng.lognormal(np.log(60), 0.5, n), np.nan)
    tpot = np.where(ok & (completion > 1), rng.lognormal(np.log(18 / per_chunk ** 0.7), 0.3, n), np.nan)
    e2e = np.where(ok, ttft + np.nan_to_num(tpot) * (completion - 1), np.nan)
    sent_ns = np.where(sent, scheduled + (np.nan_to_num(lateness) * 1e6).astype(np.int64), 0)
    lengths = np.where(ok, chunks, 0)
    total = int(lengths.sum())
    gaps = rng.lognormal(np.log(18), 0.5, total).astype(np.float32)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[ok]
    gaps[starts] = ttft[ok]                              # itl_ms[0] is the TTFT
    # tokens per chunk: the completion spread over the chunks, the remainder on the first ones
    per = np.repeat(completion // np.maximum(chunks, 1), lengths)
    rank = np.arange(total) - np.repeat(np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    per += (rank < np.repeat(completion % np.maximum(chunks, 1), lengths)).astype(per.dtype)
    null_lists = pa.array(~ok)
    itl = _lists(lengths, gaps, pa.list_(pa.float32()))
    tokens = _lists(lengths, per.astype(np.int32), pa.list_(pa.int32()))
    itl = pa.ListArray.from_arrays(itl.offsets, itl.values, mask=null_lists)
    tokens = pa.ListArray.from_arrays(tokens.offsets, tokens.values, mask=null_lists)
    first_ns = np.where(ok, sent_ns + (np.nan_to_num(ttft) * 1e6).astype(np.int64), 0)
    last_ns = np.where(ok, sent_ns + (np.nan_to_num(e2e) * 1e6).astype(np.int64), 0)
    columns = {
        "run_id": pa.array(np.full(n, run_id)), "mode": pa.array(np.full(n, mode)),
        "replica": pa.array([f"{mode}-0"] * n), "worker": pa.array([f"w{i % 4}" for i in range(n)]),
        "tenant": pa.array(np.array(TENANTS)[tenant]), "request_id": pa.array([f"r{i:08d}" for i in ids]),
        "status": pa.array(status.astype(str)), "scheduled_ns": pa.array(scheduled),
        "sent_ns": pa.array(sent_ns, mask=~sent), "first_token_ns": pa.array(first_ns, mask=~ok),
        "last_token_ns": pa.array(last_ns, mask=~ok), "offset_s": pa.array(ids * 0.002),
        "lateness_ms": pa.array(lateness, from_pandas=True), "ttft_ms": pa.array(ttft, from_pandas=True),
        "tpot_ms": pa.array(tpot, from_pandas=True), "e2e_ms": pa.array(e2e, from_pandas=True),
        "ttft_sched_ms": pa.array(ttft + lateness, from_pandas=True),
        "e2e_sched_ms": pa.array(e2e + lateness, from_pandas=True),
        "itl_ms": itl, "chunk_tokens": tokens, "n_chunks": pa.array(np.where(sent, lengths, 0).astype(np.int32)),
        "prompt_tokens": pa.array(rng.integers(64, 2048, n).astype(np.int32)),
        "completion_tokens": pa.array(completion, mask=~ok),
        "finish_reason": pa.array(np.where(ok, "length", None)),
        "http_status": pa.array(np.where(sent, 200, 0).astype(np.int32), mask=~sent),
        "error_kind": pa.array(np.where(status == "error", "server_error", np.where(status == "timeout", "deadline",
                                                                                     None))),
        "error": pa.array([None] * n, type=pa.string()),
        "attempts": pa.array(np.ones(n, dtype=np.int32), mask=~sent),
    }
    return as_contract(columns, n)


def as_contract(columns: dict[str, pa.Array], n: int) -> pa.Table:
    """`columns` as a table of the record contract: in its order and types, every column this
    benchmark does not model (the per-request acceptance, a Retry-After, whatever the contract
    gains next) null, as a record without them reads. A required column not modelled is an error."""
    missing = [f.name for f in REQUEST_SCHEMA if f.name not in columns and not f.nullable]
    if missing:
        raise ValueError(f"the synthetic records do not model the required columns {missing}")
    full = {f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in REQUEST_SCHEMA}
    return pa.table(full).cast(REQUEST_SCHEMA)


def write_dataset(run_dir: Path, rows: int, seed: int = 2026) -> int:
    """`rows` request rows (split evenly over the modes) under `run_dir/requests/`; the bytes
    written."""
    rng = np.random.default_rng(seed)
    per_mode = rows // len(MODES)
    size = 0
    for mode in MODES:
        folder = run_dir / "requests" / f"mode={mode}"
        folder.mkdir(parents=True, exist_ok=True)
        for k, first in enumerate(range(0, per_mode, ROWS_PER_PART)):
            table = part(rng, mode, first, min(ROWS_PER_PART, per_mode - first))
            path = folder / f"part-{k:04d}.parquet"
            pq.write_table(table, path, compression="zstd")   # as loadtest.request.sink writes
            size += path.stat().st_size
    return size
