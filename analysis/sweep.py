"""A sweep's curves: the long summaries of its levels side by side (sweep.parquet: the long
format plus `level` and `offered_req_per_s`), and the report's view of them, per mode against
offered load: throughput, TPOT and TTFT, the speedup over the baseline with its interval,
whether the level saturated, and per mode and tenant where the speedup falls to 1.0."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from analysis.cells import ALL
from analysis.crossover import crossover
from analysis.long_summary import LONG_SCHEMA
from analysis.stats import Ratio, ms_text

LEVEL_SCHEMA = pa.schema([*LONG_SCHEMA, pa.field("level", pa.string()), pa.field("offered_req_per_s", pa.float64())])
# A level saturated when its completions fall this far behind what was offered (over the steady
# window): the fleet no longer keeps up, and higher levels only grow the queue.
SATURATED_BELOW = 0.9
# ... or, without a steady window, when the requests in flight at the last arrival exceed those
# halfway through the arrivals by this factor (a queue growing linearly doubles; a stationary one
# stays level) and by at least MIN_BACKLOG requests (so a handful of long requests is no verdict).
QUEUE_GROWTH = 1.5
MIN_BACKLOG = 5


def with_level(long: pa.Table, level: str, offered_req_per_s: float) -> pa.Table:
    n = long.num_rows
    return long.append_column("level", pa.array([level] * n, pa.string())).append_column(
        "offered_req_per_s", pa.array([offered_req_per_s] * n, pa.float64()))


def _cells(sweep: pa.Table) -> dict[tuple, dict]:
    return {(r["level"], r["mode"], r["tenant"], r["metric"], r["statistic"]): r for r in sweep.to_pylist()}


def _value(cells: dict, key: tuple) -> float | None:
    r = cells.get(key)
    return None if r is None or r["value"] is None or math.isnan(r["value"]) else r["value"]


def _ratio(cells: dict, level: str, mode: str, tenant: str) -> Ratio | None:
    r = cells.get((level, mode, tenant, "speedup_e2e", "geomean"))
    if r is None or r["ci_low"] is None:
        return None
    return Ratio(r["value"], r["ci_low"], r["ci_high"], int(_value(cells, (level, mode, tenant, "speedup_e2e",
                                                                            "pairs")) or 0))


def saturated(cells: dict, level: str, mode: str, offered: float) -> bool:
    """The fleet fell behind: completions under SATURATED_BELOW of the offered rate over the
    steady window, or, where a growing queue left none, a backlog that grew from halfway
    through the arrivals to their end (by QUEUE_GROWTH times, and by at least MIN_BACKLOG)."""
    done = _value(cells, (level, mode, ALL, "req_per_s", "rate"))
    if done is not None:   # against what was offered and could succeed: failures are not a backlog
        counts = {s: _value(cells, (level, mode, ALL, "requests", s)) or 0 for s in ("ok", "error", "timeout")}
        sent = sum(counts.values())
        return done < SATURATED_BELOW * offered * (counts["ok"] / sent if sent else 1.0)
    mid = _value(cells, (level, mode, ALL, "in_flight", "mid"))
    end = _value(cells, (level, mode, ALL, "in_flight", "end"))
    return mid is not None and end is not None and end > QUEUE_GROWTH * mid and end - mid >= MIN_BACKLOG


def levels_of(sweep: pa.Table) -> list[tuple[str, float]]:
    """(level, offered req/s), from the lowest offered load up."""
    pairs = {(r["level"], r["offered_req_per_s"]) for r in sweep.select(["level", "offered_req_per_s"]).to_pylist()}
    return sorted(pairs, key=lambda p: p[1])


def crossovers(sweep: pa.Table) -> dict[tuple[str, str], str]:
    """Per (mode, tenant): where its E2E speedup over the baseline falls to 1.0, against offered
    req/s, as text (analysis.crossover)."""
    cells = _cells(sweep)
    levels = levels_of(sweep)
    out = {}
    for mode in dict.fromkeys(sweep["mode"].to_pylist()):
        for tenant in dict.fromkeys(pc.unique(sweep["tenant"]).to_pylist()):
            ratios = [_ratio(cells, level, mode, tenant) for level, _ in levels]
            pairs = [(offered, r) for (_, offered), r in zip(levels, ratios, strict=True) if r is not None]
            if len(pairs) >= 2:
                out[mode, tenant] = crossover([p[0] for p in pairs], [p[1] for p in pairs]).text(" req/s")
    return out


def sweep_markdown(sweep: pa.Table, title: str) -> str:
    cells = _cells(sweep)
    levels = levels_of(sweep)
    modes = list(dict.fromkeys(sweep["mode"].to_pylist()))
    out = [f"# {title}", "",
           "Per level (offered load), over each mode's steady window: done req/s and output tok/s; latencies "
           "in ms from the send; the E2E speedup over the baseline, paired by request, with its 95% interval. "
           f"*saturated*: completions under {SATURATED_BELOW:.0%} of the offered rate over the steady window or, "
           f"where a growing queue left none, requests in flight growing {QUEUE_GROWTH:g}x from halfway through "
           "the arrivals to their end; in brackets, completions per second from the first to the last.", ""]
    for mode in modes:
        rows = []
        for level, offered in levels:
            done = _value(cells, (level, mode, ALL, "req_per_s", "rate"))
            departing = _value(cells, (level, mode, ALL, "req_per_s", "departures"))
            r = _ratio(cells, level, mode, ALL)
            speed = "-" if r is None else r.text()
            flag = " *saturated*" if saturated(cells, level, mode, offered) else ""
            shown = f"{done:,.2f}" if done is not None else "-" if departing is None else f"({departing:,.2f})"
            rows.append([level, f"{offered:,.2f}", shown + flag,
                         "-" if (t := _value(cells, (level, mode, ALL, "out_tok_per_s", "rate"))) is None
                         else f"{t:,.0f}",
                         ms_text(_value(cells, (level, mode, ALL, "tpot_ms", "p50"))),
                         ms_text(_value(cells, (level, mode, ALL, "tpot_ms", "p99"))),
                         ms_text(_value(cells, (level, mode, ALL, "ttft_ms", "p99"))), speed])
        header = ["level", "offered req/s", "done req/s", "out tok/s", "TPOT p50", "TPOT p99", "TTFT p99",
                  "speedup E2E (95% CI)"]
        out += [f"## {mode}", "", "| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        out.append("")
    found = crossovers(sweep)
    if found:
        tenants = [*sorted({t for _, t in found} - {ALL}), ALL]
        shown = [m for m in modes if any((m, t) in found for t in tenants)]
        out += ["## Where speculation stops paying", "",
                "The offered load at which the E2E speedup over the baseline falls to 1.0, interpolated between "
                "the levels around it (log-log), with the range its 95% interval allows.", "",
                "| tenant | " + " | ".join(shown) + " |", "|---" + "|---" * len(shown) + "|"]
        out += ["| " + " | ".join([t, *(found.get((m, t), "-") for m in shown)]) + " |" for t in tenants]
        out.append("")
    return "\n".join(out)
