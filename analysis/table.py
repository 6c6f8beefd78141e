"""The per-mode comparison table, as printed at the end of `loadtest run`."""

from __future__ import annotations

import math

from rich.table import Table

from analysis.cost import cost_rows
from analysis.long_summary import SummaryView
from analysis.repeats import NOT_JUDGED, WIDER, Repeats
from analysis.slo import SLO_TOO_FEW_RULE, UNJUDGED, Attainment
from analysis.stats import MIN_BOOTSTRAP_PAIRS, Ratio
from analysis.steady import STEADY_SPAN_OVER_E2E_P99
from analysis.summary import TOO_FEW, ms_cell, rate_cell
from analysis.tokens import check_rows
from contract.records import CLIENT, FAILED, NOT_SENT, OK


def ratio_cell(r: Ratio | None) -> str:
    """A speedup with its 95% interval, green or red only when the interval excludes 1.0."""
    if r is None:
        return "-"
    if r.too_few:
        return f"[dim]{r.value:.2f}x too few[/dim]"
    if not r.significant:
        return f"[dim]{r.value:.2f}x n.s.[/dim]"
    colour = "green" if r.low > 1.0 else "red"
    return f"[{colour}]{r.value:.2f}x[/{colour}] [{r.low:.2f}-{r.high:.2f}]"


def tenant_table(speedups: dict[str, dict[str, Ratio]], modes: list[str]) -> Table:
    """Speedup over the baseline per tenant (rows) and mode (columns): where each mode wins and loses."""
    shown = [m for m in modes if any(m in row for row in speedups.values())]
    t = Table("tenant", *shown, title="speedup over baseline by tenant (paired E2E, 95% CI)", header_style="bold")
    for tenant, row in speedups.items():
        t.add_row(tenant, *[ratio_cell(row.get(m)) for m in shown])
    t.caption = ("n.s. = no significant difference (the interval holds 1.0); too few = under "
                 f"{MIN_BOOTSTRAP_PAIRS} paired requests, too few for an interval")
    return t


def repeats_table(repeats: Repeats) -> Table:
    """Runs of the same trace as one experiment (analysis.repeats): per mode and figure, each run's
    estimate and the spread between the runs, the spread marked where it is wider than one run's
    interval."""
    t = Table(title=f"{len(repeats.run_ids)} runs of one trace: the spread between them", header_style="bold")
    for name in repeats.columns():
        t.add_column(name, justify="left" if name in ("mode", "figure") else "right", no_wrap=True)
    colour = {WIDER: "yellow bold", NOT_JUDGED: "dim"}
    for s in repeats.spreads:
        cells = s.cells(repeats.run_ids)
        judged = cells[-1]
        if judged in colour:
            cells[-1] = f"[{colour[judged]}]{judged}[/{colour[judged]}]"
        t.add_row(s.mode, *cells)
    t.caption = repeats.rule()
    return t


def slo_table(rows: list[Attainment], modes: list[str]) -> Table:
    """Per tenant (rows) and mode (columns): the share of requests within every target, and
    whether the tenant's p99s met them (which missed, when not), marked where too few requests
    judge it (analysis.slo)."""
    shown = [m for m in modes if any(a.mode == m for a in rows)]
    t = Table("tenant", *shown, title="SLOs by tenant: requests within every target; p99 against target",
              header_style="bold")
    cells = {(a.tenant, a.mode): a for a in rows}
    for tenant in sorted({a.tenant for a in rows}):
        line = []
        for m in shown:
            a = cells.get((tenant, m))
            if a is None:
                line.append("-")
            elif a.verdict == UNJUDGED:   # neither met nor missed: too few requests bound its p99s
                line.append(f"[yellow]not judged[/yellow]{TOO_FEW} ({a.share:.0%} within)")
            elif a.passed:
                line.append(f"[green]met[/green] {a.share:.0%}")
            else:
                line.append(f"[red]missed[/red] {a.share:.0%}: " + ", ".join(x.split(" ")[0] for x in a.missed()))
        t.add_row(tenant, *line)
    if any(a.verdict == UNJUDGED for a in rows):
        t.caption = f"{TOO_FEW} {SLO_TOO_FEW_RULE}"
    return t


def _rate(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:,.2f}" if v < 100 else f"{v:,.0f}"


def _count(n: int) -> str:
    return f"{n:,}" if not n else f"[red]{n:,}[/red]"


def _errors(view: SummaryView, mode: str) -> str:
    """The server's errors and timeouts, and beside them the ends the client caused (not errors)."""
    client = int(view.get(mode, "requests", CLIENT) or 0)
    return _count(int(view.get(mode, "requests", FAILED) or 0)) + (f" [dim]+{client:,} client[/dim]" if client else "")


def _marked_rate(view: SummaryView, mode: str, metric: str) -> str:
    """A rate over the steady window as the table prints it, marked when too few completions support it."""
    return rate_cell(_rate(view.get(mode, metric, "rate")), view, mode, metric)


