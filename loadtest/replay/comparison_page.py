"""The Comparison page and tab of `loadtest ui` (served by front.py): per mode, and per tenant on
demand, a table of everything since the start and charts of the last 10 s over time, redrawn every
second from the board's points. Plotly.js is served from the installed plotly package, so the page
needs no network beyond the web UI itself."""

from __future__ import annotations

import html
from functools import cache

from common.times import ms_text

# the Locust tab's columns: (key, title), short enough for the table to fit a 1,400-px window
TAB_COLUMNS = [("mode", "Mode"), ("progress", "Done / all"), ("errors", "Errors"), ("ttft", "TTFT ms p50/p99"),
               ("tpot", "TPOT ms p50/p99"), ("itl", "ITL ms p50/p99"), ("e2e", "E2E ms p50/p99"),
               ("tok_s", "Out tok/s"), ("goodput", "Goodput req/s"), ("tps", "Tok/step"),
               ("acceptance", "Acceptance")]
# the page's charts, each a figure of the last 10 s per mode: (the point's key, title)
CHARTS = [("ttft_p99", "TTFT p99 (ms)"), ("tpot_p50", "TPOT p50 (ms)"), ("itl_p99", "ITL p99 (ms)"),
          ("e2e_p99", "E2E p99 (ms)"), ("output_tok_s", "Output tokens/s"),
          ("goodput", "Goodput: requests/s within every SLO"), ("tokens_per_step", "Tokens per step (client)"),
          ("acceptance", "Server acceptance rate (vllm:spec_decode_*)")]


