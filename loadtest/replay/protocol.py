"""Every message that crosses a process in a replay, as a frozen dataclass.

Three channels, one `encode` and one `parse` each:
- the command to each Locust process it starts: the replay's configuration (`ReplayConfig`, a
  frozen dataclass of plain values, paths and tuples) as one JSON argument (`encode_config` /
  `parse_config`), so no option of a replay is listed twice;
- the replay process to the command that started it (`run`, `ui`, ...): a line `@@<kind> <JSON>`
  on the process's stdout (`encode_line` / `parse_line`); any other line is Locust's own output;
- the Locust master and its workers: Locust's custom messages, a name and a JSON-able dict
  (`to_locust` / `from_locust`).
Fields are named, never split by position, so adding one breaks no reader.
"""

from __future__ import annotations

import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TypeVar

import orjson

from loadtest.request.client_stats import ClientLoad, StatsReport
from loadtest.request.tally import TallyReport

PREFIX = "@@"


# ---- the replay process -> the command -------------------------------------------------------
@dataclass(frozen=True)
class Ready:
    """The process handles SIGTERM and the second signal's stop-now from here on (before it, either
    would kill it with nothing recorded): the command holds signals back until this line."""


@dataclass(frozen=True)
class Progress:
    """How far the replay of one mode is: of `total` scheduled requests, `sent` were sent, `done`
    of them have ended (ok, error or timeout), and `not_sent` were recorded as never sent."""

    total: int
    sent: int
    done: int
    not_sent: int = 0

    @property
    def in_flight(self) -> int:
        return max(0, self.sent - self.done)


@dataclass(frozen=True)
class Observed:
    """The records written since the last Observed, per tenant (the one live statistic: the
    command's bars, /metrics and board read what these add up to)."""

    tally: TallyReport


@dataclass(frozen=True)
class LoadReport:
    """How hard the client worked (ClientStats.load), said at the end: the command adds the
    records' lateness to it for the client's verdict on itself (client_stats.verdict)."""

    load: ClientLoad


@dataclass(frozen=True)
class Finished:
    """The replay ended (`completed`, `deadline`, `interrupted`, `failed`, `worker_lost`) with
    `recorded` rows written, one per scheduled request."""

    reason: str
    recorded: int


@dataclass(frozen=True)
class UnwrittenRecords:
    """The records could not be written to `directory` (the OS error in `error`, e.g. `[Errno 28]
    No space left on device`): the replay stopped; `written` rows are in complete part files, the
    rest of its scheduled requests are not recorded. Said before its Finished("failed", written)."""

    directory: str
    error: str
    written: int
    total: int

    @property
    def message(self) -> str:
        """The one line a command prints."""
        return (f"could not write records to {self.directory}: {self.error}; {self.written:,} of {self.total:,} "
                f"scheduled requests were recorded, the other {self.total - self.written:,} could not be written")


# ---- the web UI's process (front.py) -> `loadtest ui` ----------------------------------------
@dataclass(frozen=True)
class StartAsked:
    """Start was pressed with the form's scenario, modes and rate scale (None: the scenario's)."""

    scenario: str
    modes: list[str]
    rate_scale: float | None = None


@dataclass(frozen=True)
class StopAsked:
    """Stop was pressed: the replays stop gracefully, the rest is recorded as not_sent."""


Line = Ready | Progress | Observed | LoadReport | Finished | UnwrittenRecords | StartAsked | StopAsked
_LINES: dict[str, type] = {"ready": Ready, "progress": Progress, "observed": Observed, "load": LoadReport,
                           "finished": Finished, "not_written": UnwrittenRecords, "start": StartAsked,
                           "stop": StopAsked}


def encode_line(msg: Line) -> str:
    """The stdout line (without its newline) that carries `msg`."""
    return f"{PREFIX}{_name(_LINES, msg)} {orjson.dumps(asdict(msg)).decode()}"


def parse_line(line: str) -> Line | None:
    """The message a line carries, or None for any other line (Locust's own output). A line that
    starts like a message but does not parse is a bug, and raises ValueError naming it."""
    if not line.startswith(PREFIX):
        return None
    kind, _, body = line[len(PREFIX):].strip().partition(" ")
    try:
        return _build(_LINES, kind, orjson.loads(body))
    except (orjson.JSONDecodeError, TypeError, KeyError) as exc:
        raise ValueError(f"malformed replay message {line[:120]!r}: {exc}") from None


