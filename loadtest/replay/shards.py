"""A worker's shard of the trace: rows i with i % count == index, read from the trace a batch at
a time, so a worker's memory does not grow with the trace. A conversation's turns all go to the
shard of its first turn (its later turns wait for the answers before them, in one process). The
trace is a file, or a soak's folder of window parts (scenarios.stream) that the command writes
just ahead of the replay: a part not there yet is waited for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from loadtest.replay.conversations import first_turn_keys
from loadtest.replay.dispatcher import Row
from scenarios.stream import INDEX_FILE, StreamInfo, part_name
from scenarios.trace import closed_concurrency

PART_WAIT_S = 120.0   # a soak's part this late (the command that writes it is gone or stuck): give up

# The trace columns a replay reads (scenarios.trace.TRACE_SCHEMA has more).
TRACE_COLUMNS = ["request_id", "tenant", "offset_s", "api", "prompt", "messages", "max_tokens",
                 "temperature", "ignore_eos"]
TURN_COLUMNS = ["conversation", "turn", "think_s"]   # where the trace has them (older traces do not)


def _conversation_columns(trace: str | Path) -> pa.Table | None:
    """The trace's (conversation, turn) columns, or None where it has no conversations (an older
    trace, one without any, or a soak's folder, which never has them)."""
    path = Path(trace)
    if path.is_dir() or "conversation" not in pq.read_schema(str(path)).names:
        return None
    table = pq.read_table(str(path), columns=["conversation", "turn"])
    return None if table["conversation"].null_count == table.num_rows else table


def shard_keys(trace: str | Path) -> np.ndarray | None:
    """Per row, the number that picks its shard (key % count == index): the row's own index, or for
    a conversation's turn its first turn's; None where the trace has no conversations (the key is
    then the index itself)."""
    table = _conversation_columns(trace)
    return None if table is None else first_turn_keys(table["conversation"].to_pylist())


def conversation_shard(trace: str | Path, index: int, count: int
                       ) -> tuple[np.ndarray | None, list[tuple[str | None, int | None]]]:
    """shard_keys, and the (conversation, turn) of shard `index`'s rows, from one read of the trace."""
    table = _conversation_columns(trace)
    if table is None:
        return None, []
    keys = first_turn_keys(table["conversation"].to_pylist())
    mine = np.flatnonzero(keys % count == index)
    return keys, list(zip(table["conversation"].take(mine).to_pylist(), table["turn"].take(mine).to_pylist(),
                          strict=True))


def shard_size(total: int, index: int, count: int, first: int = 0, keys: np.ndarray | None = None) -> int:
    """Rows i of the shard with first <= i < total."""
    if keys is not None:
        return int(np.count_nonzero(keys[first:total] % count == index))
    return len(range(index, total, count)) - len(range(index, min(first, total), count))


def _picks(base: int, rows: int, index: int, count: int, first: int, keys: np.ndarray | None) -> list[int]:
    """Which rows j of a batch of `rows` starting at trace row `base` are the shard's, from `first` on."""
    if keys is not None:
        return [j for j in np.flatnonzero(keys[base:base + rows] % count == index).tolist() if base + j >= first]
    return [j for j in range((index - base) % count, rows, count) if base + j >= first]


def trace_rows(trace: str | Path) -> int:
    """How many requests the trace (a file or a soak's folder) schedules."""
    path = Path(trace)
    return StreamInfo.read(path).rows if path.is_dir() else pq.ParquetFile(str(path)).metadata.num_rows


def trace_closed(trace: str | Path) -> int | None:
    """The trace's closed-loop concurrency (None: open loop; a soak's folder always is)."""
    path = Path(trace)
    return None if path.is_dir() else closed_concurrency(pq.read_schema(str(path)))


