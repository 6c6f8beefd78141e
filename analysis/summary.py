"""Views of the long summary (analysis.long_summary), which is the only computation of a
statistic and the only file of figures (summary.parquet): a cell's request counts, each tenant's
SLO attainment, the per-tenant speedups, the console's marks and notes. Nothing here computes a
figure again or writes one."""

from __future__ import annotations

import math

import pyarrow as pa

from analysis.cells import ALL
from analysis.long_summary import SummaryView
from analysis.slo import Attainment
from analysis.stats import MIN_RATE_COUNT, PERCENTILES, RATE_RESOLUTION, Ratio, rate_interval, supported_count
from common.times import ms_text
from contract.records import STATUSES

# the rates over the steady window the console table shows (report.md: out_tok_per_s too, with req_per_s's count)
RATES_SHOWN = ("req_per_s", "goodput_req_per_s")
# the percentiles the console table and report.md's modes table show
SHOWN = (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "p50"), ("tpot_ms", "p99"), ("e2e_ms", "p50"),
         ("e2e_ms", "p99"), ("lateness_ms", "p50"), ("lateness_ms", "p99"))


def request_counts(view: SummaryView, mode: str, tenant: str = ALL) -> dict[str, int]:
    """A cell's `requests` rows: by status, by outcome (`failed`, `client`) and by
    `status/error_kind` (analysis.long_summary)."""
    return {stat: int(value) for (m, t, metric, stat), (value, _, _) in view.cells.items()
            if (m, t, metric) == (mode, tenant, "requests") and value is not None and not math.isnan(value)}


def attainment(view: SummaryView, targets: dict[tuple[str, str], dict[str, float]]) -> list[Attainment]:
    """Each tenant's SLOs per mode (`targets`: analysis.slo.targets_of), read off the long
    summary: its p99 of each targeted latency with the p99's interval and count, its requests and
    the share of them within every target (`goodput_share`)."""
    out = []
    for (mode, tenant), wanted in targets.items():
        checks, bounds = {}, {}
        for metric, target in wanted.items():
            p99 = view.get(mode, metric, "p99", tenant)
            low, high = view.interval(mode, metric, "p99", tenant)
            name = metric.removesuffix("_ms")
            checks[name] = (math.nan if p99 is None else p99, target)
            bounds[name] = (math.nan if low is None else low, math.nan if high is None else high,
                            int(view.get(mode, metric, "count", tenant) or 0))
        requests = int(sum(view.get(mode, "requests", status, tenant) or 0.0 for status in STATUSES))
        share = view.get(mode, "goodput_share", "share", tenant)
        met = round(share * requests) if share is not None else 0     # the share is of these requests
        out.append(Attainment(mode, tenant, requests, met, checks, bounds))
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


def ms_cell(view: SummaryView, mode: str, metric: str, stat: str) -> str:
    """A latency as the tables print it, marked when too few requests support it."""
    return ms_text(view.get(mode, metric, stat)) + (TOO_FEW if view.too_few(mode, metric, stat) else "")


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


def too_few_note(view: SummaryView, modes: list[str]) -> str | None:
    """Each percentile and rate the console shows (SHOWN, RATES_SHOWN) that too few requests
    support, with its interval and count, a clause per mode (None when none is marked)."""
    clauses = []
    for mode in modes:
        shown = []
        for metric, stat in SHOWN:
            if view.too_few(mode, metric, stat):
                low, high = view.interval(mode, metric, stat)
                bounds = ", ".join("-" if b is None or math.isnan(b) else ms_text(b) for b in (low, high))
                shown.append(f"{NAMES.get(metric, metric)} {stat} {ms_text(view.get(mode, metric, stat))} "
                             f"[{bounds}] of {int(view.get(mode, metric, 'count') or 0):,}")
        for metric in RATES_SHOWN:
            if view.rate_too_few(mode, metric):
                rate, n = view.get(mode, metric, "rate") or 0.0, view.rate_count(mode, metric) or 0.0
                low, high = rate_interval(rate, n)
                shown.append(f"{RATE_NAMES[metric]} {rate:,.2f} req/s [{low:,.2f}, {high:,.2f}] of {int(n):,} "
                             "completions")
        if shown:
            clauses.append(f"{mode}: " + ", ".join(shown))
    return f"{too_few_rule()}; latencies in ms: " + "; ".join(clauses) if clauses else None