def mode_table(view: SummaryView, modes: list[str], title: str = "", skipped: dict[str, str] | None = None) -> Table:
    """One row per mode of `modes` replayed, read off the long summary, and one per mode skipped
    (`skipped`: mode -> why; said in full under the table)."""
    t = Table(title=title or None, header_style="bold")
    # The console's few columns (a terminal's width); tokens/s, tokens per chunk, acceptance, peak
    # in flight and lateness are in report.md, with every definition.
    for name in ["mode", "req/s\noffered / done", "TTFT\np50 / p99", "TPOT\np50 / p99", "E2E\np99",
                 "speedup\n95% CI", "goodput\nreq/s", "errors", "not\nsent"]:
        t.add_column(name, justify="left" if name == "mode" else "right", no_wrap=True)
    for mode in modes:
        ratio = view.ratio(mode, "speedup_e2e")
        speed = ratio_cell(ratio) if ratio is not None else "ref" if mode == "baseline" else "-"
        share = view.get(mode, "goodput_share", "share")
        good = "-" if share is None else f"{_marked_rate(view, mode, 'goodput_req_per_s')} ({share:.0%})"
        t.add_row(mode, f"{_rate(view.get(mode, 'offered_req_per_s', 'trace'))} / "
                  f"{_marked_rate(view, mode, 'req_per_s')}",
                  f"{ms_cell(view, mode, 'ttft_ms', 'p50')} / {ms_cell(view, mode, 'ttft_ms', 'p99')}",
                  f"{ms_cell(view, mode, 'tpot_ms', 'p50')} / {ms_cell(view, mode, 'tpot_ms', 'p99')}",
                  ms_cell(view, mode, "e2e_ms", "p99"), speed, good, _errors(view, mode),
                  _count(int(view.get(mode, "requests", NOT_SENT) or 0)))
    for mode in skipped or {}:
        t.add_row(f"[yellow]{mode}[/yellow]", "[yellow]skipped[/yellow]", *["-"] * (len(t.columns) - 2))
    t.caption = ("ms; done and goodput over the steady window; speedup: baseline E2E / mode E2E, paired, 95% CI "
                 f"(n.s.: holds 1.0; too few: under {MIN_BOOTSTRAP_PAIRS} pairs); errors: the server's (+N client: "
                 "ends the client caused); tokens/s, acceptance, lateness and every definition: report.md")
    return t


def steady_state_note(view: SummaryView, modes: list[str], stopped: bool = False) -> str | None:
    """A warning when the sends of a mode of `modes` were too short for a steady state (None when
    they were not); `stopped`: the replay was stopped before its trace ended, which is why."""
    def figure(mode: str, metric: str, stat: str) -> float:
        value = view.get(mode, metric, stat)
        return math.nan if value is None else value

    short = [m for m in modes if view.get(m, "requests", OK) and view.get(m, "steady_window_s", "length") is None
             and figure(m, "sent_span_s", "length") > 0]
    if not short:
        return None
    worst = min(short, key=lambda m: figure(m, "sent_span_s", "length") / figure(m, "e2e_ms", "p99") * 1e3)
    sent_s, e2e_p99_ms = figure(worst, "sent_span_s", "length"), figure(worst, "e2e_ms", "p99")
    why = (f"the replay was stopped after {sent_s:,.1f} s of sending" if stopped else f"sends lasted {sent_s:,.1f} s")
    return (f"too short for a steady state ({', '.join(short)}): {why}, less than "
            f"{STEADY_SPAN_OVER_E2E_P99:g} x the E2E p99 ({e2e_p99_ms / 1e3:,.1f} s in {worst}) the "
            "in-flight count needs to settle, so no throughput is given"
            + ("" if stopped else " (replay more requests: --requests)"))


def cost_table(view: SummaryView) -> Table:
    """What each mode costs (analysis.cost): the same rows report.md shows."""
    header, rows = cost_rows(view)
    t = Table(title="What each mode costs (report.md says how each figure is measured)",
              header_style="bold")
    for h in header:
        t.add_column(h, justify="left" if h in ("mode", "from") else "right")
    for row in rows:
        t.add_row(*row)
    return t


def tokens_table(view: SummaryView, counted: str | None) -> Table | None:
    """The plan's lengths against the server's counts (analysis.tokens), the rows report.md shows;
    None where nothing was checked."""
    header, rows = check_rows(view)
    if not rows:
        return None
    t = Table(title="token counts: the server's usage against the plan (usage / plan - 1)", header_style="bold")
    for h in header:
        t.add_column(h, justify="left" if h in ("tenant", "mode") else "right", no_wrap=True)
    for row in rows:
        t.add_row(*row)
    t.caption = (f"planned prompt lengths: {counted or 'as the trace gave them'}; a chat prompt's count by the server "
                 f"includes its chat template's tokens; {TOO_FEW} too few requests for the figure (report.md)")
    return t
