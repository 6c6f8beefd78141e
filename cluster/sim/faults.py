"""Fault injection for reliability tests: `--fault crash-after=3,stall=0.1:2,...`.

Every random decision comes from one generator seeded by `--seed`, drawn once per request in
arrival order, so a run with the same requests in the same order fails the same way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

HTTP_ERROR_TYPES = {429: "TooManyRequestsError", 500: "InternalServerError", 503: "ServiceUnavailableError"}
FAULT_HELP = (
    "comma-separated faults: crash-after=N (exit mid-stream once N requests have been served), "
    "crash-at=S (exit S seconds after start), stall=P:S (with probability P a stream pauses S seconds), "
    "http-error=P:CODE (with probability P answer CODE: 429, 500 or 503), malformed=P (a broken JSON "
    "chunk), slow-start=S (/health fails for the first S seconds), drop=P (connection reset mid-stream), "
    "html=P (with probability P answer 200 with an HTML page, as a login page or a proxy in front of the "
    "server would), metrics=KIND (/metrics answers html: 200 with an HTML page, or 404), "
    "slow-headers=P:S (with probability P the response headers come S seconds late), "
    "burst=EVERY:LEN:CODE (every EVERY seconds after start, answer every request CODE (429, 500 or 503) "
    "for LEN seconds, as a rate limiter or an overloaded proxy does), retry-after=S (429 and 503 answers "
    "carry Retry-After: S), no-done=P (with probability P the stream ends cleanly after its last chunk "
    "without `data: [DONE]`, as a proxy that cuts streams short does), gpu=KIND (/dcgm/metrics, the GPU "
    "exporter: 404 answers 404, garbage answers text that is not Prometheus exposition, reset restarts the "
    "energy counter from 0 two seconds after start, no-energy leaves the energy counter out as a GPU "
    "before Volta does, xid reports XID 79, a GPU fallen off the bus, from two seconds after start)"
)
METRICS_FAULTS = ("html", "404")
GPU_FAULTS = ("404", "garbage", "reset", "no-energy", "xid")
GPU_RESET_AFTER_S = 2.0   # gpu=reset: the energy counter starts again from 0 this long after start


@dataclass(frozen=True)
class Faults:
    crash_after: int | None = None
    crash_at: float | None = None
    stall: tuple[float, float] | None = None
    http_error: tuple[float, int] | None = None
    malformed: float | None = None
    slow_start: float | None = None
    drop: float | None = None
    html: float | None = None
    metrics: str | None = None
    slow_headers: tuple[float, float] | None = None
    burst: tuple[float, float, int] | None = None     # every, length (s), code
    retry_after: float | None = None
    no_done: float | None = None
    gpu: str | None = None

    def in_burst(self, elapsed_s: float) -> bool:
        """Whether `elapsed_s` after start falls in a burst: [k*EVERY, k*EVERY + LEN) for k >= 1."""
        if self.burst is None:
            return False
        every, length, _ = self.burst
        return elapsed_s >= every and elapsed_s % every < length


def _code(text: str) -> int:
    if int(text) not in HTTP_ERROR_TYPES:
        raise ValueError(f"CODE must be one of {sorted(HTTP_ERROR_TYPES)}")
    return int(text)


def _prob(name: str, text: str) -> float:
    p = float(text)
    if not 0 <= p <= 1:
        raise ValueError(f"--fault {name}: probability must be in [0, 1], got {text}")
    return p


def parse_faults(text: str | None) -> Faults:
    """Parse `--fault`; raise ValueError with one line naming the bad item."""
    if not text:
        return Faults()
    out: dict = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        try:
            if not sep:
                raise ValueError("expected NAME=VALUE")
            if name == "crash-after":
                out["crash_after"] = int(value)
            elif name == "crash-at":
                out["crash_at"] = float(value)
            elif name == "slow-start":
                out["slow_start"] = float(value)
            elif name == "retry-after":
                out["retry_after"] = float(value)
            elif name == "slow-headers":
                p, _, sec = value.partition(":")
                out["slow_headers"] = (_prob(name, p), float(sec))
            elif name == "burst":
                every, length, code = value.split(":")
                if not 0 < float(length) < float(every):
                    raise ValueError("expected 0 < LEN < EVERY")
                out["burst"] = (float(every), float(length), _code(code))
            elif name in ("malformed", "drop", "html", "no-done"):
                out[name.replace("-", "_")] = _prob(name, value)
            elif name == "metrics":
                if value not in METRICS_FAULTS:
                    raise ValueError(f"KIND must be one of {', '.join(METRICS_FAULTS)}")
                out["metrics"] = value
            elif name == "gpu":
                if value not in GPU_FAULTS:
                    raise ValueError(f"KIND must be one of {', '.join(GPU_FAULTS)}")
                out["gpu"] = value
            elif name == "stall":
                p, _, s = value.partition(":")
                out["stall"] = (_prob(name, p), float(s))
            elif name == "http-error":
                p, _, code = value.partition(":")
                out["http_error"] = (_prob(name, p), _code(code))
            else:
                raise ValueError(f"unknown fault {name!r}")
        except ValueError as exc:
            msg = str(exc) if str(exc).startswith("--fault") else f"--fault {item.strip()!r}: {exc}"
            raise ValueError(msg) from None
    return Faults(**out)


@dataclass(frozen=True)
class RequestFaults:
    """What happens to one request."""

    http_error: int | None = None
    headers_delay: float | None = None       # seconds before the response headers
    html: bool = False                       # answer 200 with an HTML page instead of the completion
    crash_after_chunks: int | None = None   # exit the process after this many chunks
    stall_at_chunk: int | None = None
    malformed_at_chunk: int | None = None
    drop_at_chunk: int | None = None
    no_done: bool = False                    # close the stream cleanly without `data: [DONE]`


class FaultPlan:
    def __init__(self, faults: Faults, seed: int) -> None:
        self.faults = faults
        self.rng = random.Random(seed)
        self.served = 0

    def next_request(self, elapsed_s: float = 0.0) -> RequestFaults:
        """What happens to the next request, `elapsed_s` after the server started."""
        f, rng = self.faults, self.rng
        draws = [rng.random() for _ in range(4)]  # always four draws: decisions stay aligned
        at = rng.randint(1, 4)                     # which chunk a stream-level fault hits
        index = self.served
        self.served += 1
        # drawn only when configured, as html below: the other faults' draws stay put
        delay = f.slow_headers[1] if f.slow_headers and rng.random() < f.slow_headers[0] else None
        if f.in_burst(elapsed_s):
            return RequestFaults(http_error=f.burst[2], headers_delay=delay)
        if f.http_error and draws[0] < f.http_error[0]:
            return RequestFaults(http_error=f.http_error[1], headers_delay=delay)
        if f.html and rng.random() < f.html:
            return RequestFaults(html=True, headers_delay=delay)
        no_done = bool(f.no_done and rng.random() < f.no_done)   # drawn only when configured, as html
        return RequestFaults(
            headers_delay=delay, no_done=no_done,
            crash_after_chunks=at if f.crash_after is not None and index >= f.crash_after else None,
            stall_at_chunk=at if f.stall and draws[1] < f.stall[0] else None,
            malformed_at_chunk=at if f.malformed and draws[2] < f.malformed else None,
            drop_at_chunk=at if f.drop and draws[3] < f.drop else None,
        )
