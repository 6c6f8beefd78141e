"""The client's view as Prometheus metrics: what the command's /metrics serves while a replay goes
on, labelled by run, mode and tenant, named in Prometheus's conventions.

`ClientMetrics` is a prometheus_client collector over the command's `LiveTallies`
(loadtest.request.tally): `collect` writes every replay's tally out as counter, histogram and
gauge families, cumulative since the replay started.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from contract.records import ERROR_KINDS, TIMEOUT_KINDS
from loadtest.request.tally import LiveTallies

# metric (tally.HISTOGRAMS) -> (the Prometheus name, its help)
HISTOGRAM_NAMES = {
    "ttft": ("loadtest_ttft_seconds", "Time to first token (first content chunk) of the requests that succeeded, "
             "seen by the client."),
    "tpot": ("loadtest_tpot_seconds", "Time per output token after the first, (E2E - TTFT) / (tokens - 1), of the "
             "requests that succeeded."),
    "itl": ("loadtest_itl_seconds", "Gap between consecutive streamed chunks of the requests that succeeded, seen "
            "by the client."),
    "e2e": ("loadtest_e2e_seconds", "End-to-end latency of the requests that succeeded, seen by the client."),
    "lateness": ("loadtest_send_lateness_seconds", "How late the client sent each request after its scheduled time."),
}
MODE = ["run", "level", "mode"]        # level: a sweep's level or a capacity probe ("" for a run)
TENANT = [*MODE, "tenant"]
NAMES = ("loadtest_requests_total", "loadtest_output_tokens_total", "loadtest_decode_tokens_total",
         "loadtest_decode_chunks_total", "loadtest_requests_in_flight", "loadtest_requests_scheduled",
         *(n for n, _ in HISTOGRAM_NAMES.values()))
Key = tuple[str, str, str]   # (run, level, mode)


def key_of(run_id: str, mode: str) -> Key:
    """A replay's labels: a level's run id is `<run>/<level>` (loadtest.engine.level_dirs)."""
    run, _, level = run_id.partition("/")
    return run, level, mode


def outcomes() -> list[tuple[str, str]]:
    """Every (status, error kind) a record can have, so each counter series exists from 0."""
    return [("ok", ""), ("not_sent", ""), *(("timeout", k) for k in TIMEOUT_KINDS),
            *(("error", k) for k in ERROR_KINDS)]


class ClientMetrics(Collector):
    """Every replay's tally since this command started (the one `LiveTallies`), as Prometheus
    families, labelled by (run, level, mode) and tenant."""

    def __init__(self, live: LiveTallies) -> None:
        self.live = live

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("loadtest_requests", "Scheduled requests recorded, by status (ok, error, "
                                       "timeout, not_sent) and error kind.", labels=[*TENANT, "status", "error_kind"])
        tokens = CounterMetricFamily("loadtest_output_tokens", "Completion tokens received (from usage) by the "
                                     "requests that succeeded.", labels=TENANT)
        decode_tokens = CounterMetricFamily("loadtest_decode_tokens", "Tokens in the streamed chunks after each "
                                            "successful request's first (its decode steps).", labels=TENANT)
        decode_chunks = CounterMetricFamily("loadtest_decode_chunks", "Streamed chunks after each successful "
                                            "request's first: decode tokens / decode chunks is the tokens per step "
                                            "the client saw.", labels=TENANT)
        hists = {m: HistogramMetricFamily(name, doc, labels=TENANT) for m, (name, doc) in HISTOGRAM_NAMES.items()}
        in_flight = GaugeMetricFamily("loadtest_requests_in_flight", "Requests sent and not yet ended.", labels=MODE)
        scheduled = GaugeMetricFamily("loadtest_requests_scheduled", "Requests the replay's trace schedules.",
                                      labels=MODE)
        for key, expected, tallies, progress in self.live.read():
            counts = {(tenant, status, kind): 0 for tenant in expected for status, kind in outcomes()}
            for tenant, t in tallies.items():
                counts.update({(tenant, status, kind): n for (status, kind), n in t.requests.items()})
            for (tenant, status, kind), n in counts.items():
                requests.add_metric([*key, tenant, status, kind], n)
            for tenant, t in tallies.items():
                tokens.add_metric([*key, tenant], t.tokens)
                decode_tokens.add_metric([*key, tenant], t.decode_tokens)
                decode_chunks.add_metric([*key, tenant], t.decode_chunks)
                for metric, h in t.hists.items():
                    hists[metric].add_metric([*key, tenant], h.cumulative(metric), h.sum)
            if progress is not None:
                in_flight.add_metric(list(key), progress[0])
                scheduled.add_metric(list(key), progress[1])
        yield from (requests, tokens, decode_tokens, decode_chunks, *hists.values(), in_flight, scheduled)
