"""The client's view as Prometheus metrics: what the command's /metrics serves while a replay goes
on, labelled by run, mode and tenant, named in Prometheus's conventions.

`ClientMetrics` is a prometheus_client collector. Each replay's Locust process ships TallyReports
(loadtest.request.tally) and progress; `add` and `progress` fold them in, and `collect` writes
them out as counter, histogram and gauge families, cumulative since the replay started; `settle`
sets a finished replay's to what its Parquet records hold.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from loadtest.records import ERROR_KINDS, TIMEOUT_KINDS
from loadtest.request.tally import Tally, TallyReport

# metric (tally.HISTOGRAMS) -> (the Prometheus name, its help)
HISTOGRAM_NAMES = {
    "ttft": ("loadtest_ttft_seconds", "Time to first token seen by the client (first content chunk)."),
    "tpot": ("loadtest_tpot_seconds", "Time per output token after the first: (E2E - TTFT) / (tokens - 1)."),
    "itl": ("loadtest_itl_seconds", "Gap between consecutive streamed chunks, seen by the client."),
    "e2e": ("loadtest_e2e_seconds", "End-to-end request latency seen by the client."),
    "lateness": ("loadtest_send_lateness_seconds", "How late the client sent a request after its scheduled time."),
}
MODE = ["run", "level", "mode"]        # level: a sweep's level or a capacity probe ("" for a run)
TENANT = [*MODE, "tenant"]
NAMES = ("loadtest_requests_total", "loadtest_output_tokens_total", "loadtest_decode_tokens_total",
         "loadtest_decode_chunks_total", "loadtest_requests_in_flight", "loadtest_requests_scheduled",
         *(n for n, _ in HISTOGRAM_NAMES.values()))
Key = tuple[str, str, str]   # (run, level, mode)


def key_of(run_id: str, mode: str) -> Key:
    """A replay's labels: a level's run id is `<run>/<level>` (loadtest.session.level_dirs)."""
    run, _, level = run_id.partition("/")
    return run, level, mode


def outcomes() -> list[tuple[str, str]]:
    """Every (status, error kind) a record can have, so each counter series exists from 0."""
    return [("ok", ""), ("not_sent", ""), *(("timeout", k) for k in TIMEOUT_KINDS),
            *(("error", k) for k in ERROR_KINDS)]


class ClientMetrics(Collector):
    """Every replay's tallies since this command started, keyed by (run, mode)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()   # Locust readers add while the HTTP server's thread collects
        self._tallies: dict[Key, Tally] = {}
        self._progress: dict[Key, tuple[int, int]] = {}   # -> (in flight, scheduled)
        self._tenants: dict[Key, list[str]] = {}         # the tenants whose counters start at 0

    def expect(self, key: Key, tenants: list[str]) -> None:
        """A replay is starting: its tenants' request counters exist from 0 (a rate needs two points)."""
        with self._lock:
            self._tenants[key] = sorted(tenants)
            self._tallies.setdefault(key, Tally())

    def add(self, key: Key, report: TallyReport) -> None:
        with self._lock:
            self._tallies.setdefault(key, Tally()).merge(report)

    def settle(self, key: Key, tally: Tally) -> None:
        """The replay ended: its counts become what its Parquet records hold (one lost worker or an
        interrupt can leave what reached the command short of them)."""
        with self._lock:
            self._tallies[key] = tally

    def progress(self, key: Key, in_flight: int, scheduled: int) -> None:
        with self._lock:
            self._progress[key] = (in_flight, scheduled)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            requests = CounterMetricFamily("loadtest_requests", "Scheduled requests recorded, by status (ok, error, "
                                           "timeout, not_sent) and error kind.", labels=[*TENANT, "status",
                                                                                        "error_kind"])
            tokens = CounterMetricFamily("loadtest_output_tokens", "Completion tokens received (from usage).",
                                         labels=TENANT)
            decode_tokens = CounterMetricFamily("loadtest_decode_tokens", "Tokens in the streamed chunks after each "
                                                "request's first (its decode steps).", labels=TENANT)
            decode_chunks = CounterMetricFamily("loadtest_decode_chunks", "Streamed chunks after each request's "
                                                "first: decode tokens / decode chunks is the tokens per step the "
                                                "client saw.", labels=TENANT)
            hists = {m: HistogramMetricFamily(name, doc, labels=TENANT) for m, (name, doc) in HISTOGRAM_NAMES.items()}
            for key, t in self._tallies.items():
                counts = {(tenant, status, kind): 0 for tenant in self._tenants.get(key, [])
                          for status, kind in outcomes()}
                counts.update(t.requests)
                for (tenant, status, kind), n in counts.items():
                    requests.add_metric([*key, tenant, status, kind], n)
                for tenant in t.tokens:
                    tokens.add_metric([*key, tenant], t.tokens[tenant])
                    decode_tokens.add_metric([*key, tenant], t.decode_tokens[tenant])
                    decode_chunks.add_metric([*key, tenant], t.decode_chunks[tenant])
                for (tenant, metric), h in t.hists.items():
                    hists[metric].add_metric([*key, tenant], h.cumulative(metric), h.sum)
            in_flight = GaugeMetricFamily("loadtest_requests_in_flight", "Requests sent and not yet ended.",
                                          labels=MODE)
            scheduled = GaugeMetricFamily("loadtest_requests_scheduled", "Requests the replay's trace schedules.",
                                          labels=MODE)
            for key, (n, total) in self._progress.items():
                in_flight.add_metric(list(key), n)
                scheduled.add_metric(list(key), total)
        yield from (requests, tokens, decode_tokens, decode_chunks, *hists.values(), in_flight, scheduled)
