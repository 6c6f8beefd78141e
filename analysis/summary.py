"""The console's per-mode rows (`ModeSummary`) and the per-tenant speedups: in-memory projections
of the long summary (analysis.long_summary), which is the only computation of a statistic and
the only file of figures (summary.parquet); nothing here computes one again or writes one."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa

from analysis.long_summary import SummaryView
from analysis.stats import MIN_RATE_COUNT, PERCENTILES, RATE_RESOLUTION, Ratio, rate_interval, supported_count
from common.times import ms_text
from contract.records import CLIENT, FAILED, NOT_SENT, OK, STATUSES


@dataclass(frozen=True)
class ModeSummary:
    mode: str
    requests: int
    ok: int
    errors: int            # errors and timeouts the server is answerable for (contract.records.outcomes: failed)
    client: int            # ends the client caused: stopped in flight, cut by --deadline, on a lost worker
    not_sent: int
    req_per_s: float       # completed requests per second over the steady window (nan: none)
    out_tok_per_s: float   # completion tokens (from usage) per second, the same
    offered_req_per_s: float   # scheduled requests / the span of their scheduled times (nan: closed loop)
    arrival_span_s: float      # first to last scheduled time
    sent_span_s: float         # first to last send (shorter when the replay was stopped)
    peak_in_flight: int        # most requests between send and last token at once (ok requests)
    steady: bool               # it had a steady window (analysis.steady)
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    lateness_p50_ms: float     # send time minus scheduled time, every sent request
    lateness_p99_ms: float
    tokens_per_chunk: float    # client-side view of mean acceptance length
    speedup: float | None      # geometric mean over requests of baseline E2E / this mode's E2E
    acceptance_rate: float | None = None         # server: Δaccepted / Δdraft tokens
    mean_acceptance_length: float | None = None  # server: 1 + Δaccepted / Δdrafts
    speedup_low: float | None = None             # the speedup's paired-bootstrap 95% interval
    speedup_high: float | None = None
    speedup_pairs: int = 0                       # the requests the speedup pairs (too few: no interval to read)
    goodput_req_per_s: float = math.nan          # requests within every SLO of their tenant, per steady second
    goodput_share: float = math.nan              # ... as a share of the requests scheduled (nan: no SLOs)
    steady_s: float = math.nan                   # the steady window's length (nan: too short for one)
    too_few: tuple[str, ...] = ()                # "metric stat" of the shown percentiles too few requests support
    rates_too_few: tuple[str, ...] = ()          # the shown rates (req_per_s, goodput_req_per_s) of too few completions

    @property
    def speedup_ratio(self) -> Ratio | None:
        if self.speedup is None or self.speedup_low is None or self.speedup_high is None:
            return None
        return Ratio(self.speedup, self.speedup_low, self.speedup_high, self.speedup_pairs)


# the rates over the steady window the console table shows (report.md: out_tok_per_s too, with req_per_s's count)
RATES_SHOWN = ("req_per_s", "goodput_req_per_s")
# the percentiles the console table and report.md's modes table show
SHOWN = (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "p50"), ("tpot_ms", "p99"), ("e2e_ms", "p50"),
         ("e2e_ms", "p99"), ("lateness_ms", "p50"), ("lateness_ms", "p99"))


def mode_summaries(long: pa.Table, modes: list[str]) -> list[ModeSummary]:
    """One row per mode of `modes` the long summary holds, read off its tenant-`all` rows."""
    view = SummaryView(long)
    out = []
    for mode in modes:
        def get(metric: str, stat: str, default: float = math.nan, mode: str = mode) -> float:
            v = view.get(mode, metric, stat)
            return default if v is None else v

        def optional(metric: str, stat: str, mode: str = mode) -> float | None:
            return view.get(mode, metric, stat)

        if view.get(mode, "requests", OK) is None:
            continue
        speedup = view.ratio(mode, "speedup_e2e")
        steady_s = get("steady_window_s", "length")
        out.append(ModeSummary(
            mode=mode,
            requests=int(sum(get("requests", s, 0.0) for s in STATUSES)),
            ok=int(get("requests", OK, 0.0)),
            errors=int(get("requests", FAILED, 0.0)),
            client=int(get("requests", CLIENT, 0.0)),
            not_sent=int(get("requests", NOT_SENT, 0.0)),
            req_per_s=get("req_per_s", "rate"),
            out_tok_per_s=get("out_tok_per_s", "rate"),
            offered_req_per_s=get("offered_req_per_s", "trace"),
            arrival_span_s=get("arrival_span_s", "length", 0.0),
            sent_span_s=get("sent_span_s", "length", 0.0),
            peak_in_flight=int(get("in_flight", "peak", 0.0)),
            steady=not math.isnan(steady_s),
            ttft_p50_ms=get("ttft_ms", "p50"),
            ttft_p99_ms=get("ttft_ms", "p99"),
            tpot_p50_ms=get("tpot_ms", "p50"),
            tpot_p99_ms=get("tpot_ms", "p99"),
            e2e_p50_ms=get("e2e_ms", "p50"),
            e2e_p99_ms=get("e2e_ms", "p99"),
            lateness_p50_ms=get("lateness_ms", "p50"),
            lateness_p99_ms=get("lateness_ms", "p99"),
            tokens_per_chunk=get("tokens_per_chunk", "mean"),
            speedup=speedup.value if speedup else None,
            acceptance_rate=optional("acceptance_rate", "server"),
            mean_acceptance_length=optional("mean_acceptance_length", "server"),
            speedup_low=speedup.low if speedup else None,
            speedup_high=speedup.high if speedup else None,
            speedup_pairs=speedup.pairs if speedup else 0,
            goodput_req_per_s=get("goodput_req_per_s", "rate"),
            goodput_share=get("goodput_share", "share"),
            steady_s=steady_s,
            too_few=tuple(f"{metric} {stat}" for metric, stat in SHOWN if view.too_few(mode, metric, stat)),
            rates_too_few=tuple(m for m in RATES_SHOWN if view.rate_too_few(mode, m)),
        ))
    return out


def tenant_speedups(long: pa.Table, modes: list[str]) -> dict[str, dict[str, Ratio]]:
    """Paired E2E speedup over the baseline, with its interval, per tenant and mode: the long
    summary's `speedup_e2e` rows of each tenant."""
    view = SummaryView(long)
    out: dict[str, dict[str, Ratio]] = {}
    for tenant in view.tenants:
        for mode in modes:
            r = view.ratio(mode, "speedup_e2e", tenant)
            if r is not None:
                out.setdefault(tenant, {})[mode] = r
    return out


NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E", "lateness_ms": "send lateness"}
RATE_NAMES = {"req_per_s": "done", "goodput_req_per_s": "goodput"}
TOO_FEW = "†"   # beside a percentile too few requests support (analysis.stats.supported_count)


def ms_cell(s: ModeSummary, metric: str, stat: str, value: float) -> str:
    """A latency as the tables print it, marked when too few requests support it."""
    return ms_text(value) + (TOO_FEW if f"{metric} {stat}" in s.too_few else "")


def too_few_rule() -> str:
    """The rule behind the mark, in words."""
    needs = ", ".join(f"a p{p} {supported_count(p / 100)}" for p in reversed(PERCENTILES))
    return (f"{TOO_FEW} too few requests for this percentile: its distribution-free 95% interval runs past the "
            f"data ({needs} at least); {rate_rule()}")


def rate_rule() -> str:
    """The rule behind a rate's mark, in words (with the percentiles' in `too_few_rule`, alone in a sweep's curves)."""
    return (f"for a rate, too few completions: its 95% interval is wider than +-{RATE_RESOLUTION:.0%} (under "
            f"{MIN_RATE_COUNT} completions)")


def rate_cell(text: str, view: SummaryView, mode: str, metric: str, stat: str = "rate") -> str:
    """A rate as the tables print it (`text`), marked when too few completions support it."""
    return text + (TOO_FEW if text != "-" and view.rate_too_few(mode, metric, stat) else "")


def too_few_note(long: pa.Table, summaries: list[ModeSummary]) -> str | None:
    """Each marked percentile with its interval and count, a clause per mode (None when none is marked)."""
    view = SummaryView(long)
    clauses = []
    for s in summaries:
        shown = []
        for key in s.too_few:
            metric, stat = key.split()
            low, high = view.interval(s.mode, metric, stat)
            bounds = ", ".join("-" if b is None or math.isnan(b) else ms_text(b) for b in (low, high))
            shown.append(f"{NAMES.get(metric, metric)} {stat} {ms_text(view.get(s.mode, metric, stat))} [{bounds}] "
                         f"of {int(view.get(s.mode, metric, 'count') or 0):,}")
        for metric in s.rates_too_few:
            rate, n = view.get(s.mode, metric, "rate") or 0.0, view.rate_count(s.mode, metric) or 0.0
            low, high = rate_interval(rate, n)
            shown.append(f"{RATE_NAMES[metric]} {rate:,.2f} req/s [{low:,.2f}, {high:,.2f}] of {int(n):,} completions")
        if shown:
            clauses.append(f"{s.mode}: " + ", ".join(shown))
    return f"{too_few_rule()}; latencies in ms: " + "; ".join(clauses) if clauses else None
