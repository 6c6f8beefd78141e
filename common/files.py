"""Files written whole or not at all: a reader (a person, Prometheus, a resumed run, DuckDB on the
records) sees the old file or the new one, never half of one, even when the disk fills mid-write."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)


class NotWritten(OSError):
    """A result file that could not be written (a full disk, say): the OS error, with the file's
    path; the file keeps what it held before."""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(exc.errno, os.strerror(exc.errno) if exc.errno else str(exc), str(path))
        self.path = path


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
    (never a stray one left next to the results) and the exception goes on, an OSError as
    NotWritten, so `path` keeps what it held before."""
    tmp = temporary_beside(path)
    try:
        yield tmp
        _fsync(tmp)
        tmp.replace(path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, NotWritten):
            raise NotWritten(path, exc) from exc
        raise
    try:   # the file is written whole; a folder that cannot be synced does not unwrite it
        _fsync(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        log.warning("wrote %s, but could not sync its folder: %s", path, exc)


def write_text(path: Path, text: str) -> None:
    """`path.write_text(text)`, whole or not at all."""
    with replaced(path) as tmp:
        tmp.write_text(text)


def write_table(table: pa.Table, path: Path, **options: object) -> None:
    """`pq.write_table(table, path, **options)`, whole or not at all."""
    with replaced(path) as tmp:
        pq.write_table(table, tmp, **options)
