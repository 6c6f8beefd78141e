"""The messages a Locust replay process prints for the command that started it (`run`, `ui`).

One frozen dataclass per message, one `encode`, one `parse`: a line `@@<kind> <JSON>` on the
process's stdout. Any other line is Locust's own output. Fields are named, never split by
position, so adding one breaks no reader.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import orjson

PREFIX = "@@"


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
class Live:
    """Live latency percentiles (ms) from the client's histograms; None while unknown."""

    ttft_p50: float | None
    ttft_p99: float | None
    tpot_p50: float | None
    late_p99: float | None


@dataclass(frozen=True)
class ClientVerdict:
    """The client's report on itself (ClientStats.verdict): lateness, CPU, client_limited."""

    verdict: dict


@dataclass(frozen=True)
class Finished:
    """The replay ended (`completed`, `deadline`, `interrupted`, `failed`, `worker_lost`) with
    `recorded` rows written, one per scheduled request."""

    reason: str
    recorded: int


Message = Progress | Live | ClientVerdict | Finished
_KINDS: dict[str, type] = {"progress": Progress, "live": Live, "client": ClientVerdict, "finished": Finished}
_NAMES = {cls: name for name, cls in _KINDS.items()}


def encode(msg: Message) -> str:
    """The line (without its newline) that carries `msg`."""
    return f"{PREFIX}{_NAMES[type(msg)]} {orjson.dumps(asdict(msg)).decode()}"


def parse(line: str) -> Message | None:
    """The message a line carries, or None for any other line (Locust's own output). A line that
    starts like a message but does not parse is a bug, and raises ValueError naming it."""
    if not line.startswith(PREFIX):
        return None
    kind, _, body = line[len(PREFIX):].strip().partition(" ")
    cls = _KINDS.get(kind)
    if cls is None:
        raise ValueError(f"unknown replay message {kind!r}: {line[:120]!r}")
    try:
        return cls(**orjson.loads(body))
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"malformed replay message {line[:120]!r}: {exc}") from None
