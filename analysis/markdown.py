"""report.md: the run's answer as Markdown tables, for tickets and pull requests. A view of the
long summary (analysis.long_summary) and the SLO attainment; nothing here computes a statistic."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from analysis.cost import cost_rows, measured, xid_findings
from analysis.long_summary import ALL, LATENCIES, SummaryView
from analysis.repeats import WIDER, Repeats
from analysis.slo import SLO_TOO_FEW_RULE, UNJUDGED, Attainment
from analysis.stats import PERCENTILES, Ratio
from analysis.summary import TOO_FEW, rate_cell, too_few_rule
from analysis.tokens import check_rows, check_text
from common.times import ms_text


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def _ratio(r: Ratio | None) -> str:
    if r is None:
        return "-"
    if not r.significant:
        return r.text()
    return f"**{r.value:.2f}x** [{r.low:.2f}, {r.high:.2f}]"


def _table(header: list[str], rows: list[list[str]]) -> str:
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _acceptance(v: SummaryView, by_position: str, source: str, title: str) -> list[str]:
    """One source's acceptance per mode: rate, mean length and per draft position (none: nothing)."""
    positions = sorted({k[3] for k in v.cells if k[2] == by_position}, key=lambda s: int(s[3:]))
    if not positions:
        return []
    rows = [[m, _num(v.get(m, "acceptance_rate", source), ".0%"), _num(v.get(m, "mean_acceptance_length", source)),
             *[_num(v.get(m, by_position, p), ".0%") for p in positions]]
            for m in v.modes if v.get(m, "acceptance_rate", source) is not None]
    return [f"## Acceptance ({title})", "", _table(["mode", "rate", "mean length", *positions], rows), ""]


def _ms(v: SummaryView, mode: str, metric: str, stat: str) -> str:
    """A latency as the tables print it, marked when too few requests support it."""
    return ms_text(v.get(mode, metric, stat)) + (TOO_FEW if v.too_few(mode, metric, stat) else "")


