"""The client's view as Prometheus metrics: what the command's /metrics serves while a replay goes
on, labelled by run, mode and tenant, named in Prometheus's conventions.

`ClientMetrics` is a prometheus_client collector. Each replay's Locust process ships TallyReports
(loadtest.request.tally) and progress; `add` and `progress` fold them in, and `collect` writes
them out as counter, histogram and gauge families, cumulative since the replay started.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from loadtest.request.tally import Tally, TallyReport

# metric (tally.HISTOGRAMS) -> (the Prometheus name, its help)
HISTOGRAM_NAMES = {
    "ttft": ("loadtest_ttft_seconds", "Time to first token seen by the client (first content chunk)."),
    "tpot": ("loadtest_tpot_seconds", "Time per output token after the first: (E2E - TTFT) / (tokens - 1)."),
    "itl": ("loadtest_itl_seconds", "Gap between consecutive streamed chunks, seen by the client."),
    "e2e": ("loadtest_e2e_seconds", "End-to-end request latency seen by the client."),
    "lateness": ("loadtest_send_lateness_seconds", "How late the client sent a request after its scheduled time."),
}
TENANT = ["run", "mode", "tenant"]
NAMES = ("loadtest_requests_total", "loadtest_output_tokens_total", "loadtest_stream_chunks_total",
         "loadtest_requests_in_flight", "loadtest_requests_scheduled", *(n for n, _ in HISTOGRAM_NAMES.values()))


class ClientMetrics(Collector):
    """Every replay's tallies since this command started, keyed by (run, mode)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()   # Locust readers add while the HTTP server's thread collects
        self._tallies: dict[tuple[str, str], Tally] = {}
        self._progress: dict[tuple[str, str], tuple[int, int]] = {}   # (run, mode) -> (in flight, scheduled)

    def add(self, run: str, mode: str, report: TallyReport) -> None:
        with self._lock:
            self._tallies.setdefault((run, mode), Tally()).merge(report)

    def progress(self, run: str, mode: str, in_flight: int, scheduled: int) -> None:
        with self._lock:
            self._progress[(run, mode)] = (in_flight, scheduled)

    def requests(self) -> dict[tuple[str, str, str, str, str], int]:
        """(run, mode, tenant, status, error_kind) -> requests recorded (what the counter says)."""
        with self._lock:
            return {(run, mode, *key): n for (run, mode), t in self._tallies.items() for key, n in t.requests.items()}

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            requests = CounterMetricFamily("loadtest_requests", "Scheduled requests recorded, by status (ok, error, "
                                           "timeout, not_sent) and error kind.", labels=[*TENANT, "status",
                                                                                        "error_kind"])
            tokens = CounterMetricFamily("loadtest_output_tokens", "Completion tokens received (from usage).",
                                         labels=TENANT)
            chunks = CounterMetricFamily("loadtest_stream_chunks", "Streamed chunks that carried text; output "
                                         "tokens / chunks is the tokens per step the client saw.", labels=TENANT)
            hists = {m: HistogramMetricFamily(name, doc, labels=TENANT) for m, (name, doc) in HISTOGRAM_NAMES.items()}
            for (run, mode), t in self._tallies.items():
                for (tenant, status, kind), n in t.requests.items():
                    requests.add_metric([run, mode, tenant, status, kind], n)
                for tenant in t.tokens.keys() | t.chunks.keys():
                    tokens.add_metric([run, mode, tenant], t.tokens[tenant])
                    chunks.add_metric([run, mode, tenant], t.chunks[tenant])
                for (tenant, metric), h in t.hists.items():
                    hists[metric].add_metric([run, mode, tenant], h.cumulative(metric), h.sum)
            in_flight = GaugeMetricFamily("loadtest_requests_in_flight", "Requests sent and not yet ended.",
                                          labels=["run", "mode"])
            scheduled = GaugeMetricFamily("loadtest_requests_scheduled", "Requests the replay's trace schedules.",
                                          labels=["run", "mode"])
            for (run, mode), (n, total) in self._progress.items():
                in_flight.add_metric([run, mode], n)
                scheduled.add_metric([run, mode], total)
        yield from (requests, tokens, chunks, *hists.values(), in_flight, scheduled)
