"""A worker's shard of the trace: rows i with i % count == index, read from the trace file a batch
at a time, so a worker's memory does not grow with the trace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq

from loadtest.replay.dispatcher import Row

# The trace columns a replay reads (scenarios.trace.TRACE_SCHEMA has more).
TRACE_COLUMNS = ["request_id", "tenant", "offset_s", "api", "prompt", "messages", "max_tokens",
                 "temperature", "ignore_eos"]


def shard_size(total: int, index: int, count: int) -> int:
    return len(range(index, total, count))


def iter_shard(trace_file: str, index: int, count: int, batch_rows: int = 4096) -> Iterator[Row]:
    """The deterministic shard `index` of `count`, as (i, row) in trace order."""
    base = 0
    for batch in pq.ParquetFile(trace_file).iter_batches(batch_size=batch_rows, columns=TRACE_COLUMNS):
        cols = {c: batch.column(c).to_pylist() for c in TRACE_COLUMNS}
        for j in range((index - base) % count, batch.num_rows, count):
            yield base + j, {c: cols[c][j] for c in TRACE_COLUMNS}
        base += batch.num_rows


def recorded_ids(records_dir: str | Path, worker: str) -> set[str]:
    """The request ids a worker's part files hold (what it recorded before it was lost)."""
    seen: set[str] = set()
    for part in Path(records_dir).glob(f"part-{worker}-*.parquet"):
        seen.update(pq.read_table(part, columns=["request_id"])["request_id"].to_pylist())
    return seen
