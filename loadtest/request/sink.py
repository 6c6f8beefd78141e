"""Records to Parquet, one complete file per flush, so nothing before the last flush is ever lost.

A Parquet file is only readable once its footer is written; a writer that appends row groups to
one open file loses everything if the process dies. Here each flush writes a new, complete
`part-<worker>-<n>.parquet` (to a temporary name, then an atomic rename), every `flush_rows`
rows or `flush_s` seconds. Writes run on an executor so the caller's event loop never stalls on
compression or disk; under gevent pass a gevent.threadpool.ThreadPoolExecutor (real threads).

A write that fails (a full disk: ENOSPC, EFBIG, EIO, any OSError) removes its temporary file and
stops the sink: it writes nothing more, so the part files on disk are exactly `rows_written` rows,
each file complete, and every later row is counted in `rows_lost`. `error` says so at once (the
replay polls it and stops); `close()` raises it as RecordsNotWritten.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path

import pyarrow as pa

from common import files
from common.exits import os_error_text
from contract.records import STORABLE_ERRORS, unstorable

FLUSH_ROWS = 5000   # the bound: a row group at least every 5,000 rows ...
FLUSH_S = 1.0       # ... or every second


class RecordsNotWritten(Exception):
    """Records could not be written to `directory` (the OS error in `error`): `written` rows are
    on disk in complete part files, `lost` rows given to the sink are not."""

    def __init__(self, directory: Path, error: str, written: int = 0, lost: int = 0) -> None:
        super().__init__(f"could not write records to {directory}: {error}")
        self.directory, self.error, self.written, self.lost = directory, error, written, lost


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
        self._lost = [0, 0]   # rows given to the sink and not written: counted here, and in the writer thread
        self.error: RecordsNotWritten | None = None   # the first failed write; then nothing more is written
        self._bug: Exception | None = None             # a failed write that was no OSError (raised by close)
        self.closed = False

    def add(self, row: dict) -> None:
        if self.closed:
            raise RuntimeError("sink is closed")
        if self.failed:
            self._lost[0] += 1
            return
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
        self._pending = [f for f in self._pending if not f.done()]
        if self.failed:
            self._lost[0] += len(rows)
            return
        path = self.dir / f"part-{self.worker}-{self._seq:05d}.parquet"
        self._seq += 1
        try:
            self._pending.append(self.executor.submit(self._write, rows, path))
        except BaseException:   # killed (a GreenletExit) while it waited for a full pool: the rows stay
            self._rows = rows + self._rows   # for the next flush, and close() writes them
            raise
        if self.on_flush is not None:
            self.on_flush(rows)

    @property
    def failed(self) -> bool:
        """A write failed: the sink writes nothing more."""
        return self.error is not None or self._bug is not None

    @property
    def rows_lost(self) -> int:
        return sum(self._lost)

    def _write(self, rows: list[dict], path: Path) -> int:
        if self.failed:  # an earlier write failed: stop, even if a smaller file would fit now
            self._lost[1] += len(rows)
            return 0
        try:   # never a half-written file next to the parts
            files.write_table(storable(rows, self.schema), path, compression="zstd")
        except Exception as exc:
            self._lost[1] += len(rows)
            if isinstance(exc, OSError):
                self.error = RecordsNotWritten(self.dir, os_error_text(exc))
            else:
                self._bug = exc
            return 0
        self.rows_written += len(rows)
        return len(rows)

    def close(self) -> None:
        """Flush what is buffered and wait for every write; raises RecordsNotWritten if a write
        failed (with how many rows are on disk and how many are not), or what a write that was no
        OSError raised (a bug)."""
        if self.closed:
            return
        self.flush()
        for fut in self._pending:
            fut.result()
        self._pending.clear()
        self.closed = True
        if self._bug is not None:
            raise self._bug
        if self.error is not None:
            self.error.written, self.error.lost = self.rows_written, self.rows_lost
            raise self.error


def storable(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """`rows` as a table of `schema`; a row with a value the schema cannot hold becomes its
    request's `error`/`unstorable` row (records.unstorable), never an exception that loses the
    part: every request stays one row."""
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except STORABLE_ERRORS:
        pass
    kept = []
    for row in rows:
        try:
            pa.Table.from_pylist([row], schema=schema)
            kept.append(row)
        except STORABLE_ERRORS:
            if not isinstance(row.get("request_id"), str):   # not a request's record: a bug, said as one
                raise
            kept.append(unstorable(row, schema))
    return pa.Table.from_pylist(kept, schema=schema)
