"""The request record: one row per scheduled request and mode, the project's central contract.

Columns named in the result contract are never renamed; later work may add columns.
- Times `*_ns` are epoch nanoseconds; durations `*_ms` come from a monotonic clock.
- `itl_ms[i]` is the gap before chunk i (so `itl_ms[0]` is the TTFT) and `chunk_tokens[i]` the
  tokens chunk i carried (from the server's running usage; empty when the server does not send
  running usage, never guessed). Only chunks that carry text count.
- `ttft_ms`, `e2e_ms` run from the send; `ttft_sched_ms`, `e2e_sched_ms` from the scheduled time,
  so a client that fell behind cannot hide the queueing it caused (coordinated omission).
- `tpot_ms` = (e2e - ttft) / (completion_tokens - 1), tokens from `usage`, never counted events.
- `spec_*`: the server's own count of this request's speculation, where it sends one (vLLM 0.29+
  with `--per-request-spec-decode-metrics`, and the simulator): steps that verified drafts,
  draft tokens, accepted draft tokens, and `spec_acceptance_histogram[k]` = steps that accepted
  k drafts. Null when the server sent none.
- `attempts`: how many times it was sent (1, or more when `--retry-after honour` resent it after
  a 429 or 503 with `Retry-After`; the times then run from the first send, so the waits count);
  `retry_after_s`: the last `Retry-After` the server answered, in seconds (null without one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

STATUSES = ("ok", "error", "timeout", "not_sent")
OK, ERROR, TIMEOUT, NOT_SENT = STATUSES
# Error kinds for status "error".
ERROR_KINDS = ("http", "connection", "not_sse", "malformed_stream", "server_error", "incomplete_stream",
               "interrupted", "worker_lost", "unstorable")
# Kinds for status "timeout": where the request was when its --timeout ran out (no response
# headers yet; headers but no token; tokens but no end), or "deadline" when the run's --deadline cut it.
TIMEOUT_KINDS = ("headers", "first_token", "stream", "deadline")

# A record's outcome, one definition for the gate, the console table, the reports, a capacity
# probe and a soak's windows: ok; failed, an error or timeout the server is answerable for;
# client, an end the client caused (stopped in flight, cut by the run's --deadline, on a worker
# that was lost), which says nothing of the server; not_sent. A request was sent to the server
# when it is ok or failed: the failed share is failed / (ok + failed).
OUTCOMES = ("ok", "failed", "client", "not_sent")
FAILED, CLIENT = OUTCOMES[1:3]
CLIENT_CAUSED = (f"{ERROR}/interrupted", f"{ERROR}/worker_lost", f"{TIMEOUT}/deadline")   # status/error_kind
NO_RECORD = "have no record"   # how every line about scheduled requests missing from the records says it


def kinds(records: pa.Table) -> pa.ChunkedArray:
    """Each record's `status/error_kind` ("error/http", "timeout/deadline"), or its status alone."""
    status = records["status"]
    return pc.coalesce(pc.binary_join_element_wise(status, records["error_kind"].cast(pa.string()), "/"), status)


def outcomes(records: pa.Table, kind: pa.ChunkedArray | None = None) -> pa.ChunkedArray:
    """Each record's outcome (OUTCOMES), from its status and error kind (`kind`: its `kinds`,
    where the caller has them already)."""
    kind = kinds(records) if kind is None else kind
    client = pc.is_in(kind, value_set=pa.array(CLIENT_CAUSED))
    failed = pc.is_in(records["status"], value_set=pa.array([ERROR, TIMEOUT]))
    return pc.if_else(client, CLIENT, pc.if_else(failed, FAILED, records["status"]))


def outcome_of(status: str, error_kind: str | None) -> str:
    """One record's outcome (OUTCOMES), as `outcomes` gives it for a table."""
    if f"{status}/{error_kind}" in CLIENT_CAUSED:
        return CLIENT
    return FAILED if status in (ERROR, TIMEOUT) else status


# A good request, one definition for the reports, the live board and /metrics: it succeeded
# within every SLO target its tenant sets, the trace's columns (scenarios.trace.TRACE_SCHEMA):
SLO_COLUMNS = ("slo_ttft_p99_ms", "slo_tpot_p99_ms", "slo_e2e_p99_ms")


