"""A sweep's report.html (and a plan's): one self-contained file (plotly.js inlined, opens offline)
with the curves of sweep.parquet, one line per mode (each tenant one click away in the legend,
hidden at first), and the model's prediction dashed where the sweep has one:
- the interactivity frontier SREs compare on (InferenceMAX's), per mode: each level a point of interactivity
  (output tokens/s per user: 1000 / TPOT p50) against output tokens/s per GPU (over the level's
  steady window, or its makespan where it had none), the Pareto-optimal points joined (the
  frontier as a staircase: analysis.frontier), the levels that missed an SLO (each tenant's p99s
  against the trace's targets, analysis.slo, as each level's own report judges them) drawn as an
  open x, and under it, in words computed from the points, where each speculating mode moves the
  frontier against the baseline's and the interactivity at which it stops paying;
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
import pyarrow.compute as pc
from plotly.offline import get_plotlyjs

from analysis.cells import ALL
from analysis.decision import BASELINE
from analysis.frontier import Point, pareto_front, shift
from analysis.html import STYLE, _layout, colours
from analysis.long_summary import SummaryView
from analysis.slo import MET, METRIC_OF, MISSED, UNJUDGED, has_targets
from analysis.summary import attainment
from analysis.sweep import _cells, _value, levels_of, load_unit, steady_or_makespan
from contract.records import SLO_COLUMNS

INTERACTIVITY = "interactivity: output tokens/s per user (1000 / TPOT p50 ms)"
PER_GPU = "output tokens/s per GPU (steady window)"


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


def tenant_targets(trace: pa.Table) -> dict[str, dict[str, float]] | None:
    """Each tenant's SLO targets from a trace (the highest its requests carry, as
    analysis.slo.targets_of takes them): tenant -> latency metric -> ms; None when the trace sets
    none."""
    if not has_targets(trace):
        return None
    rows = trace.group_by("tenant").aggregate([(c, "max") for c in SLO_COLUMNS]).to_pylist()
    out = {r["tenant"]: {METRIC_OF[c]: float(r[f"{c}_max"]) for c in SLO_COLUMNS if r[f"{c}_max"] is not None}
           for r in rows}
    return {t: v for t, v in out.items() if v}


def level_slos(sweep: pa.Table, targets: dict[str, dict[str, float]]) -> dict[tuple[str, str], tuple[str, str]]:
    """Per (level, mode): its SLO verdict over every tenant (analysis.slo: missed where one tenant
    missed, met where every one met, else too few to judge), read off the level's long summary as
    the level's own report judges it (analysis.summary.attainment), and the missed checks in words."""
    out = {}
    for level, _, _ in levels_of(sweep):
        view = SummaryView(sweep.filter(pc.equal(sweep["level"], level)))
        present = {(m, t) for m, t, _, _ in view.cells}
        found = attainment(view, {(m, t): v for t, v in targets.items() for m in view.modes if (m, t) in present})
        for mode in view.modes:
            mine = [a for a in found if a.mode == mode]
            if not mine:
                continue
            verdicts = {a.verdict for a in mine}
            verdict = MISSED if MISSED in verdicts else MET if verdicts == {MET} else UNJUDGED
            out[level, mode] = (verdict, "; ".join(f"{a.tenant}: {', '.join(a.missed())}" for a in mine
                                                   if a.verdict == MISSED))
    return out


def frontier_points(sweep: pa.Table, gpus: int,
                    slos: dict[tuple[str, str], tuple[str, str]] | None) -> dict[str, list[Point]]:
    """Per mode, each level where it has both a TPOT p50 and an output tokens/s as a frontier
    point: 1000 / TPOT p50 output tokens/s per user, and output tokens/s over the steady window
    (or the makespan) over `gpus`."""
    cells = _cells(sweep)
    out: dict[str, list[Point]] = {}
    for mode in dict.fromkeys(sweep["mode"].to_pylist()):
        out[mode] = []
        for level, _, _ in levels_of(sweep):
            tpot = _value(cells, (level, mode, ALL, "tpot_ms", "p50"))
            rate = _rate(cells, (level, mode, ALL, "out_tok_per_s", "rate"))
            if tpot and tpot > 0 and rate and rate > 0:
                out[mode].append(Point(level, 1000.0 / tpot, rate / gpus,
                                       None if slos is None else slos.get((level, mode), ("", ""))[0] or None))
    return out


def _hover(cells: dict, slos: dict[tuple[str, str], tuple[str, str]] | None, mode: str, p: Point) -> str:
    """A frontier point's hover: its level, figures, where its rate is over, and its SLO verdict."""
    over = steady_or_makespan(cells, (p.level, mode, ALL, "out_tok_per_s"))[1]
    why = "" if slos is None else slos.get((p.level, mode), ("", ""))[1]
    slo = "SLOs: no targets" if p.slo is None else f"SLOs: {p.slo}" + (f" ({why})" if why else "")
    return (f"{mode} {p.level}<br>{p.interactivity:,.1f} output tok/s per user<br>{p.per_gpu:,.1f} output tok/s "
            f"per GPU{' (over the makespan: no steady window)' if over == 'makespan' else ''}<br>{html.escape(slo)}")


