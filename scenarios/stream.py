"""A trace written as it is replayed: a folder of window parts (`part-00000.parquet` holds the
requests sent in the first `window_s` seconds, and so on) and `_plan.json` (how many requests,
parts and seconds in all), for soak tests of hours.

The random draws for every request (arrival, tenant, lengths; about 60 bytes a request) are made
once, up front, so the trace is the same one `build_trace` gives for the same arguments; the
prompts, nearly all of a trace's bytes, are made a part at a time, just ahead of the replay, so
the whole trace is never in memory. Parts are written to a temporary name and renamed, so a
reader never sees half of one; a soak resumed later writes the parts it lacks, the same again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from scenarios import ScenarioError
from scenarios.spec import Closed, Scenario
from scenarios.tokens import TokenCounter
from scenarios.trace import META_HASH, META_NAME, TRACE_SCHEMA, _materialize, _plan, counted_by

PLAN_FILE = "_plan.json"   # "_": a pyarrow dataset over the folder skips it
INDEX_FILE = "_index.parquet"   # every request's id, tenant and offset, written at the start


def part_name(k: int) -> str:
    return f"part-{k:05d}.parquet"


@dataclass(frozen=True)
class StreamInfo:
    """What plan.json says: the folder's requests, parts and their span."""

    rows: int
    parts: int
    window_s: float
    duration_s: float
    scenario: str
    sha256: str

    @classmethod
    def read(cls, folder: Path) -> StreamInfo:
        try:
            return cls(**json.loads((Path(folder) / PLAN_FILE).read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise ScenarioError(f"{folder}: not a streamed trace ({PLAN_FILE}: {exc})") from None


class TraceStream:
    """The trace of `scenario` over `duration_s` seconds, in parts of `window_s` seconds."""

    def __init__(self, scenario: Scenario, sha256: str, duration_s: float, window_s: float = 60.0,
                 seed: int | None = None, rate_scale: float | None = None, tokens: TokenCounter | None = None) -> None:
        if isinstance(scenario.arrival, Closed):
            raise ScenarioError(f"{scenario.name}: a soak needs open-loop arrivals (its arrival is closed loop)")
        talks = [name for name, t in scenario.tenants.items() if t.conversation]
        if talks:   # its parts are dealt to workers row by row, and a later turn needs its first turn's process
            raise ScenarioError(f"{scenario.name}: tenant {talks[0]} sends conversations, which a soak does not "
                                "replay yet; set conversation = false for the soak, or `loadtest run` it")
        self.plan = _plan(scenario, None, seed, rate_scale, duration_s)
        if self.plan.size == 0:
            raise ScenarioError(f"{scenario.name}: no request arrives in {duration_s:g} s")
        self.window_s, self.duration_s = window_s, duration_s
        self.parts = max(1, int(np.ceil(duration_s / window_s)))
        # part k holds rows [edges[k], edges[k + 1]): those sent in [k * window_s, (k + 1) * window_s)
        self.edges = np.searchsorted(self.plan.offsets, np.arange(self.parts + 1) * window_s, side="left")
        self.edges[-1] = self.plan.size
        self.info = StreamInfo(self.plan.size, self.parts, window_s, duration_s, self.plan.scenario.name, sha256)
        self.tokens = tokens   # the prompts cut to a tokenizer's counts (scenarios.tokens), else estimated
        self._meta = {META_NAME: self.plan.scenario.name.encode(), META_HASH: sha256.encode(), **counted_by(tokens)}

    def start(self, folder: Path) -> None:
        """Make the folder, its plan and its index (the same again on a resume: checked, not
        rewritten). The index, every request's id, tenant and offset without its prompt, is what
        a replay stopped early records its unsent rows from, without waiting for parts not written."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / PLAN_FILE
        if path.exists():
            if StreamInfo.read(folder) != self.info:
                raise ScenarioError(f"{path}: the trace there is not this scenario's (rows, parts or hash differ)")
        else:
            path.write_text(json.dumps(self.info.__dict__, indent=1) + "\n")
        index = folder / INDEX_FILE
        if not index.exists():
            names = list(self.plan.scenario.tenants)
            table = pa.table({"request_id": [self.request_id(i) for i in range(self.plan.size)],
                              "tenant": pa.array(names).take(pa.array(self.plan.which)),
                              "offset_s": self.plan.offsets})
            tmp = index.with_name(f".{index.name}.tmp")
            pq.write_table(table, tmp, compression="zstd")
            tmp.replace(index)

    def offsets(self) -> np.ndarray:
        return self.plan.offsets

    def request_id(self, i: int) -> str:
        return f"r{i:0{max(6, len(str(self.plan.size - 1)))}d}"

    def index_of(self, request_id: str) -> int:
        """The row a request id names (ValueError when it is not one of this trace's)."""
        i = int(request_id[1:]) if request_id[1:].isdigit() else -1
        if not 0 <= i < self.plan.size or self.request_id(i) != request_id:
            raise ValueError(f"{request_id!r} is not a request of this trace")
        return i

    def write(self, folder: Path, k: int) -> bool:
        """Write part `k` unless it is there; whether it was written."""
        path = folder / part_name(k)
        if path.exists():
            return False
        table = _materialize(self.plan, int(self.edges[k]), int(self.edges[k + 1]),
                             self.tokens).replace_schema_metadata(self._meta)
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(table.cast(TRACE_SCHEMA.with_metadata(self._meta)), tmp, compression="zstd")
        tmp.replace(path)
        return True

    def part_of(self, offset_s: float) -> int:
        return min(self.parts - 1, max(0, int(offset_s // self.window_s)))
