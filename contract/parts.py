"""Which files of a mode's records folder hold its records: the part files the sink flushes
(`part-<worker>-<n>.parquet`) and the compacted files that replace them once a replay has ended
(`part-compact-<n>.parquet`, loadtest.request.compact), without the parts a compacted file already
holds (a crash between a compaction's rename and its deletes leaves both). Every reader takes the
list from here."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

PREFIX = "part-compact-"
REPLACES = b"loadtest.replaces"   # a compacted file's metadata: the JSON list of the part names it holds


def replaced_by(path: Path) -> list[str]:
    """The names of the part files a compacted file holds."""
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(REPLACES, b"[]"))


def record_parts(folder: Path) -> list[Path]:
    """A mode's record files, in order, without the parts a compacted file already holds."""
    parts = sorted(Path(folder).glob("part-*.parquet"))
    held = {name for p in parts if p.name.startswith(PREFIX) for name in replaced_by(p)}
    return [p for p in parts if p.name not in held]