def frontier(sweep: pa.Table, gpus: int, targets: dict[str, dict[str, float]] | None) -> tuple[go.Figure, list[str]]:
    """The interactivity frontier per mode (analysis.frontier), and what it says in words."""
    slos = level_slos(sweep, targets) if targets else None
    points = frontier_points(sweep, gpus, slos)
    cells = _cells(sweep)
    colour = colours(list(points))
    fig = go.Figure()
    for mode, pts in points.items():
        if not pts:
            continue

        front = pareto_front(pts)
        fig.add_trace(go.Scatter(x=[p.interactivity for p in front], y=[p.per_gpu for p in front], mode="lines",
                                 line={"color": colour[mode], "shape": "vh", "width": 2}, legendgroup=mode,
                                 name=f"{mode}: Pareto frontier", hoverinfo="skip"))
        for missed, name, marker in ((False, f"{mode}: levels", {"symbol": "circle", "size": 8}),
                                     (True, f"{mode}: levels that missed an SLO",
                                      {"symbol": "x-open", "size": 13, "line": {"width": 2}})):
            shown = [p for p in pts if (p.slo == MISSED) == missed]
            if shown:
                fig.add_trace(go.Scatter(x=[p.interactivity for p in shown], y=[p.per_gpu for p in shown],
                                         mode="markers", name=name, legendgroup=mode,
                                         marker={"color": colour[mode], **marker},
                                         text=[_hover(cells, slos, mode, p) for p in shown],
                                         hovertemplate="%{text}<extra></extra>"))
    _layout(fig, f"Interactivity frontier: output tokens/s per GPU ({gpus} GPU{'s' if gpus != 1 else ''} a mode) "
            "against output tokens/s "
            "per user", INTERACTIVITY, PER_GPU)
    return fig, frontier_words(points, slos, gpus)


def frontier_words(points: dict[str, list[Point]], slos: dict[tuple[str, str], tuple[str, str]] | None,
                   gpus: int) -> list[str]:
    """What the frontier says, a paragraph each: per speculating mode where it moves the frontier
    and where it stops paying (analysis.frontier.Shift), then which levels missed an SLO."""
    out = [f"Each point is a level: output tokens only, {gpus} GPU{'s' if gpus != 1 else ''} a mode; "
           "interactivity is 1000 / TPOT p50 (the median request's output tokens per second after its first); "
           "the line joins each mode's Pareto-optimal levels as a staircase: at an interactivity, the most output "
           "tokens/s per GPU any level gave at that interactivity or higher."]
    if BASELINE not in points:
        out.append(f"No {BASELINE} mode in this sweep: no frontier to compare speculation against.")
    else:
        out += [shift(m, pts, BASELINE, points[BASELINE]).text() for m, pts in points.items() if m != BASELINE]
    if slos is None:
        out.append("The trace sets no SLO targets: no level is marked as missing one.")
    else:
        missed, unjudged = (_levels_said(points, verdict) for verdict in (MISSED, UNJUDGED))
        out.append((f"Missed an SLO (open x): {missed}." if missed else "Every level met its SLOs."
                    if not unjudged else "No level missed an SLO.")
                   + (f" Too few requests to judge the SLOs of {unjudged}." if unjudged else ""))
    return out


def _levels_said(points: dict[str, list[Point]], verdict: str) -> str:
    """The levels whose SLO verdict is `verdict`, the modes that share a set of levels said once
    ("every mode" where all do)."""
    by_levels: dict[tuple[str, ...], list[str]] = {}
    for mode, pts in points.items():
        levels = tuple(p.level for p in pts if p.slo == verdict)
        if levels:
            by_levels.setdefault(levels, []).append(mode)
    every = [m for m, pts in points.items() if pts]
    return "; ".join(f"{'every mode' if modes == every and len(modes) > 1 else ', '.join(modes)} at "
                     f"{', '.join(levels)}" for levels, modes in by_levels.items())


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


def sweep_html(title: str, report_md: str, sweep: pa.Table, gpus: int, predicted: pa.Table | None = None,
               targets: dict[str, dict[str, float]] | None = None, measured: bool = True) -> str:
    """The page; `targets`: each tenant's SLO targets (`tenant_targets` of the trace; None: it sets
    none); `measured`: False for a plan, whose every figure is the model's."""
    unit = load_unit(sweep)
    legend = ("Solid: measured; dashed: the simulator's model of the same levels." if measured else
              "Every figure here is the simulator's model, run in virtual time: nothing was measured.")
    front, words = frontier(sweep, gpus, targets)
    said = "\n".join(f"<p>{html.escape(w)}</p>" for w in words)
    drawn = (f'<div class="plot">{front.to_html(full_html=False, include_plotlyjs=False)}</div>\n' if front.data
             else '<p class="no-plot">No level has both a TPOT p50 and an output tokens/s: no frontier to draw.</p>\n')
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
            f"<p>{legend} Click a legend entry to show a tenant.</p>\n<h2>Frontier</h2>\n{drawn}"
            f"<div class=\"frontier-words\">\n{said}\n</div>\n"
            f"<h2>Curves</h2>\n{plots}\n{md}\n</body></html>\n")
