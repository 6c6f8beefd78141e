"""A mode's records, compacted once its replay has ended: the many small part files the sink
flushed (one a second per process, so that a crash loses nothing written) become a few large
ones, so a 50,000-request run is tens of files per mode for DuckDB, polars or Spark, not thousands.

Crash-safe in three steps: the compacted file is written under a hidden name (`.compact-…`, which
pyarrow and the other readers skip), renamed into place as `part-compact-<n>.parquet` with the
names of the parts it holds in its metadata, and only then are those parts deleted. A crash
before the rename leaves the parts as they were; one between the rename and the deletes leaves
both, and `record_parts` (which every reader here uses) drops the parts a compacted file names
(the next compaction deletes them). The rows, their order within each part and the schema stay.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from contract.parts import PREFIX, REPLACES, record_parts

log = logging.getLogger("loadtest")
FILE_ROWS = 250_000               # rows in one compacted file at most (a 50,000-request mode: one file)
ROW_GROUP_ROWS = 32_768           # rows per row group (readers skip by row group statistics)


@dataclass(frozen=True)
class Compacted:
    """What a compaction did: the part files it replaced, the files it wrote, the rows they hold."""

    parts: int
    files: int
    rows: int
    read: tuple[str, ...] = ()       # the parts whose every row went through `seen` (their names)
    written: tuple[str, ...] = ()    # the compacted files it wrote (their names)


def compact(folder: Path, file_rows: int = FILE_ROWS, row_group_rows: int = ROW_GROUP_ROWS,
            seen: Callable[[pa.RecordBatch], None] | None = None) -> Compacted:
    """Compact the part files of one mode's records folder (`requests/mode=M/`) that are not
    compacted yet. Run it only when nothing writes there (the replay has ended). `seen` gets every
    batch of rows it reads, so a caller that needs them too (the replay's recount) reads them once."""
    folder = Path(folder)
    existing = record_parts(folder)
    for p in sorted(set(folder.glob("part-*.parquet")) - set(existing)):   # a crash left them: held elsewhere
        p.unlink(missing_ok=True)
    for tmp in folder.glob(".compact-*"):   # a crash before the rename left it: the parts are whole
        tmp.unlink(missing_ok=True)
    parts = [p for p in existing if not p.name.startswith(PREFIX)]
    if len(parts) < 2:
        return Compacted(0, 0, 0)
    seq = 1 + max((int(p.stem.removeprefix(PREFIX)) for p in existing if p.name.startswith(PREFIX)), default=-1)
    files = rows = 0
    read: list[str] = []
    written: list[str] = []
    for group in _groups(parts, file_rows):
        n, name = _write(folder, group, seq + files, row_group_rows, seen)
        rows, files = rows + n, files + 1
        read += [p.name for p in group]
        written.append(name)
        for p in group:
            p.unlink()
    return Compacted(len(parts), files, rows, tuple(read), tuple(written))


def _groups(parts: list[Path], file_rows: int) -> list[list[Path]]:
    """Consecutive parts, each group holding at most `file_rows` rows (a part is never split)."""
    out: list[list[Path]] = [[]]
    rows = 0
    for p in parts:
        n = pq.read_metadata(p).num_rows
        if out[-1] and rows + n > file_rows:
            out.append([])
            rows = 0
        out[-1].append(p)
        rows += n
    return out


def _write(folder: Path, group: list[Path], seq: int, row_group_rows: int,
           seen: Callable[[pa.RecordBatch], None] | None = None) -> tuple[int, str]:
    """One compacted file of `group`'s rows, in place (each batch handed to `seen` too); its row
    count and name."""
    source = ds.dataset(group, format="parquet")
    schema = source.schema.with_metadata({**(source.schema.metadata or {}),
                                          REPLACES: json.dumps([p.name for p in group]).encode()})
    tmp, final = folder / f".compact-{seq:05d}.parquet", folder / f"{PREFIX}{seq:05d}.parquet"
    rows = 0
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            pending: list[pa.RecordBatch] = []
            held = 0
            for part in group:   # part by part, in order: memory is one row group
                for batch in ds.dataset(part, format="parquet").to_batches():
                    if seen is not None:
                        seen(batch)
                    pending.append(batch)
                    held += batch.num_rows
                    if held >= row_group_rows:
                        writer.write_table(pa.Table.from_batches(pending).cast(schema), row_group_size=row_group_rows)
                        rows, pending, held = rows + held, [], 0
            if pending:
                writer.write_table(pa.Table.from_batches(pending).cast(schema), row_group_size=row_group_rows)
                rows += held
        tmp.replace(final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return rows, final.name
