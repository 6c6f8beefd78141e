"""A soak's verdict from its records and server metrics: SLOs over sliding windows, and drift over
the run (a latency trend, error bursts, KV-cache use and queue growth on the server), each finding
with the window it happened in. Pure functions over Arrow/numpy columns; no I/O.

A trend is the slope of a per-window series against time, fitted together with the window's
offered load (least squares on [1, time, load]): a day-shaped load raises latency at its peak and
lowers it at its trough, which is not drift; only what the load does not explain is. The slope
counts when it moves the series past a threshold over the run and stands more than
TREND_T standard errors from zero.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.reader import read_requests
from analysis.server import load_server_metrics
from analysis.slo import METRIC_OF, SLO_COLUMNS
from common import files
from common.times import span_text
from contract.records import CLIENT, FAILED, outcomes

MIN_WINDOW_REQUESTS = 20   # a window's p99 from fewer successes says nothing; such windows are skipped
MIN_TREND_WINDOWS = 6      # fewer windows than this: no trend is judged
TREND_T = 3.0              # a trend's slope must stand this many standard errors from zero ...
LATENCY_DRIFT = 0.20       # ... and move a latency median by this share of its level over the run
KV_DRIFT = 0.10            # ... or KV-cache use by 10 points (a fraction of the cache)
QUEUE_DRIFT = 5.0          # ... or the server's waiting requests by 5
BURST_MIN_ERRORS = 5       # an error burst: at least this many errors in a window ...
BURST_SHARE = 0.05         # ... and more than 5% of its requests and BURST_RATIO x the run's share
BURST_RATIO = 3.0


@dataclass(frozen=True)
class Finding:
    """One thing the soak got wrong, and where: windows [first, last] of `window_s` seconds."""

    check: str           # slo, latency_trend, error_burst, kv_growth, queue_growth
    mode: str
    tenant: str | None
    first: int
    last: int
    start_s: float
    end_s: float
    message: str

    def as_dict(self) -> dict:
        return asdict(self)

# The records' columns a soak's verdict reads (windows, drift, SLO windows).
SOAK_COLUMNS = ["mode", "tenant", "status", "offset_s", "scheduled_ns", "ttft_ms", "tpot_ms", "e2e_ms", "error_kind"]


def clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def span(start_s: float, end_s: float) -> str:
    return f"{clock(start_s)}-{clock(end_s)}"


def _merge(flags: np.ndarray) -> list[tuple[int, int]]:
    """Runs of consecutive True as (first, last) indices."""
    runs, start = [], None
    for i, f in enumerate([*flags.tolist(), False]):
        if f and start is None:
            start = i
        elif not f and start is not None:
            runs.append((start, i - 1))
            start = None
    return runs


def slo_windows(records: pa.Table, window_s: float, step_s: float, duration_s: float,
                targets: dict[str, dict[str, float]] | None = None) -> list[Finding]:
    """Per mode, tenant and target, the sliding windows (`window_s` long, one every `step_s`) whose
    p99 over successful requests missed it. `targets`: tenant -> {slo column: ms}; default the
    per-request targets of `records` (joined from the trace, analysis.slo.SLO_COLUMNS)."""
    out: list[Finding] = []
    ok = records.filter(pc.equal(records["status"], "ok"))
    starts = np.arange(0.0, max(step_s, duration_s - window_s + step_s), step_s)
    for mode in sorted(set(ok["mode"].to_pylist())):
        m = ok.filter(pc.equal(ok["mode"], mode))
        for tenant in sorted(set(m["tenant"].to_pylist())):
            t = m.filter(pc.equal(m["tenant"], tenant))
            order = np.argsort(t["offset_s"].to_numpy(), kind="stable")
            offsets = t["offset_s"].to_numpy()[order]
            lo, hi = np.searchsorted(offsets, starts), np.searchsorted(offsets, starts + window_s)
            for col in SLO_COLUMNS:
                target = _target(t, col, tenant, targets)
                if target is None:
                    continue
                values = t[METRIC_OF[col]].to_numpy(zero_copy_only=False).astype(float)[order]
                enough = [np.isfinite(values[a:b]).sum() >= MIN_WINDOW_REQUESTS for a, b in zip(lo, hi, strict=True)]
                p99 = np.array([np.nanpercentile(values[a:b], 99) if ok else np.nan
                                for a, b, ok in zip(lo, hi, enough, strict=True)])
                missed = np.nan_to_num(p99, nan=-np.inf) > target
                for first, last in _merge(missed):
                    worst = first + int(np.argmax(p99[first:last + 1]))
                    metric = METRIC_OF[col].removesuffix("_ms").upper()
                    out.append(Finding(
                        "slo", mode, tenant, first, last, float(starts[first]), float(starts[last] + window_s),
                        f"{mode} / {tenant}: {metric} p99 above its {target:,.0f} ms target over "
                        f"{span(starts[first], starts[last] + window_s)} (worst {p99[worst]:,.0f} ms in the window "
                        f"{span(starts[worst], starts[worst] + window_s)})"))
    return out


def _target(t: pa.Table, col: str, tenant: str, targets: dict | None) -> float | None:
    if targets is not None:
        return targets.get(tenant, {}).get(col)
    if col not in t.column_names:
        return None
    v = pc.max(t[col]).as_py()
    return None if v is None else float(v)


def trend(y: np.ndarray, t: np.ndarray, load: np.ndarray) -> tuple[float, float] | None:
    """(slope per second, its standard error) of y against t with the load as a second regressor;
    None with too few finite windows, or when time and load cannot be told apart."""
    keep = np.isfinite(y) & np.isfinite(load)
    if keep.sum() < MIN_TREND_WINDOWS:
        return None
    y, t, load = y[keep], t[keep], load[keep]
    t_sd = t.std()
    if t_sd == 0:
        return None
    cols = [np.ones_like(t), (t - t.mean()) / t_sd]   # standardised, so the check below is about collinearity
    if load.std() > 0:
        cols.append((load - load.mean()) / load.std())
    x = np.column_stack(cols)
    xtx = x.T @ x
    if np.linalg.cond(xtx) > 1e8:   # time and load nearly the same line (a ramp): no telling them apart
        return None
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    dof = len(y) - x.shape[1]
    sigma2 = float(resid @ resid) / dof if dof > 0 else 0.0
    se = float(np.sqrt(max(sigma2, 0.0) * np.linalg.inv(xtx)[1, 1]))
    return float(beta[1]) / t_sd, se / t_sd


def drift(check: str, mode: str, y: np.ndarray, starts: np.ndarray, load: np.ndarray, window_s: float,
          threshold: float, relative: bool, what: str, unit: str = "") -> Finding | None:
    """A finding when y (one value per tumbling window) drifts past `threshold` over the run
    (a share of its median when `relative`), load aside; it names the window it passed it in."""
    fit = trend(y, starts, load)
    if fit is None:
        return None
    slope, se = fit
    level = float(np.nanmedian(y))
    have = np.flatnonzero(np.isfinite(y) & np.isfinite(load))   # no extrapolating past the windows with data
    t0, t1 = starts[have[0]], starts[have[-1]]
    rise = slope * (t1 - t0)
    limit = threshold * abs(level) if relative else threshold
    if abs(rise) <= limit or (se > 0 and abs(slope) / se < TREND_T) or rise < 0:
        return None
    first = int(have[np.argmax(slope * (starts[have] - t0) > limit)])
    change = f"{rise / level:+.0%}" if relative and level else f"{rise:+.3g}{unit}"
    past = f"{threshold:.0%}" if relative else f"{threshold:g}{unit}"
    sigmas = f"{abs(slope) / se:.1f} standard errors" if se > 0 else "no scatter at all"
    return Finding(check, mode, None, first, int(have[-1]), float(starts[first]), float(t1 + window_s),
                   f"{mode}: {what} {'drifted' if relative else 'rose'} {change} over the run, the load held apart "
                   f"({sigmas}); past {past} from the window {span(starts[first], starts[first] + window_s)}")


def error_bursts(mode: str, errors: np.ndarray, sent: np.ndarray, starts: np.ndarray, window_s: float) -> list[Finding]:
    """Windows whose errors and timeouts stand far above the run's own share (`sent`: the requests
    that ended ok or failed, the share the gate takes; contract.records.outcomes)."""
    share = errors.sum() / max(1, sent.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(sent > 0, errors / sent, 0.0)
    hot = (errors >= BURST_MIN_ERRORS) & (w > max(BURST_SHARE, BURST_RATIO * share))
    out = []
    for a, b in _merge(hot):
        bad, of = int(errors[a:b + 1].sum()), int(sent[a:b + 1].sum())
        out.append(Finding("error_burst", mode, None, a, b, float(starts[a]), float(starts[b] + window_s),
                           f"{mode}: an error burst over {span(starts[a], starts[b] + window_s)}: {bad} errors and "
                           f"timeouts in {of} requests ({bad / max(1, of):.0%}; the run's share is {share:.1%})"))
    return out


WINDOW_SCHEMA = pa.schema([
    ("mode", pa.string()), ("window", pa.int32()), ("start_s", pa.float64()), ("end_s", pa.float64()),
    ("scheduled", pa.int64()), ("sent", pa.int64()), ("ok", pa.int64()), ("errors", pa.int64()),
    ("client", pa.int64()), ("not_sent", pa.int64()), ("ttft_p50_ms", pa.float64()), ("ttft_p99_ms", pa.float64()),
    ("tpot_p50_ms", pa.float64()), ("tpot_p99_ms", pa.float64()), ("e2e_p99_ms", pa.float64()),
    ("kv_cache_usage", pa.float64()), ("waiting", pa.float64()),
])
KV, WAITING = "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting"


def _q(values: np.ndarray, q: float) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q)) if values.size else None


def server_offsets(records: pa.Table, time_ns: np.ndarray) -> np.ndarray:
    """Server sample times as trace offsets, read off the records' own (scheduled time, offset)
    pairs: piecewise, so a resumed soak's second stretch maps too."""
    sched = records["scheduled_ns"].to_numpy().astype(np.float64)
    order = np.argsort(sched, kind="stable")
    return np.interp(time_ns.astype(np.float64), sched[order], records["offset_s"].to_numpy()[order])