# ---- the Locust master <-> its workers -------------------------------------------------------
@dataclass(frozen=True)
class Counts:
    """What a worker has written: `recorded` rows, of which `not_sent`; `sent` requests."""

    recorded: int = 0
    sent: int = 0
    not_sent: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.recorded + other.recorded, self.sent + other.sent, self.not_sent + other.not_sent)


@dataclass(frozen=True)
class ShardAssignment:
    """Master to worker: replay rows i with i % count == index, as worker `worker_id`, offset 0
    of the trace at `t0_epoch` (seconds since the epoch, the same for every worker)."""

    index: int
    count: int
    worker_id: str
    t0_epoch: float


@dataclass(frozen=True)
class WorkerReport:
    """Worker to master, twice a second: its counts and what it observed since the last report."""

    counts: Counts
    stats: StatsReport
    tally: TallyReport = field(default_factory=TallyReport)


@dataclass(frozen=True)
class WorkerDone:
    """Worker to master: its shard is done (`reason` as in Finished), with its last report, and
    why its records could not all be written (a full disk), if so."""

    reason: str
    counts: Counts
    stats: StatsReport
    tally: TallyReport = field(default_factory=TallyReport)
    not_written: UnwrittenRecords | None = None


@dataclass(frozen=True)
class WorkerReady:
    """Worker to master: its message handlers are in, so it can take its shard. (A Locust worker
    takes messages while it connects, before Locust fires `init`; one sent before then is dropped.)"""


@dataclass(frozen=True)
class Abandon:
    """Master to worker: you were declared lost and your rows recorded; write nothing more."""


@dataclass(frozen=True)
class StopNow:
    """Master to worker: the command's second signal; stop now (workers on Ray nodes get no signal)."""


Wire = ShardAssignment | WorkerReady | WorkerReport | WorkerDone | Abandon | StopNow
_WIRE: dict[str, type] = {"loadtest_shard": ShardAssignment, "loadtest_ready": WorkerReady,
                          "loadtest_report": WorkerReport,
                          "loadtest_done": WorkerDone, "loadtest_abandon": Abandon, "loadtest_stop_now": StopNow}
WIRE_NAMES = tuple(_WIRE)


def to_locust(msg: Wire) -> tuple[str, dict]:
    """(message type, data) for Locust's runner.send_message."""
    return _name(_WIRE, msg), asdict(msg)


def from_locust(kind: str, data: dict | None) -> Wire:
    """The message a Locust custom message carries."""
    return _build(_WIRE, kind, data or {})


# ---- the command -> a Locust process: its configuration ---------------------------------------
Config = TypeVar("Config")


def encode_config(config: object) -> str:
    """One JSON argument holding every field of a configuration dataclass."""
    return orjson.dumps(asdict(config), default=str).decode()


def parse_config(cls: type[Config], text: str) -> Config:
    """The `cls` that `encode_config` wrote: paths and tuples made again from their JSON; a field
    it does not carry keeps its default; text that is not one is a bug, and raises ValueError."""
    try:
        data = orjson.loads(text)
        hints = typing.get_type_hints(cls)
        out = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            v, hint = data[f.name], hints[f.name]
            if v is not None and Path in (hint, *typing.get_args(hint)):
                v = Path(v)
            elif isinstance(v, list) and typing.get_origin(hint) is tuple:
                v = tuple(v)
            out[f.name] = v
        return cls(**out)
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"malformed {cls.__name__} {text[:120]!r}: {exc}") from None


# ---- shared ----------------------------------------------------------------------------------
_NESTED = {"counts": Counts, "stats": StatsReport, "load": ClientLoad, "tally": TallyReport,
           "not_written": UnwrittenRecords}


def _name(kinds: dict[str, type], msg: object) -> str:
    return next(name for name, cls in kinds.items() if type(msg) is cls)


def _build(kinds: dict[str, type], kind: str, data: dict):
    cls = kinds.get(kind)
    if cls is None:
        raise ValueError(f"unknown replay message {kind!r}")
    names = {f.name for f in fields(cls)}
    return cls(**{k: (_NESTED[k](**v) if k in _NESTED and isinstance(v, dict) else v)
                  for k, v in data.items() if k in names})