def _n(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def tab_rows(table: dict, modes: list[str]) -> list[dict[str, str]]:
    """One row per mode (all tenants) for the Locust tab, from the board's table."""
    rows = []
    for mode in modes:
        r = table.get(mode, {}).get("all")
        if r is None:
            rows.append({"mode": mode, "progress": "waiting"})
            continue
        rows.append({"mode": mode, "progress": f"{r.get('done', 0):,} / {r.get('total', 0):,}",
                     "errors": f"{r['errors']:,}" + (f" +{r['client']:,} client" if r.get("client") else ""),
                     **{m: f"{ms_text(r[f'{m}_p50'])} / {ms_text(r[f'{m}_p99'])}"
                        for m in ("ttft", "tpot", "itl", "e2e")},
                     "tok_s": _n(r["output_tok_s"], 0), "goodput": _n(r["goodput"], 2),
                     "tps": _n(r["tokens_per_step"], 2), "acceptance": _n(r.get("acceptance"), 3)})
    return rows


@cache
def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def page(about: str) -> str:
    charts = "\n".join(f'<div class="chart" id="chart-{key}" data-title="{html.escape(title)}"></div>'
                       for key, title in CHARTS)
    keys = ",".join(f'"{key}"' for key, _ in CHARTS)
    return PAGE.replace("@ABOUT@", html.escape(about)).replace("@CHARTS@", charts).replace("@KEYS@", keys)


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>loadtest: comparison</title>
<link rel="icon" href="data:,">
<script src="/comparison/plotly.min.js"></script>
<style>
 body { font-family: sans-serif; margin: 16px; color: #1b1f24; }
 header { display: flex; gap: 24px; align-items: baseline; flex-wrap: wrap; }
 #state { padding: 4px 10px; border-radius: 4px; background: #e8eef6; }
 table { border-collapse: collapse; margin: 12px 0; font-size: 13px; }
 th, td { border-bottom: 1px solid #d0d7de; padding: 4px 8px; text-align: right; white-space: nowrap; }
 th:first-child, td:first-child { text-align: left; }
 .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 8px; }
 .chart { height: 260px; }
</style></head>
<body>
<header><h2>Comparison</h2><span>@ABOUT@</span><span id="state">connecting</span>
<label>Tenant <select id="tenant"><option value="all">all tenants</option></select></label>
<a href="/">back to Locust</a></header>
<table id="comparison-table"><thead><tr><th>Mode</th><th>Done / scheduled</th><th>OK</th><th>Errors</th>
<th>TTFT p50</th><th>TTFT p90</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th><th>ITL p50</th>
<th>ITL p99</th><th>E2E p50</th><th>E2E p99</th><th>Output tok/s</th><th>Goodput req/s</th><th>Within SLOs</th>
<th>Tokens/step</th><th>Server acceptance</th></tr></thead><tbody></tbody></table>
<p style="font-size: 12px; color: #57606a">Table: every request since the mode's first, latencies in ms.
Charts: once a second, the requests whose records reached disk in the last <span id="window">10</span> s.</p>
<div class="grid">@CHARTS@</div>
<script>
const KEYS = [@KEYS@];
const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
let since = 0, attempt = -1, series = {}, view = null;
const n = (v, d = 1) => v === null || v === undefined ? "-" : Number(v).toLocaleString(undefined,
  {minimumFractionDigits: d, maximumFractionDigits: d});
function add(points) {
  for (const p of points) {
    since = p.seq;
    for (const [mode, tenants] of Object.entries(p.modes)) {
      for (const [tenant, row] of Object.entries(tenants)) {
        const s = ((series[mode] ??= {})[tenant] ??= {t: []});
        s.t.push(new Date(p.t * 1000));
        for (const k of KEYS) (s[k] ??= []).push(row[k] ?? null);
      }
    }
  }
}
function table(v, tenant) {
  const body = document.querySelector("#comparison-table tbody");
  body.innerHTML = "";
  for (const mode of v.modes) {
    const r = (v.table[mode] || {})[tenant], all = (v.table[mode] || {}).all || {}, tr = document.createElement("tr");
    tr.dataset.mode = mode;
    const errors = n(r ? r.errors : 0, 0) + (r && r.client ? ` +${n(r.client, 0)} client` : "");
    const cells = r ? [mode, `${n(all.done, 0)} / ${n(all.total, 0)}`, n(r.ok, 0), errors,
      n(r.ttft_p50), n(r.ttft_p90), n(r.ttft_p99), n(r.tpot_p50), n(r.tpot_p99), n(r.itl_p50), n(r.itl_p99),
      n(r.e2e_p50), n(r.e2e_p99), n(r.output_tok_s), n(r.goodput, 2),
      r.good_share === null ? "-" : n(100 * r.good_share) + "%", n(r.tokens_per_step, 2), n(all.acceptance, 3)]
      : [mode, "waiting"];
    for (const c of cells) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); }
    body.appendChild(tr);
  }
}
function charts(v, tenant) {
  for (const k of KEYS) {
    const el = document.getElementById("chart-" + k), traces = [];
    v.modes.forEach((mode, i) => {
      const s = (series[mode] || {})[k === "acceptance" ? "all" : tenant];
      if (s) traces.push({x: s.t, y: s[k], name: mode, mode: "lines", line: {color: COLOURS[i % COLOURS.length]}});
    });
    Plotly.react(el, traces, {title: {text: el.dataset.title, font: {size: 14}}, margin: {t: 36, r: 8, b: 52, l: 56},
      showlegend: true, legend: {orientation: "h"}, xaxis: {type: "date"}, datarevision: since},
      {displayModeBar: false});   // datarevision: the arrays grow in place, so Plotly must be told they changed
  }
}
async function poll() {
  try {
    const r = await fetch("/comparison/data?since=" + since, {cache: "no-store"});
    const v = await r.json();
    if (v.attempt !== undefined && v.attempt !== attempt) { attempt = v.attempt; since = 0; series = {}; }
    view = v;
    add(v.points || []);
    const sel = document.getElementById("tenant");
    for (const t of v.tenants || []) if (![...sel.options].some(o => o.value === t)) sel.add(new Option(t, t));
    document.getElementById("state").textContent = `${v.state}: ${v.message}` + (v.run_id ? ` (run ${v.run_id})` : "")
      + (v.report ? ` report: ${v.report}` : "");
    if (v.window_s) document.getElementById("window").textContent = v.window_s;
    if (v.modes) { table(v, sel.value); charts(v, sel.value); }
  } catch (e) { document.getElementById("state").textContent = "not answering: " + e; }
  setTimeout(poll, 1000);
}
document.getElementById("tenant").addEventListener("change", (e) => { if (view) { table(view, e.target.value);
  charts(view, e.target.value); } });
poll();
</script></body></html>
"""