def windows(records: pa.Table, server: pa.Table | None, window_s: float, duration_s: float) -> pa.Table:
    """Per mode and tumbling window: requests by outcome, latency percentiles, and the server's
    mean KV-cache use and waiting requests (summed over replicas) in WINDOW_SCHEMA."""
    n = max(1, int(np.ceil(duration_s / window_s)))
    rows = []
    for mode in sorted(set(records["mode"].to_pylist())):
        r = records.filter(pc.equal(records["mode"], mode))
        w = np.minimum((r["offset_s"].to_numpy() // window_s).astype(int), n - 1)
        status = np.asarray(r["status"].to_pylist())
        outcome = np.asarray(outcomes(r).to_pylist())   # as the gate counts: the client's own ends apart
        cols = {c: r[c].to_numpy(zero_copy_only=False).astype(float) for c in ("ttft_ms", "tpot_ms", "e2e_ms")}
        kv, waiting = _server_series(server, r, mode, window_s, n)
        for k in range(n):
            mine = w == k
            ok = mine & (status == "ok")
            end = min((k + 1) * window_s, duration_s)
            rows.append({"mode": mode, "window": k, "start_s": k * window_s, "end_s": end,
                         "scheduled": int(mine.sum()), "sent": int((mine & (status != "not_sent")).sum()),
                         "ok": int(ok.sum()),
                         "errors": int((mine & (outcome == FAILED)).sum()),
                         "client": int((mine & (outcome == CLIENT)).sum()),
                         "not_sent": int((mine & (status == "not_sent")).sum()),
                         "ttft_p50_ms": _q(cols["ttft_ms"][ok], 50), "ttft_p99_ms": _q(cols["ttft_ms"][ok], 99),
                         "tpot_p50_ms": _q(cols["tpot_ms"][ok], 50), "tpot_p99_ms": _q(cols["tpot_ms"][ok], 99),
                         "e2e_p99_ms": _q(cols["e2e_ms"][ok], 99), "kv_cache_usage": kv[k], "waiting": waiting[k]})
    return pa.Table.from_pylist(rows, schema=WINDOW_SCHEMA)


def _server_series(server: pa.Table | None, records: pa.Table, mode: str, window_s: float, n: int
                   ) -> tuple[list, list]:
    """Per window: mean KV-cache use over replicas and samples, mean waiting summed over replicas."""
    kv: list = [None] * n
    waiting: list = [None] * n
    if server is None or server.num_rows == 0 or records.num_rows == 0:
        return kv, waiting
    s = server.filter(pc.and_(pc.equal(server["mode"], mode), pc.is_in(server["metric"], pa.array([KV, WAITING]))))
    if s.num_rows == 0:
        return kv, waiting
    sent = records.filter(pc.is_valid(records["scheduled_ns"]))
    sched = sent["scheduled_ns"].to_numpy()
    inside = pc.and_(pc.greater_equal(s["time_ns"], int(sched.min())), pc.less_equal(s["time_ns"], int(sched.max())))
    s = s.filter(inside)   # scrapes before the first request or after the last say nothing of the soak
    if s.num_rows == 0:
        return kv, waiting
    w = np.minimum((server_offsets(sent, s["time_ns"].to_numpy()) // window_s).astype(int), n - 1)
    metric, value = np.asarray(s["metric"].to_pylist()), s["value"].to_numpy()
    replica = np.asarray(s["replica"].to_pylist())
    for k in range(n):
        for name, out, over in ((KV, kv, np.mean), (WAITING, waiting, np.sum)):
            mine = (w == k) & (metric == name)
            if mine.any():   # each replica's mean over the window; then over replicas (mean of a share, sum of a count)
                out[k] = float(over([value[mine & (replica == r)].mean() for r in np.unique(replica[mine])]))
    return kv, waiting


def findings(table: pa.Table, window_s: float) -> list[Finding]:
    """The drift checks over a `windows` table, per mode."""
    out: list[Finding] = []
    for mode in sorted(set(table["mode"].to_pylist())):
        m = table.filter(pc.equal(table["mode"], mode))
        starts = m["start_s"].to_numpy()
        length = np.maximum(m["end_s"].to_numpy() - starts, 1e-9)   # the last window may be shorter
        load = m["scheduled"].to_numpy().astype(float) / length
        col = {c: np.asarray(m[c].to_pylist(), dtype=float) for c in ("tpot_p50_ms", "ttft_p50_ms",
                                                                         "kv_cache_usage", "waiting")}
        thin = m["ok"].to_numpy() < MIN_WINDOW_REQUESTS
        for c, what in (("tpot_p50_ms", "TPOT p50"), ("ttft_p50_ms", "TTFT p50")):
            y = np.where(thin, np.nan, col[c])
            f = drift("latency_trend", mode, y, starts, load, window_s, LATENCY_DRIFT, True, what)
            out += [f] if f else []
        for check, c, limit, what, unit in (("kv_growth", "kv_cache_usage", KV_DRIFT, "the server's KV-cache use", ""),
                                            ("queue_growth", "waiting", QUEUE_DRIFT, "the server's waiting requests",
                                             " requests")):
            f = drift(check, mode, col[c], starts, load, window_s, limit, False, what, unit)
            out += [f] if f else []
        errors = m["errors"].to_numpy()
        out += error_bursts(mode, errors, m["ok"].to_numpy() + errors, starts, window_s)
    return out


def soak_markdown(run_id: str, status: str, p: dict, table: pa.Table, found: list[Finding]) -> str:
    """soak.md: the verdict, each finding with its window, and the windows per mode."""
    lines = [f"# Soak {run_id} ({status})", "",
             f"{span_text(p['duration_s'])}; SLO windows of {p['window_s']:g} s every {p['step_s']:g} s; drift over "
             f"tumbling windows of {p['window_s']:g} s with the offered load held apart.", ""]
    lines += ["## Findings", ""] + ([f"- **{f.check}** ({span(f.start_s, f.end_s)}): {f.message}" for f in found]
                                    or ["- none: every SLO window met its targets and nothing drifted"])
    cols = ["window", "start", "scheduled", "ok", "errors", "client", "not_sent", "ttft_p99_ms", "tpot_p50_ms",
            "tpot_p99_ms", "e2e_p99_ms", "kv_cache_usage", "waiting"]
    for mode in sorted(set(table["mode"].to_pylist())):
        rows = table.filter(pc.equal(table["mode"], mode)).to_pylist()
        lines += ["", f"## {mode}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in rows:
            r["start"] = span(r["start_s"], r["end_s"])
            lines.append("| " + " | ".join("-" if r[c] is None else f"{r[c]:,.3g}" if isinstance(r[c], float)
                                           else str(r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


@dataclass
class SoakAnalysis:
    """A soak's verdict: its windows (per mode) and what was found in them."""

    windows: pa.Table
    findings: list[Finding]


def analyse_soak(run_dir: Path, run_id: str, status: str, params: dict, targets: dict | None) -> SoakAnalysis:
    """The soak's records over tumbling windows (windows.parquet), the drift found in them and,
    with `targets`, every sliding SLO window that missed (findings.json), and soak.md; nothing
    printed. ContractError (or an Arrow or OS error) when the records cannot be read."""
    records = read_requests(run_dir, columns=SOAK_COLUMNS)
    table = windows(records, load_server_metrics(run_dir), params["window_s"], params["duration_s"])
    files.write_table(table, run_dir / "windows.parquet")
    found = findings(table, params["window_s"])
    if targets:
        found = slo_windows(records, params["window_s"], params["step_s"], params["duration_s"], targets) + found
    files.write_text(run_dir / "findings.json", json.dumps([f.as_dict() for f in found], indent=1) + "\n")
    files.write_text(run_dir / "soak.md", soak_markdown(run_id, status, params, table, found))
    return SoakAnalysis(table, found)
