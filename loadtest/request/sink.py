"""Records to Parquet, one complete file per flush, so nothing before the last flush is ever lost.

A Parquet file is only readable once its footer is written; a writer that appends row groups to
one open file loses everything if the process dies. Here each flush writes a new, complete
`part-<worker>-<n>.parquet` (to a temporary name, then an atomic rename), every `flush_rows`
rows or `flush_s` seconds. Writes run on an executor so the caller's event loop never stalls on
compression or disk; under gevent pass a gevent.threadpool.ThreadPoolExecutor (real threads).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

FLUSH_ROWS = 5000   # the bound: a row group at least every 5,000 rows ...
FLUSH_S = 1.0       # ... or every second


class ParquetSink:
    def __init__(self, directory: Path, worker: str, schema: pa.Schema, executor: Executor,
                 flush_rows: int = FLUSH_ROWS, flush_s: float = FLUSH_S,
                 on_flush: Callable[[list[dict]], None] | None = None) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.worker = worker
        self.schema = schema
        self.executor = executor
        self.on_flush = on_flush   # told each batch of rows as it goes to disk (what /metrics counts)
        self.flush_rows = flush_rows
        self.flush_s = flush_s
        self._rows: list[dict] = []
        self._last_flush = time.monotonic()
        # after any part this worker name already wrote (a resumed soak): never overwrite a record
        self._seq = 1 + max((int(p.stem.rsplit("-", 1)[1]) for p in self.dir.glob(f"part-{worker}-*.parquet")
                             if p.stem.rsplit("-", 1)[1].isdigit()), default=-1)
        self._pending: list[Future] = []
        self.rows_written = 0
        self.closed = False

    def add(self, row: dict) -> None:
        if self.closed:
            raise RuntimeError("sink is closed")
        self._rows.append(row)
        if len(self._rows) >= self.flush_rows:
            self.flush()

    def tick(self) -> None:
        """Flush if the time bound has passed; call this periodically."""
        if self._rows and time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        if self.on_flush is not None:
            self.on_flush(rows)
        path = self.dir / f"part-{self.worker}-{self._seq:05d}.parquet"
        self._seq += 1
        still = []
        for fut in self._pending:
            if fut.done():
                fut.result()  # a failed write raises here, not silently later
            else:
                still.append(fut)
        fut = self.executor.submit(self._write, rows, path)
        self._pending = [*still, fut]

    def _write(self, rows: list[dict], path: Path) -> int:
        table = pa.Table.from_pylist(rows, schema=self.schema)
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, tmp, compression="zstd")
        tmp.replace(path)
        self.rows_written += len(rows)
        return len(rows)

    def close(self) -> None:
        """Flush what is buffered and wait for every write; raises if a write failed."""
        if self.closed:
            return
        self.flush()
        for fut in self._pending:
            fut.result()
        self._pending.clear()
        self.closed = True