def report_markdown(run_id: str, about: str, summary: pa.Table, slos: list[Attainment] | None,
                    notes: list[str], counted: str | None = None) -> str:
    """The run's report.md; `counted`: how its plan's prompt lengths were counted (analysis.tokens.counted_by)."""
    v = SummaryView(summary)
    out = [f"# {run_id}", "", about, ""]
    rows = []
    for m in v.modes:
        ok = v.get(m, "requests", "ok")
        failed = v.get(m, "requests", "failed") or 0      # contract.records.outcomes, as the gate counts
        client = v.get(m, "requests", "client") or 0
        errors = f"{int(failed):,}" + (f" (+{int(client):,} client)" if client else "")
        good = v.get(m, "goodput_req_per_s", "rate")
        share = v.get(m, "goodput_share", "share")
        rows.append([m, rate_cell(_num(v.get(m, "req_per_s", "rate")), v, m, "req_per_s"),
                     rate_cell(_num(v.get(m, "out_tok_per_s", "rate"), ",.0f"), v, m, "out_tok_per_s"),
                     "-" if share is None else f"{rate_cell(_num(good), v, m, 'goodput_req_per_s')} ({share:.0%})",
                     f"{_ms(v, m, 'ttft_ms', 'p50')} / {_ms(v, m, 'ttft_ms', 'p99')}",
                     f"{_ms(v, m, 'tpot_ms', 'p50')} / {_ms(v, m, 'tpot_ms', 'p99')}",
                     _ms(v, m, "e2e_ms", "p99"), _ratio(v.ratio(m, "speedup_e2e")),
                     _num(v.get(m, "acceptance_rate", "server"), ".0%"), _num(v.get(m, "tokens_per_step", "mean")),
                     _num(v.get(m, "in_flight", "peak"), ",.0f"), _num(v.get(m, "offered_req_per_s", "trace")),
                     f"{int(ok or 0):,}", errors, f"{int(v.get(m, 'requests', 'not_sent') or 0):,}"])
    out += ["## Modes", "", _table(["mode", "done req/s", "out tok/s", "goodput req/s (share)", "TTFT p50 / p99",
                                    "TPOT p50 / p99", "E2E p99", "speedup E2E (95% CI)", "acceptance (server)",
                                    "tokens/step (client)", "peak in flight", "offered req/s", "ok", "errors",
                                    "not sent"], rows), ""]
    out += ["Latencies in ms, from the send. Speedup: geometric mean over requests of the baseline's latency "
            "over the mode's, paired by request, with a paired bootstrap 95% interval; *n.s.*: the interval "
            "holds 1.0 (no significant difference). Tokens/step: completion tokens after the first chunk over "
            "the chunks after the first (the client's view of the mean acceptance length). Peak in flight: the "
            "most requests between send and last token at once. Offered: the trace's arrival rate; done req/s, out "
            "tok/s and goodput over the mode's steady window (from the first arrival plus the E2E p99 to the last "
            "arrival). Errors: errors and timeouts the server is answerable for, as `--max-errors` counts them; "
            "*+N client*: ends the client caused (stopped in flight, cut by `--deadline`, a lost worker), which "
            "are not. "
            f"{too_few_rule()}; `summary.parquet` holds every percentile's interval (`ci_low`, `ci_high`, NaN "
            "where the data cannot bound it) and its `count`.", ""]
    spec_modes = [m for m in v.modes if any(v.ratio(m, "speedup_e2e", t) for t in v.tenants)]
    if spec_modes and v.tenants:
        for metric, title in (("speedup_e2e", "E2E"), ("speedup_ttft", "TTFT"), ("speedup_tpot", "TPOT")):
            rows = [[t, *[_ratio(v.ratio(m, metric, t)) for m in spec_modes]] for t in v.tenants]
            rows.append(["**all**", *[_ratio(v.ratio(m, metric)) for m in spec_modes]])
            out += [f"## Speedup over the baseline by tenant: {title}", "", _table(["tenant", *spec_modes], rows), ""]
        rows = [[t, *[_num(v.get(m, "tokens_per_step", "mean", t)) for m in v.modes]] for t in v.tenants]
        out += ["## Tokens per step by tenant (client)", "", _table(["tenant", *v.modes], rows), ""]
        told = [m for m in v.modes if v.get(m, "mean_acceptance_length", "requests") is not None]
        if told:
            rows = [[t, *[f"{_num(v.get(m, 'mean_acceptance_length', 'requests', t))} "
                          f"({_num(v.get(m, 'acceptance_rate', 'requests', t), '.0%')})" for m in told]]
                    for t in [*v.tenants, ALL]]
            out += ["## Acceptance by tenant (server, per request)", "",
                    "Mean acceptance length (draft acceptance rate), from each response's own "
                    "`metrics.speculative_decoding` summed over the tenant's requests: the server's count, "
                    "which the client's tokens per step can only estimate.", "",
                    _table(["tenant", *told], rows), ""]
    if slos:
        cells = {(a.tenant, a.mode): a for a in slos}
        shown = [m for m in v.modes if any(a.mode == m for a in slos)]
        rows = []
        for t in sorted({a.tenant for a in slos}):
            line = [t]
            for m in shown:
                a = cells.get((t, m))
                line.append("-" if a is None else f"not judged{TOO_FEW} ({a.share:.0%} within)"
                            if a.verdict == UNJUDGED else f"met ({a.share:.0%})" if a.passed
                            else f"**missed** ({a.share:.0%}): " + "; ".join(a.missed()))
            rows.append(line)
        unjudged = [f"{a.mode} {a.tenant}: {'; '.join(a.unjudged())}" for a in slos if a.verdict == UNJUDGED]
        out += ["## SLOs by tenant", "", "Requests within every target of their tenant, and whether the tenant's "
                "p99s met the targets.", "", _table(["tenant", *shown], rows), "",
                *([f"{TOO_FEW} {SLO_TOO_FEW_RULE}: " + "; ".join(unjudged) + ".", ""] if unjudged else [])]
    elif slos is None:
        out += ["## SLOs", "", "This trace sets no SLO targets: no goodput or attainment.", ""]
    metrics = [*LATENCIES, "itl_chunk_ms", "itl_token_ms", "lateness_ms"]
    stats = [f"p{p}" for p in PERCENTILES] + ["max"]
    out += ["## Latency percentiles (ms)", "",
            "`_sched`: from the scheduled time (a late send counts); `itl_chunk`: gaps between text chunks "
            "(what a user sees); `itl_token`: each gap over the tokens its chunk carried.", ""]
    for m in v.modes:
        rows = [[metric.removesuffix("_ms"), f"{int(v.get(m, metric, 'count') or 0):,}",
                 *[ms_text(v.get(m, metric, s)) if s == "max" else _ms(v, m, metric, s) for s in stats]]
                for metric in metrics]
        out += [f"### {m}", "", _table(["metric", "n", *stats], rows), ""]
    out += _acceptance(v, "acceptance_at_position", "server", "server, from /metrics counter increases")
    out += _acceptance(v, "request_acceptance_at_position", "requests",
                       "server, per request: each response's metrics.speculative_decoding")
    held = [m for m in v.modes if v.get(m, "kv_capacity_tokens", "startup") is not None
            or v.get(m, "weights_gb_per_gpu", "startup") is not None]
    if held:
        base = v.get(v.modes[0], "kv_capacity_tokens", "startup") if "baseline" not in held else \
            v.get("baseline", "kv_capacity_tokens", "startup")
        rows = []
        for m in held:
            tokens = v.get(m, "kv_capacity_tokens", "startup")
            rows.append([m, _num(v.get(m, "weights_gb_per_gpu", "startup")),
                         _num(v.get(m, "proposer_weights_gb_per_gpu", "startup")),
                         _num(v.get(m, "kv_cache_gb_per_gpu", "startup")),
                         "-" if tokens is None else f"{int(tokens):,}",
                         "-" if tokens is None or not base else f"{tokens / base:.0%}"])
        out += ["## Memory (per GPU, as each mode's first replica reported it at start-up)", "",
                "From the simulator's `/sim/info`, or vLLM's start-up log and `vllm:cache_config_info`; "
                "`-`: the server did not say. KV capacity against the baseline's: what speculation's "
                "weights (and a draft model's own KV) cost in tokens the cache can hold.", "",
                _table(["mode", "weights GB", "of which proposer GB", "KV cache GB", "KV capacity (tokens)",
                        "KV capacity vs baseline"], rows), ""]
    categories = sorted({s for (_, _, metric, s) in v.cells if metric == "category_requests"})
    if categories:
        told = [m for m in v.modes if any(v.get(m, "category_requests", c) for c in categories)]

        def cell(m: str, c: str, metric: str, fmt: str) -> str:
            value = v.get(m, metric, c)
            if value is None:
                return "-"
            low, high = v.interval(m, metric, c)
            shown = format(value, fmt) + (f" [{format(low, fmt)}, {format(high, fmt)}]" if low is not None
                                          and high is not None and not math.isnan(low) else "")
            n = v.get(m, "category_requests" if metric != "category_speedup_e2e" else "category_pairs", c)
            return f"{shown} (n={int(n or 0):,})"
        out += ["## Acceptance by category", "",
                "Per mode and prompt category (the trace's `category`: a corpus item's, or the domain of the "
                "project's own text): the mean acceptance length, 1 + accepted drafts over the steps that verified "
                "drafts, from each response's own counts, with its 95% interval (each request a cluster; none from "
                "under 8 requests) and the requests it is of; then the paired E2E speedup over the baseline.", "",
                _table(["category", *told], [[c, *[cell(m, c, "category_acceptance_length", ".2f") for m in told]]
                                             for c in categories]), ""]
        spec = [m for m in told if m != "baseline"]
        if spec and any(v.get(m, "category_speedup_e2e", c) for m in spec for c in categories):
            out += ["### E2E speedup over the baseline by category", "",
                    _table(["category", *spec], [[c, *[cell(m, c, "category_speedup_e2e", ".2f") for m in spec]]
                                                 for c in categories]), ""]
    header, rows = check_rows(v)
    if rows:
        out += ["## Token counts: the plan against the server", "", check_text(counted), "", _table(header, rows), ""]
    if measured(v):
        header, rows = cost_rows(v)
        out += ["## What each mode costs: energy, power and GPU memory", "",
                "Per mode over the same window as its output tokens per second (its steady window, else its "
                "makespan, said beside the figure): the energy its GPUs used (each GPU's energy counter, or its "
                "power integrated where it has none) over the output tokens completed in it, with a 95% interval "
                "from five slices of a steady window; power per GPU (mean from the energy, peak the highest "
                "sample) and utilisation over the window; memory used and left over the whole replay (vLLM "
                "takes `gpu_memory_utilization` of each GPU at start, so a proposer's weights show as KV "
                "capacity above, not as more memory used); every sample is in `gpu_metrics/`. "
                "`not measured`: the GPUs were not read (the manifest's `gpu_metrics` says why).", "",
                _table(header, rows), "", *[f"- **{line}**" for line in xid_findings(v)],
                *([""] if xid_findings(v) else [])]
    if notes:
        out += ["## Notes", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(out)


def runs_markdown(summary: pa.Table) -> str:
    """Several runs' long summaries (concatenated) as one table: every run and mode side by side."""
    rows = []
    for run_id in dict.fromkeys(summary["run_id"].to_pylist()):
        v = SummaryView(summary.filter(pc.equal(summary["run_id"], run_id)))
        for m in v.modes:
            good = v.get(m, "goodput_req_per_s", "rate")
            rows.append([run_id, m, _num(v.get(m, "req_per_s", "rate")), _ms(v, m, "ttft_ms", "p99"),
                         _ms(v, m, "tpot_ms", "p99"), _ms(v, m, "e2e_ms", "p99"),
                         _ratio(v.ratio(m, "speedup_e2e")), _num(good), f"{int(v.get(m, 'requests', 'ok') or 0):,}"])
    return "\n".join(["# Runs side by side", "",
                      "Latencies in ms, from the send; rates over each mode's steady window (`-`: too short for "
                      "one); speedup over the run's own baseline, paired by request, with its 95% interval. "
                      f"{too_few_rule()}.", "",
                      _table(["run", "mode", "done req/s", "TTFT p99", "TPOT p99", "E2E p99", "speedup E2E (95% CI)",
                              "goodput req/s", "ok"], rows), ""])


def repeats_markdown(repeats: Repeats) -> str:
    """The runs as one experiment (analysis.repeats): the spread of each figure between runs of the
    same trace, and each mode's verdict on its speedup; or the one line saying why there is none."""
    if not repeats.same_trace:
        return "\n".join(["## Between runs", "", f"No between-run spread is computed: {repeats.why}.", ""])
    rows = [[s.mode, *[f"**{c}**" if c == WIDER else c for c in s.cells(repeats.run_ids)]] for s in repeats.spreads]
    out = ["## Between runs: repeats of one trace", "",
           f"{len(repeats.run_ids)} runs replayed the same trace (the same requests on the same schedule): "
           f"{', '.join(repeats.run_ids)}.", ""]
    out += [f"- {line}" for line in repeats.verdicts()] + ([""] if repeats.verdicts() else [])
    if repeats.unfinished:
        out += [f"Not completed, so of fewer requests: {', '.join(repeats.unfinished)}.", ""]
    out += [_table(repeats.columns(), rows), "", repeats.rule()[0].upper() + repeats.rule()[1:] + ".", ""]
    return "\n".join(out)
