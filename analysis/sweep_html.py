"""A sweep's report.html: one self-contained file (plotly.js inlined, opens offline) with the
curves of sweep.parquet, one line per mode (each tenant one click away in the legend, hidden at
first), and the model's prediction dashed where the sweep has one:
- output tokens/s against the load, in total and per GPU (over each level's steady window, or
  its makespan where it had none);
- the latency-throughput frontier: TPOT p50, TPOT p99 and TTFT p99 against output tokens/s;
- the E2E speedup over the baseline against the load, with its 95% interval;
- acceptance (the server's, else the requests' own) against the load.
"""

from __future__ import annotations

import html
import math

import markdown
import plotly.graph_objects as go
import pyarrow as pa
from plotly.offline import get_plotlyjs

from analysis.cells import ALL
from analysis.html import STYLE, _layout, colours
from analysis.sweep import _cells, _value, levels_of, load_unit, steady_or_makespan


def _rate(cells: dict, key: tuple[str, str, str, str, str]) -> float | None:
    """A cell's value; a `rate` without a steady window over the level's makespan, as report.md."""
    return steady_or_makespan(cells, key[:4])[0] if key[4] == "rate" else _value(cells, key)


def _series(cells: dict, sweep: pa.Table, mode: str, tenant: str, metric: str, statistic: str,
            per: float = 1.0) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for level, load, _ in levels_of(sweep):
        v = _rate(cells, (level, mode, tenant, metric, statistic))
        if v is not None:
            xs.append(load)
            ys.append(v / per)
    return xs, ys


def _lines(fig: go.Figure, sweep: pa.Table, predicted: pa.Table | None, y: tuple[str, str], per: float = 1.0,
           x: tuple[str, str] | None = None) -> go.Figure:
    """One line per mode (solid: measured; dashed: the model), and per tenant (legend only)."""
    modes = list(dict.fromkeys(sweep["mode"].to_pylist()))
    colour = colours(modes)
    tenants = [t for t in dict.fromkeys(sweep["tenant"].to_pylist()) if t != ALL]
    for table, dash, what in ((sweep, None, ""), (predicted, "dash", " (model)")):
        if table is None:
            continue
        cells = _cells(table)
        for mode in modes:
            for tenant in [ALL, *(tenants if dash is None else [])]:   # the model: each mode as a whole
                if x is None:
                    xs, yv = _series(cells, table, mode, tenant, *y, per=per)
                else:   # the frontier: y against x at the levels where both exist
                    pairs = _paired(cells, table, mode, tenant, x, y)
                    xs, yv = [p[0] for p in pairs], [p[1] for p in pairs]
                if not xs:
                    continue
                name = f"{mode}{what}" if tenant == ALL else f"{mode} {tenant}{what}"
                fig.add_trace(go.Scatter(x=xs, y=yv, mode="lines+markers", name=name,
                                         visible=True if tenant == ALL else "legendonly",
                                         line={"color": colour[mode], "dash": dash,
                                               "width": 2 if tenant == ALL else 1}))
    return fig


def _paired(cells: dict, table: pa.Table, mode: str, tenant: str, x: tuple[str, str],
            y: tuple[str, str]) -> list[tuple[float, float]]:
    out = []
    for level, _, _ in levels_of(table):
        a, b = _rate(cells, (level, mode, tenant, *x)), _rate(cells, (level, mode, tenant, *y))
        if a is not None and b is not None:
            out.append((a, b))
    return out


def speedups(sweep: pa.Table, unit: str) -> go.Figure:
    cells = _cells(sweep)
    modes = list(dict.fromkeys(sweep["mode"].to_pylist()))
    colour = colours(modes)
    fig = go.Figure()
    for mode in modes:
        xs, ys, lo, hi = [], [], [], []
        for level, load, _ in levels_of(sweep):
            r = cells.get((level, mode, ALL, "speedup_e2e", "geomean"))
            if r is None or r["value"] is None or math.isnan(r["value"]) or r["ci_low"] is None:
                continue
            xs.append(load)
            ys.append(r["value"])
            lo.append(r["value"] - r["ci_low"])
            hi.append(r["ci_high"] - r["value"])
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=mode, line={"color": colour[mode]},
                                     error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo}))
    fig.add_hline(y=1.0, line={"color": "#888", "dash": "dot"})
    return _layout(fig, "E2E speedup over the baseline (95% interval)", unit, "speedup (x)")


def sweep_html(title: str, report_md: str, sweep: pa.Table, gpus: int, predicted: pa.Table | None = None) -> str:
    unit = load_unit(sweep)
    log_x = {"xaxis_type": "log"}
    figs = [
        _layout(_lines(go.Figure(), sweep, predicted, ("out_tok_per_s", "rate")), "Output tokens/s", unit,
                "tokens/s").update_layout(**log_x),
        _layout(_lines(go.Figure(), sweep, predicted, ("out_tok_per_s", "rate"), per=gpus),
                f"Output tokens/s per GPU ({gpus} a mode)", unit, "tokens/s per GPU").update_layout(**log_x),
    ]
    for metric, stat, name in (("tpot_ms", "p50", "TPOT p50"), ("tpot_ms", "p99", "TPOT p99"),
                               ("ttft_ms", "p99", "TTFT p99")):
        figs.append(_layout(_lines(go.Figure(), sweep, predicted, (metric, stat), x=("out_tok_per_s", "rate")),
                            f"{name} against throughput", "output tokens/s", f"{name} (ms)"))
    figs.append(speedups(sweep, unit).update_layout(**log_x))
    accept = go.Figure()
    for stat in ("server", "requests"):
        if any(r["metric"] == "acceptance_rate" and r["statistic"] == stat
               for r in sweep.select(["metric", "statistic"]).to_pylist()):
            _lines(accept, sweep, None, ("acceptance_rate", stat))
            break
    if accept.data:
        figs.append(_layout(accept, "Draft acceptance", unit, "accepted / drafted").update_layout(**log_x))
    plots = "\n".join(f'<div class="plot">{f.to_html(full_html=False, include_plotlyjs=False)}</div>' for f in figs)
    md = markdown.markdown(report_md, extensions=["tables"])
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style><script>{get_plotlyjs()}</script></head><body>\n<h1>{html.escape(title)}</h1>\n"
            "<p>Solid: measured; dashed: the simulator's model of the same levels. Click a legend entry to show a "
            f"tenant.</p>\n<h2>Curves</h2>\n{plots}\n{md}\n</body></html>\n")
