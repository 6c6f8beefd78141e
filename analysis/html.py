"""report.html: one self-contained file that opens offline. The tables of report.md (rendered by
the `markdown` package) and plotly figures, with plotly.js inlined once: latency CDFs per mode,
speedup per tenant with its 95% interval, goodput per mode, acceptance per draft position,
a heat map of the mean acceptance length by mode and prompt category, completions, running and
waiting requests and KV use over time, and what the GPUs cost: energy per output token per mode
(with its interval) and power per GPU over time."""

from __future__ import annotations

import html

import markdown
import numpy as np
import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.compute as pc
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs

from analysis.cost import per_token
from analysis.long_summary import ALL, SummaryView
from analysis.stats import floats
from contract.records import OK

CDF_POINTS = 400          # quantiles drawn per CDF line: the file stays small for 50,000 requests
TIME_BIN_S = 1.0          # completions per second, binned
MAX_TIME_BINS = 2000      # a longer span takes wider bins: a plot's size is bounded whatever the trace's span
SERVER_SERIES = {"vllm:num_requests_running": "running requests", "vllm:num_requests_waiting": "waiting requests",
                 "vllm:kv_cache_usage_perc": "KV-cache use (0-1)"}
STYLE = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 8px}
td{text-align:right}td:first-child{text-align:left}th{background:#f3f3f3}.plot{margin:1.5em 0}
code{background:#f3f3f3;padding:0 3px}"""


def colours(modes: list[str]) -> dict[str, str]:
    """One colour per mode, the same in every plot."""
    palette = qualitative.Plotly
    return {m: palette[i % len(palette)] for i, m in enumerate(modes)}


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, template="plotly_white", height=420,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


def latency_cdfs(records: pa.Table, modes: list[str]) -> list[go.Figure]:
    """One figure per latency: the share of succeeded requests at or below each value, per mode."""
    figs = []
    ok = records.filter(pc.equal(records["status"], OK))
    probs = np.linspace(0, 1, CDF_POINTS)
    for column, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E")):
        fig = go.Figure()
        for mode in modes:
            v = floats(ok.filter(pc.equal(ok["mode"], mode))[column])
            v = v[np.isfinite(v)]
            if len(v):
                fig.add_trace(go.Scatter(x=np.quantile(v, probs), y=probs, mode="lines", name=mode,
                                         line={"color": colours(modes)[mode]}))
        figs.append(_layout(fig, f"{name}: cumulative share of requests", f"{name} (ms)", "share of requests"))
    return figs


def speedup_by_tenant(summary: pa.Table, modes: list[str]) -> go.Figure | None:
    rows = [r for r in summary.to_pylist() if r["metric"] == "speedup_e2e" and r["statistic"] == "geomean"]
    if not rows:
        return None
    fig = go.Figure()
    for mode in dict.fromkeys(r["mode"] for r in rows):
        mine = [r for r in rows if r["mode"] == mode]
        fig.add_trace(go.Bar(x=[r["tenant"] for r in mine], y=[r["value"] for r in mine], name=mode,
                             marker_color=colours(modes)[mode],
                             error_y={"type": "data", "array": [r["ci_high"] - r["value"] for r in mine],
                                      "arrayminus": [r["value"] - r["ci_low"] for r in mine]}))
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="baseline")
    return _layout(fig, "E2E speedup over the baseline by tenant (paired, 95% interval)", "tenant", "speedup (x)")


def goodput_by_mode(summary: pa.Table, modes: list[str]) -> go.Figure | None:
    rows = [r for r in summary.to_pylist() if r["metric"] == "goodput_req_per_s" and r["tenant"] == ALL]
    if not rows:
        return None
    fig = go.Figure(go.Bar(x=[r["mode"] for r in rows], y=[r["value"] for r in rows],
                           marker_color=[colours(modes)[r["mode"]] for r in rows]))
    return _layout(fig, "goodput: requests within every SLO of their tenant, per second", "mode", "req/s")


def acceptance_by_position(summary: pa.Table, modes: list[str]) -> go.Figure | None:
    """Both of the server's views, each trace named by its source: /metrics counters (solid) and
    the responses' own per-request counts (hatched)."""
    sources = {"acceptance_at_position": ("/metrics", ""), "request_acceptance_at_position": ("per request", "/")}
    rows = [r for r in summary.to_pylist() if r["metric"] in sources and r["tenant"] == ALL]
    if not rows:
        return None
    fig = go.Figure()
    for metric, (source, hatch) in sources.items():
        for mode in dict.fromkeys(r["mode"] for r in rows if r["metric"] == metric):
            mine = [r for r in rows if r["mode"] == mode and r["metric"] == metric]
            fig.add_trace(go.Bar(x=[r["statistic"].removeprefix("pos") for r in mine], y=[r["value"] for r in mine],
                                 name=f"{mode} ({source})", marker_color=colours(modes)[mode],
                                 marker_pattern_shape=hatch))
    return _layout(fig, "server: share of steps that accepted the draft at each position", "draft position",
                   "accepted share")


def acceptance_heatmap(summary: pa.Table) -> go.Figure | None:
    """The mean acceptance length per mode (rows) and prompt category (columns), from the long
    summary's `category_acceptance_length` rows (analysis.category): colour the value, each cell
    its value, its 95% interval (none from under 8 requests) and the requests it is of; None where
    no mode has one."""
    v = SummaryView(summary)
    found = {(m, c): value for (m, t, metric, c) in v.cells if metric == "category_acceptance_length"
             and t == ALL and (value := v.get(m, metric, c)) is not None}
    if not found:
        return None
    modes = [m for m in v.modes if any(m == mode for mode, _ in found)]
    categories = sorted({c for _, c in found})

    def text(m: str, c: str) -> str:
        if (m, c) not in found:
            return ""
        low, high = v.interval(m, "category_acceptance_length", c)
        bounds = f"[{low:.2f}, {high:.2f}]" if low is not None and high is not None and np.isfinite([low, high]).all() \
            else "[no interval]"
        return f"{found[m, c]:.2f}<br>{bounds}<br>n={int(v.get(m, 'category_requests', c) or 0):,}"
    fig = go.Figure(go.Heatmap(
        z=[[found.get((m, c)) for c in categories] for m in modes], x=categories, y=modes,
        text=[[text(m, c) for c in categories] for m in modes], texttemplate="%{text}", colorscale="Viridis",
        colorbar={"title": "mean acceptance length"}, hoverongaps=False, name="acceptance length",
        hovertemplate="%{y}, %{x}: %{text}<extra></extra>"))
    fig = _layout(fig, "Mean acceptance length by category (each cell: value, 95% interval, requests)",
                  "prompt category", "mode")
    fig.update_layout(height=max(260, 90 + 70 * len(modes)))
    return fig


def per_second(t: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Events at times `t` (s; or their `weights`) per second, in bins of TIME_BIN_S widened so
    that there are at most MAX_TIME_BINS + 1 of them whatever the span: (bin starts, rates)."""
    width = max(TIME_BIN_S, float(np.max(t, initial=0.0)) / MAX_TIME_BINS)
    bins = np.minimum(np.floor(t / width), MAX_TIME_BINS).astype(np.int64).clip(0)
    counts = np.bincount(bins, weights=weights)
    return np.arange(len(counts)) * width, counts / width


def over_time(records: pa.Table, metrics: pa.Table | None, modes: list[str]) -> list[go.Figure]:
    """Offered and completed requests per second and output tokens per second (records), and the
    servers' queue and KV use (/metrics), against seconds since each mode's first scheduled
    request: a queue that grows during the run shows as completions falling behind arrivals."""
    fig, tokens_fig = go.Figure(), go.Figure()

    for mode in modes:
        everything = records.filter(pc.equal(records["mode"], mode))
        mine = everything.filter(pc.equal(everything["status"], OK))
        if not mine.num_rows:
            continue
        start = pc.min(everything["scheduled_ns"]).as_py()
        colour = colours(modes)[mode]
        x, y = per_second((everything["scheduled_ns"].to_numpy() - start) / 1e9)
        fig.add_trace(go.Scatter(x=x, y=y, name=f"{mode} offered", mode="lines", line_shape="hv",
                                 line={"color": colour, "dash": "dot"}))
        done_s = (mine["last_token_ns"].to_numpy() - start) / 1e9
        x, y = per_second(done_s)
        fig.add_trace(go.Scatter(x=x, y=y, name=f"{mode} completed", mode="lines", line_shape="hv",
                                 line={"color": colour}))
        x, y = per_second(done_s, pc.fill_null(mine["completion_tokens"], 0).to_numpy().astype(np.float64))
        tokens_fig.add_trace(go.Scatter(x=x, y=y, name=mode, mode="lines", line_shape="hv", line={"color": colour}))
    figs = [_layout(fig, "offered (dotted) and completed requests per second", "seconds since the mode's first "
                    "request", "req/s"),
            _layout(tokens_fig, "output tokens per second (completion tokens of the requests done in each second)",
                    "seconds since the mode's first request", "tok/s")]
    if metrics is None or not metrics.num_rows:
        return figs
    for metric, label in SERVER_SERIES.items():
        sub = metrics.filter(pc.equal(metrics["metric"], metric))
        if not sub.num_rows:
            continue
        fig = go.Figure()
        for mode in modes:
            m = sub.filter(pc.equal(sub["mode"], mode))
            if not m.num_rows:
                continue
            times = m["time_ns"].to_numpy()
            per_time: dict[int, float] = {}
            for tn, v in zip(times.tolist(), m["value"].to_pylist(), strict=True):  # summed over replicas
                per_time[tn // 10**9] = per_time.get(tn // 10**9, 0.0) + v
            first = min(per_time)
            keys = sorted(per_time)
            fig.add_trace(go.Scatter(x=[k - first for k in keys], y=[per_time[k] for k in keys], name=mode,
                                     mode="lines", line={"color": colours(modes)[mode]}))
        figs.append(_layout(fig, f"server: {label} (summed over a mode's replicas)", "seconds since the mode's "
                            "first scrape", label))
    return figs


def power_over_time(gpu: pa.Table | None, modes: list[str]) -> go.Figure | None:
    """Mean power per GPU of each mode at each scrape, against the seconds since its first (None:
    no GPU was read)."""
    if gpu is None:
        return None
    fig = go.Figure()
    for mode in modes:
        mine = gpu.filter(pc.equal(gpu["mode"], mode))
        if not mine.num_rows:
            continue
        by_scrape = mine.group_by("time_ns").aggregate([("power_w", "mean")]).sort_by("time_ns")
        t = by_scrape["time_ns"].to_numpy()
        fig.add_trace(go.Scatter(x=(t - t[0]) / 1e9, y=by_scrape["power_w_mean"].to_numpy(zero_copy_only=False),
                                 mode="lines", name=mode, line={"color": colours(modes)[mode]}))
    return _layout(fig, "GPU power per GPU (each mode's GPUs averaged at each scrape)",
                   "seconds since the mode's first scrape", "W per GPU")


def energy_per_token(summary: pa.Table, modes: list[str]) -> go.Figure | None:
    """Each mode's energy per output token, with its 95% interval where it has one (None: no mode
    has the figure)."""
    v = SummaryView(summary)
    found = {m: f for m in modes if (f := per_token(v, m)) is not None}
    if not found:
        return None
    shown = list(found)
    gap = lambda a, b: np.nan if a is None or b is None else abs(a - b)  # noqa: E731
    fig = go.Figure(go.Bar(
        x=shown, y=[found[m].joules for m in shown], marker_color=[colours(modes)[m] for m in shown],
        error_y={"type": "data", "array": [gap(found[m].high, found[m].joules) for m in shown],
                 "arrayminus": [gap(found[m].joules, found[m].low) for m in shown], "visible": True},
        customdata=[found[m].window for m in shown],
        hovertemplate="%{x}: %{y:.3g} J per output token, over its %{customdata} window<extra></extra>"))
    return _layout(fig, "Energy per output token (all of a mode's GPUs; 95% interval where its steady window allowed "
                   "one)", "mode", "J per output token")


def has_data(fig: go.Figure) -> bool:
    """Whether any trace of `fig` has a value to draw (a bar of NaN draws nothing; a heat map's
    values are its z)."""
    drawn = (np.ravel(np.asarray(t.z if t.type == "heatmap" else t.y, dtype=object)) for t in fig.data
             if (t.z if t.type == "heatmap" else t.y) is not None)
    return any(np.isfinite(np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)).any()
               for values in drawn)


def _plot(fig: go.Figure, why_empty: str) -> str:
    """The plot, or where it has nothing to draw, a line that says so and why (never empty axes)."""
    if has_data(fig):
        return f'<div class="plot">{fig.to_html(full_html=False, include_plotlyjs=False)}</div>'
    return f'<p class="no-plot"><b>{html.escape(fig.layout.title.text or "")}</b>: nothing to plot, {why_empty}.</p>'


def report_html(title: str, report_md: str, records: pa.Table, summary: pa.Table, metrics: pa.Table | None,
                modes: list[str], gpu: pa.Table | None = None) -> str:
    figs = [(goodput_by_mode(summary, modes), "since no mode had a steady window to measure a rate over (its "
             "arrivals were too short: replay more requests, --requests)"),
            (speedup_by_tenant(summary, modes), "since no request succeeded in both the baseline and another mode")]
    figs += [(f, "since no request succeeded") for f in latency_cdfs(records, modes)]
    figs += [(acceptance_by_position(summary, modes), "since the server sent no acceptance counts"),
             (acceptance_heatmap(summary), "since no request carried its own acceptance counts")]
    figs += [(f, "since no request succeeded") for f in over_time(records, metrics, modes)]
    figs += [(energy_per_token(summary, modes), "since no mode's GPUs were read over a window with output tokens"),
             (power_over_time(gpu, modes), "since no GPU reported its power")]
    plots = "\n".join(_plot(f, why) for f, why in figs if f is not None)
    cut = report_md.find("\n## ", report_md.find("## Modes") + 1)   # the modes table, then the plots
    head, rest = (report_md, "") if cut < 0 else (report_md[:cut], report_md[cut:])
    md = lambda text: markdown.markdown(text, extensions=["tables"])  # noqa: E731
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style><script>{get_plotlyjs()}</script></head><body>\n"
            f"{md(head)}\n<h2>Plots</h2>\n{plots}\n{md(rest)}\n</body></html>\n")