def meets_slos(ttft_ms: np.ndarray, tpot_ms: np.ndarray, e2e_ms: np.ndarray, slo_ttft: np.ndarray,
               slo_tpot: np.ndarray, slo_e2e: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Per request: succeeded, and within every SLO its tenant sets (a NaN target is no SLO; a
    NaN TPOT, one output token, meets any TPOT target)."""
    def within(value: np.ndarray, target: np.ndarray, missing_ok: bool) -> np.ndarray:
        value, target = np.asarray(value, dtype=np.float64), np.asarray(target, dtype=np.float64)
        passed = value <= target
        if missing_ok:
            passed |= np.isnan(value)
        return passed | np.isnan(target)

    return (np.asarray(ok, dtype=bool) & within(ttft_ms, slo_ttft, False) & within(tpot_ms, slo_tpot, True)
            & within(e2e_ms, slo_e2e, False))


REQUEST_SCHEMA = pa.schema([
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("mode", pa.string(), nullable=False),
    pa.field("replica", pa.string()),
    pa.field("worker", pa.string(), nullable=False),
    pa.field("tenant", pa.string(), nullable=False),
    pa.field("request_id", pa.string(), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("scheduled_ns", pa.int64(), nullable=False),
    pa.field("sent_ns", pa.int64()),
    pa.field("first_token_ns", pa.int64()),
    pa.field("last_token_ns", pa.int64()),
    pa.field("offset_s", pa.float64(), nullable=False),      # scheduled offset from the mode's start
    pa.field("lateness_ms", pa.float64()),                   # sent minus scheduled
    pa.field("ttft_ms", pa.float64()),
    pa.field("tpot_ms", pa.float64()),
    pa.field("e2e_ms", pa.float64()),
    pa.field("ttft_sched_ms", pa.float64()),
    pa.field("e2e_sched_ms", pa.float64()),
    pa.field("itl_ms", pa.list_(pa.float32())),
    pa.field("chunk_tokens", pa.list_(pa.int32())),
    pa.field("n_chunks", pa.int32()),
    pa.field("prompt_tokens", pa.int32()),
    pa.field("completion_tokens", pa.int32()),
    pa.field("finish_reason", pa.string()),
    pa.field("http_status", pa.int32()),
    pa.field("error_kind", pa.string()),
    pa.field("error", pa.string()),
    pa.field("spec_steps", pa.int32()),
    pa.field("spec_draft_tokens", pa.int32()),
    pa.field("spec_accepted_tokens", pa.int32()),
    pa.field("spec_acceptance_histogram", pa.list_(pa.int32())),
    pa.field("attempts", pa.int32()),
    pa.field("retry_after_s", pa.float64()),
])

IDENTITY = ("run_id", "mode", "worker", "tenant", "request_id")   # the strings an unstorable row keeps
STORABLE_ERRORS = (pa.ArrowException, OverflowError, TypeError, ValueError)    # a value the schema cannot hold


def unstorable(row: dict, schema: pa.Schema | None = None) -> dict:
    """The record a writer stores for `row` when a value of it does not fit the schema (a count
    past int32, a time past int64 nanoseconds, a string where a number goes): the same request,
    status `error`, kind `unstorable`, naming the fields and values that did not fit; its
    scheduled time clipped into int64. Nothing else of it is kept, so the request is one row."""
    schema = schema or REQUEST_SCHEMA
    bad = []
    for f in schema:
        try:
            pa.array([row.get(f.name)], type=f.type)
        except STORABLE_ERRORS:
            bad.append(f"{f.name}={str(row.get(f.name))[:40]}")
    out: dict = {f.name: None for f in schema}
    out.update({k: "" if row.get(k) is None else str(row[k]) for k in IDENTITY if k in out})
    out["replica"] = row.get("replica") if isinstance(row.get("replica"), str) else None
    sched = row.get("scheduled_ns")
    out["scheduled_ns"] = int(min(max(sched, -2**63), 2**63 - 1)) if isinstance(sched, int | float) and sched == sched \
        else 0
    offset = row.get("offset_s")
    out["offset_s"] = float(offset) if isinstance(offset, int | float) else float("nan")
    out.update(status=ERROR, error_kind="unstorable",
               error="a value could not be stored: " + (", ".join(bad) or "the row as a whole"))
    return out


# Columns added to the contract after its first version: a dataset written before lacks them, and
# reads as if each of its rows held null there.
ADDED_COLUMNS = ("spec_steps", "spec_draft_tokens", "spec_accepted_tokens", "spec_acceptance_histogram",
                 "attempts", "retry_after_s")


@dataclass(slots=True)
class RequestRecord:
    """What one request became. Built by the client; serialised with `as_row()`."""

    run_id: str
    mode: str
    worker: str
    tenant: str
    request_id: str
    scheduled_ns: int
    offset_s: float
    replica: str | None = None
    status: str = NOT_SENT
    sent_ns: int | None = None
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    lateness_ms: float | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    ttft_sched_ms: float | None = None
    e2e_sched_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    chunk_tokens: list[int] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    spec_steps: int | None = None
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    spec_acceptance_histogram: list[int] | None = None
    attempts: int | None = None
    retry_after_s: float | None = None

    @property
    def n_chunks(self) -> int:
        return len(self.itl_ms)

    @property
    def tpot_ms(self) -> float | None:
        if self.ttft_ms is None or self.e2e_ms is None or not self.completion_tokens or self.completion_tokens < 2:
            return None
        return (self.e2e_ms - self.ttft_ms) / (self.completion_tokens - 1)

    def as_row(self) -> dict:
        row = {name: getattr(self, name) for name in self.__slots__}
        row["n_chunks"] = self.n_chunks if self.sent_ns is not None else None
        row["tpot_ms"] = self.tpot_ms
        if self.sent_ns is None:
            row["itl_ms"] = None
        return row
