"""The one live statistic of a replay: per tenant, what the records that reached disk hold, kept
as counts that add up exactly. The progress bars, /metrics, the live board (`loadtest ui`'s
Comparison page and the Locust statistics beside it) and the client's verdict on itself all read it.

- requests by status and error kind (their outcome is `contract.records.outcome_of`'s), and the
  good ones (`contract.records.meets_slos`, against the tenant's targets in the trace);
- the latencies of the requests that succeeded (TTFT, TPOT, the gaps between chunks after the
  first, E2E), and the send lateness of every request sent, each twice: in vLLM's own buckets
  (common/vllm_buckets.py) for Prometheus, so the client's histograms and the server's `vllm:*`
  ones share their boundaries on one Grafana board (ITL and TPOT add four below vLLM's lowest
  10 ms, where a fast decode step falls), and in a `LogHistogram` (1% relative precision) for
  the percentiles;
- the completion tokens of the requests that succeeded, and the chunks after each one's first
  with their tokens (their ratio is the tokens per step the client saw);
- the first send and the last end, for the rates.

A Locust process keeps one `Tally`, adds each record as its part file is flushed (so what it
reports is on disk), and ships what it added since the last time (`take()`, a `TallyReport`) to
the command twice a second; the command adds the reports up (`LiveTallies`) and, when a replay
ends, settles its tally to what the records hold (`tally_of`). Its size depends on the tenants,
never on the requests, so a soak's memory stays flat.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from common.vllm_buckets import INTER_TOKEN_LATENCY_BUCKETS, REQUEST_LATENCY_BUCKETS, TIME_TO_FIRST_TOKEN_BUCKETS
from contract.parts import record_parts
from contract.records import OK, OUTCOMES, SLO_COLUMNS, meets_slos, outcome_of
from loadtest.request.histogram import LogHistogram

# vLLM's inter-token buckets, with 1, 2.5, 5 and 7.5 ms added below its first (10 ms)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, *INTER_TOKEN_LATENCY_BUCKETS)
# Send lateness: the client's own delay past a request's scheduled time (10 ms marks it client_limited)
LATENESS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# metric -> (the record's column in ms, the buckets in seconds); the latencies are those of the
# requests that succeeded (as the report counts them), the lateness that of every request sent
LATENCIES: dict[str, tuple[str, tuple[float, ...]]] = {
    "ttft": ("ttft_ms", TIME_TO_FIRST_TOKEN_BUCKETS), "tpot": ("tpot_ms", ITL_BUCKETS), "itl": ("itl_ms", ITL_BUCKETS),
    "e2e": ("e2e_ms", REQUEST_LATENCY_BUCKETS)}
HISTOGRAMS = {**LATENCIES, "lateness": ("lateness_ms", LATENESS_BUCKETS)}
_BOUNDS = {m: np.asarray(b) for m, (_, b) in HISTOGRAMS.items()}
NO_TARGETS = (float("nan"),) * len(SLO_COLUMNS)


@dataclass(frozen=True)
class TenantReport:
    """One tenant's counts since the last report, JSON-able: `requests` rows [status, error_kind
    ("" for none), n]; `hists` rows [metric, sum of seconds, [count per bucket, the last one past
    the top bucket], the LogHistogram's counts]; the rest as `TenantTally` holds them."""

    tenant: str
    requests: list[list] = field(default_factory=list)
    hists: list[list] = field(default_factory=list)
    tokens: int = 0
    decode_tokens: int = 0
    decode_chunks: int = 0
    good: int = 0
    first_sent_ns: int | None = None
    last_end_ns: int | None = None


@dataclass(frozen=True)
class TallyReport:
    """What a Locust process added since its last report, one entry per tenant."""

    tenants: list[TenantReport] = field(default_factory=list)

    def __post_init__(self) -> None:   # parsed from JSON: the entries come as dicts
        object.__setattr__(self, "tenants", [t if isinstance(t, TenantReport) else TenantReport(**t)
                                             for t in self.tenants])

    def __bool__(self) -> bool:
        return bool(self.tenants)


@dataclass
class Hist:
    """One fixed-bucket histogram: counts per bucket (not cumulative) and the sum."""

    counts: np.ndarray
    sum: float = 0.0

    @classmethod
    def empty(cls, metric: str) -> Hist:
        return cls(np.zeros(len(_BOUNDS[metric]) + 1, dtype=np.int64))

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    def cumulative(self, metric: str) -> list[tuple[str, int]]:
        """Prometheus's buckets: (le, observations <= le), ending with +Inf."""
        edges = [repr(float(b)) for b in HISTOGRAMS[metric][1]] + ["+Inf"]
        return list(zip(edges, np.cumsum(self.counts).tolist(), strict=True))


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


@dataclass
class TenantTally:
    """One tenant's (or, added up, one mode's) records."""

    requests: Counter = field(default_factory=Counter)    # (status, error_kind or "") -> n
    hists: dict[str, Hist] = field(default_factory=dict)  # metric -> vLLM's buckets
    logs: dict[str, LogHistogram] = field(default_factory=dict)   # metric -> 1% buckets, for percentiles
    tokens: int = 0            # completion tokens of the requests that succeeded
    decode_tokens: int = 0     # ... in their chunks after the first (the decode steps) ...
    decode_chunks: int = 0     # ... and those chunks
    good: int = 0              # succeeded within every target of the tenant
    first_sent_ns: int | None = None
    last_end_ns: int | None = None

    def observe(self, row: dict, good: bool) -> None:
        """Add one request record (a RequestRecord row, any status)."""
        self.requests[(row["status"], row.get("error_kind") or "")] += 1
        sent = row.get("sent_ns")
        if sent is None:
            return
        self.good += good
        e2e = row.get("e2e_ms")
        self.first_sent_ns = _min(self.first_sent_ns, sent)
        ended = sent + round(e2e * 1e6) if e2e is not None and e2e == e2e else sent
        self.last_end_ns = _max(self.last_end_ns, ended)
        self._add("lateness", row.get("lateness_ms"))
        if row["status"] != OK:
            return
        tokens = row.get("completion_tokens")
        if tokens:
            self.tokens += tokens
            steps = (row.get("chunk_tokens") or [])[1:]   # after the first chunk (the prefill's): decode steps
            self.decode_tokens += sum(steps)
            self.decode_chunks += len(steps)
        for metric in ("ttft", "tpot", "e2e"):
            self._add(metric, row.get(LATENCIES[metric][0]))
        gaps = row.get("itl_ms")
        if gaps and len(gaps) > 1:   # itl_ms[0] is the TTFT: the gaps between chunks start at 1
            self._add_many("itl", gaps[1:])

    def _add(self, metric: str, ms: float | None) -> None:
        if ms is None or ms != ms:   # one value: no numpy call
            return
        h = self._hist(metric)
        h.counts[bisect_left(HISTOGRAMS[metric][1], ms / 1000.0)] += 1
        h.sum += ms / 1000.0
        self._log(metric).add(ms)

    def _add_many(self, metric: str, ms: list[float]) -> None:
        values = np.asarray(ms, dtype=np.float64)
        values = values[values == values]  # no NaN
        if not values.size:
            return
        seconds = values / 1000.0
        h = self._hist(metric)
        # side="left" (as bisect_left): a value equal to a boundary is in that bucket (Prometheus's le, "<=")
        h.counts += np.bincount(np.searchsorted(_BOUNDS[metric], seconds, side="left"), minlength=len(h.counts))
        h.sum += float(seconds.sum())
        self._log(metric).add_many(values.tolist())

    def _hist(self, metric: str) -> Hist:
        h = self.hists.get(metric)
        if h is None:
            h = self.hists[metric] = Hist.empty(metric)
        return h

    def _log(self, metric: str) -> LogHistogram:
        h = self.logs.get(metric)
        if h is None:
            h = self.logs[metric] = LogHistogram()
        return h

    # ---- adding up -------------------------------------------------------------------------
    def merge(self, report: TenantReport) -> None:
        for status, kind, n in report.requests:
            self.requests[(status, kind)] += n
        for metric, total, counts, logs in report.hists:
            h = self._hist(metric)
            h.counts += np.asarray(counts, dtype=np.int64)
            h.sum += total
            self._log(metric).merge(logs)
        self.tokens += report.tokens
        self.decode_tokens += report.decode_tokens
        self.decode_chunks += report.decode_chunks
        self.good += report.good
        self.first_sent_ns = _min(self.first_sent_ns, report.first_sent_ns)
        self.last_end_ns = _max(self.last_end_ns, report.last_end_ns)

    def copy(self) -> TenantTally:
        out = TenantTally()
        out.merge(self.report(""))
        return out

    def report(self, tenant: str) -> TenantReport:
        return TenantReport(tenant, [[s, k, n] for (s, k), n in self.requests.items()],
                            [[m, h.sum, h.counts.tolist(), self.logs[m].to_dict()] for m, h in self.hists.items()],
                            self.tokens, self.decode_tokens, self.decode_chunks, self.good, self.first_sent_ns,
                            self.last_end_ns)

    # ---- what the views read ---------------------------------------------------------------
    @property
    def outcomes(self) -> dict[str, int]:
        """Requests by outcome (contract.records.OUTCOMES), every one present."""
        out = dict.fromkeys(OUTCOMES, 0)
        for (status, kind), n in self.requests.items():
            out[outcome_of(status, kind or None)] += n
        return out

    @property
    def recorded(self) -> int:
        return sum(self.requests.values())

    def quantile(self, metric: str, q: float) -> float | None:
        """The `q` quantile of `metric` (ms), within 1%; None before any."""
        h = self.logs.get(metric)
        return h.quantile(q) if h is not None else None

    def count(self, metric: str) -> int:
        h = self.logs.get(metric)
        return h.count if h is not None else 0

    @property
    def tokens_per_step(self) -> float | None:
        return self.decode_tokens / self.decode_chunks if self.decode_chunks else None

    def span_s(self) -> float:
        """From the first send to the last end (0 before any)."""
        if self.first_sent_ns is None or self.last_end_ns is None:
            return 0.0
        return max(0.0, (self.last_end_ns - self.first_sent_ns) / 1e9)


@dataclass
class Tally:
    """Per tenant, with each tenant's SLO targets (in the order of contract.records.SLO_COLUMNS;
    a NaN is no target) to judge which requests were good."""

    targets: dict[str, tuple[float, ...]] = field(default_factory=dict)
    tenants: dict[str, TenantTally] = field(default_factory=dict)

    def observe_many(self, rows: list[dict]) -> None:
        """Add a batch of request records (what a part file holds)."""
        if not rows:
            return
        good = meets_slos(*(np.array([_float(r.get(c)) for r in rows]) for c in ("ttft_ms", "tpot_ms", "e2e_ms")),
                          *np.array([self.targets.get(r["tenant"], NO_TARGETS) for r in rows]).T,
                          np.array([r["status"] == OK for r in rows]))
        for row, g in zip(rows, good.tolist(), strict=True):
            self.tenant(row["tenant"]).observe(row, g)

    def observe(self, row: dict) -> None:
        self.observe_many([row])

    def tenant(self, name: str) -> TenantTally:
        t = self.tenants.get(name)
        if t is None:
            t = self.tenants[name] = TenantTally()
        return t

    def merge(self, report: TallyReport) -> None:
        for entry in report.tenants:
            self.tenant(entry.tenant).merge(entry)

    def take(self) -> TallyReport:
        """What was added since the last take, and reset (what a Locust process ships)."""
        out = TallyReport([t.report(name) for name, t in self.tenants.items()])
        self.tenants = {}
        return out

    def total(self) -> TenantTally:
        """Every tenant's counts added up."""
        return added_up(self.tenants)


def added_up(tenants: dict[str, TenantTally]) -> TenantTally:
    """Every tenant's tally added up (a mode's)."""
    out = TenantTally()
    for name, t in tenants.items():
        out.merge(t.report(name))
    return out


def _float(value: float | None) -> float:
    return float("nan") if value is None else value


def tenant_targets(trace: str | Path) -> dict[str, tuple[float, ...]]:
    """Each tenant's SLO targets in a trace (scenarios write one set per tenant); a tenant whose
    requests carry more than one set has none here (its goodput is the report's to tell)."""
    path = Path(trace)
    if not path.is_file() or not set(SLO_COLUMNS) <= set(pq.read_schema(path).names):
        return {}
    table = pq.read_table(path, columns=["tenant", *SLO_COLUMNS]).group_by(["tenant", *SLO_COLUMNS]).aggregate([])
    out: dict[str, tuple[float, ...]] = {}
    seen: Counter = Counter(table["tenant"].to_pylist())
    for row in table.to_pylist():
        if seen[row["tenant"]] == 1:
            out[row["tenant"]] = tuple(_float(row[c]) for c in SLO_COLUMNS)
    return out


class LiveTallies:
    """The command's one copy of every replay's tally since it started, keyed by (run, level,
    mode): the reports added up as they come, settled to the records when a replay ends, and
    the replay's progress. Read, under its lock, by /metrics, the progress bars and the board."""

    def __init__(self) -> None:
        self._lock = threading.Lock()   # Locust readers add while HTTP servers' threads read
        self._tallies: dict[tuple, Tally] = {}
        self._progress: dict[tuple, tuple[int, int]] = {}   # -> (in flight, scheduled)
        self._tenants: dict[tuple, list[str]] = {}          # the tenants a replay's trace holds

    def expect(self, key: tuple, tenants: list[str], targets: dict[str, tuple[float, ...]]) -> None:
        """A replay is starting with these tenants and targets."""
        with self._lock:
            self._tenants[key] = sorted(tenants)
            self._tallies[key] = Tally(targets)

    def add(self, key: tuple, report: TallyReport) -> None:
        with self._lock:
            self._tallies.setdefault(key, Tally()).merge(report)

    def settle(self, key: tuple, tally: Tally) -> None:
        """The replay ended: its counts become what its Parquet records hold (one lost worker or an
        interrupt can leave what reached the command short of them)."""
        with self._lock:
            self._tallies[key] = tally

    def progress(self, key: tuple, in_flight: int, scheduled: int) -> None:
        with self._lock:
            self._progress[key] = (in_flight, scheduled)

    def read(self) -> list[tuple[tuple, list[str], dict[str, TenantTally], tuple[int, int] | None]]:
        """A copy of every replay's: (key, its tenants, tenant -> its tally, its progress)."""
        with self._lock:
            return [(key, self._tenants.get(key, []), {n: x.copy() for n, x in t.tenants.items()},
                     self._progress.get(key))
                    for key, t in self._tallies.items()]

    def of(self, key: tuple) -> dict[str, TenantTally]:
        """A copy of one replay's tally per tenant (empty before it started)."""
        with self._lock:
            t = self._tallies.get(key)
            return {n: x.copy() for n, x in t.tenants.items()} if t is not None else {}


TALLY_COLUMNS = ["tenant", "status", "error_kind", "sent_ns", "scheduled_ns", "completion_tokens", "chunk_tokens",
                 *(column for column, _ in HISTOGRAMS.values())]


def tally_of(records_dir: Path, since_ns: int | None = None,
             targets: dict[str, tuple[float, ...]] | None = None, skip: tuple[str, ...] = (),
             into: Tally | None = None) -> Tally:
    """The tally of the records in a mode's folder (only rows scheduled from `since_ns` on): what
    the command settles its tally to when a replay ends, whatever reached it on the way. `skip`:
    files already tallied (`into`, the tally to add to; default a new one)."""
    out = into if into is not None else Tally(targets or {})
    parts = [p for p in record_parts(Path(records_dir)) if p.name not in skip]
    if not parts:
        return out
    for batch in ds.dataset(parts, format="parquet").to_table(columns=TALLY_COLUMNS).to_batches(max_chunksize=4096):
        observe_batch(out, batch, since_ns)
    return out


def observe_batch(tally: Tally, batch: pa.RecordBatch, since_ns: int | None = None) -> None:
    """Add a batch of records (any columns holding TALLY_COLUMNS), only its rows scheduled from
    `since_ns` on."""
    if since_ns is not None:
        batch = batch.filter(pc.greater_equal(batch["scheduled_ns"], since_ns))
    tally.observe_many(batch.select(TALLY_COLUMNS).to_pylist())


def sent_to(records_dir: Path, replica: str) -> dict[str, int]:
    """What a mode's records say was sent to one replica (its label): requests by status."""
    parts = record_parts(Path(records_dir))
    if not parts:
        return {}
    table = ds.dataset(parts, format="parquet").to_table(columns=["status"], filter=pc.field("replica") == replica)
    return {str(s): int(n) for s, n in zip(*pc.value_counts(table["status"]).flatten(), strict=True)}
