"""Files written whole or not at all: a reader (a person, Prometheus, a resumed run, DuckDB on the
records) sees the old file or the new one, never half of one, even when the disk fills mid-write."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def temporary_beside(path: Path) -> Path:
    """Where `path` is written first: a hidden name in the same folder (so the rename is atomic)."""
    return path.with_name(f".{path.name}.tmp")


def _fsync(path: Path, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def replaced(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write; on a clean exit it replaces `path` in one
    rename, after the data reached the disk (fsync), and the rename is synced too (the folder), so
    a power loss leaves the old file or the new one. On any exception the temporary file is removed
    (never a stray one left next to the results) and the exception goes on, so `path` keeps what it
    held before."""
    tmp = temporary_beside(path)
    try:
        yield tmp
        _fsync(tmp)
        tmp.replace(path)
        _fsync(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    """`path.write_text(text)`, whole or not at all."""
    with replaced(path) as tmp:
        tmp.write_text(text)


def write_table(table: pa.Table, path: Path, **options: object) -> None:
    """`pq.write_table(table, path, **options)`, whole or not at all."""
    with replaced(path) as tmp:
        pq.write_table(table, tmp, **options)