def trace_tenants(trace: str | Path) -> list[str]:
    """The tenants the trace schedules (a soak's: those of the parts written so far)."""
    files = [p for p in Path(trace).glob("part-*.parquet")] if Path(trace).is_dir() else [Path(trace)]
    names: set[str] = set()
    for path in files:
        names.update(pq.read_table(str(path), columns=["tenant"])["tenant"].unique().to_pylist())
    return sorted(names)


def _files(trace: Path) -> Iterator[Path]:
    if not trace.is_dir():
        yield trace
        return
    for k in range(StreamInfo.read(trace).parts):
        path, waited = trace / part_name(k), 0.0
        while not path.exists():
            if waited >= PART_WAIT_S:
                raise RuntimeError(f"{path}: not written {PART_WAIT_S:g} s after it was due (is the soak's "
                                   "command still running?)")
            time.sleep(0.2)   # under Locust, gevent's (it patches time)
            waited += 0.2
        yield path


def iter_shard(trace_file: str | Path, index: int, count: int, batch_rows: int = 4096, first: int = 0,
               keys: np.ndarray | None = None) -> Iterator[Row]:
    """The deterministic shard `index` of `count`, as (i, row) in trace order, from row `first` on
    (where a resumed soak goes on: the rows before it are recorded already); `keys`: shard_keys'."""
    base = 0
    for path in _files(Path(trace_file)):
        meta = pq.ParquetFile(str(path))
        rows = meta.metadata.num_rows
        if base + rows > first:   # a part wholly before `first` is not even read
            columns = TRACE_COLUMNS + [c for c in TURN_COLUMNS if c in meta.schema_arrow.names]
            for batch in meta.iter_batches(batch_size=batch_rows, columns=columns):
                cols = {c: batch.column(c).to_pylist() for c in columns}
                for j in _picks(base, batch.num_rows, index, count, first, keys):
                    yield base + j, {c: cols[c][j] for c in columns}
                base += batch.num_rows
        else:
            base += rows


INDEX_COLUMNS = ["request_id", "tenant", "offset_s"]


def iter_index(trace_file: str | Path, index: int, count: int, first: int = 0, keys: np.ndarray | None = None
               ) -> Iterator[Row]:
    """The shard's rows from `first` on with only their id, tenant and offset (what a not_sent
    or lost record needs), never waiting: a soak's come from its index, not its parts."""
    path = Path(trace_file)
    source = pq.ParquetFile(str(path / INDEX_FILE if path.is_dir() else path))
    base = 0
    for batch in source.iter_batches(batch_size=65536, columns=INDEX_COLUMNS):
        cols = {c: batch.column(c).to_pylist() for c in INDEX_COLUMNS}
        for j in _picks(base, batch.num_rows, index, count, first, keys):
            yield base + j, {c: cols[c][j] for c in INDEX_COLUMNS}
        base += batch.num_rows


class ShardRows:
    """A shard's rows as the dispatcher takes them; `rest()` is what it never took, from the index
    (a replay stopped early records those as not_sent without waiting for a soak's later parts)."""

    def __init__(self, trace_file: str | Path, index: int, count: int, first: int = 0,
                 keys: np.ndarray | None = None) -> None:
        self.trace_file, self.index, self.count, self.keys = trace_file, index, count, keys
        self.next_row = first
        self._rows = iter_shard(trace_file, index, count, first=first, keys=keys)

    def __iter__(self) -> ShardRows:
        return self

    def __next__(self) -> Row:
        row = next(self._rows)
        self.next_row = row[0] + 1
        return row

    def rest(self) -> Iterator[Row]:
        self._rows.close()
        return iter_index(self.trace_file, self.index, self.count, first=self.next_row, keys=self.keys)


def recorded_ids(records_dir: str | Path, worker: str) -> set[str]:
    """The request ids a worker's part files hold (what it recorded before it was lost)."""
    seen: set[str] = set()
    for part in Path(records_dir).glob(f"part-{worker}-*.parquet"):
        seen.update(pq.read_table(part, columns=["request_id"])["request_id"].to_pylist())
    return seen
