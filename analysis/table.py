"""The per-mode comparison table, as printed at the end of `loadtest run`."""

from __future__ import annotations

import math

from rich.table import Table

from analysis.summary import ModeSummary


def _ms(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def tenant_table(speedups: dict[str, dict[str, float]], modes: list[str]) -> Table:
    """Speedup over the baseline per tenant (rows) and mode (columns): where each mode wins and loses."""
    shown = [m for m in modes if any(m in row for row in speedups.values())]
    t = Table("tenant", *shown, title="speedup over baseline by tenant (paired E2E)", header_style="bold")
    for tenant, row in speedups.items():
        cells = []
        for m in shown:
            v = row.get(m)
            cells.append("-" if v is None else f"[green]{v:.2f}x[/green]" if v >= 1.05
                         else f"[red]{v:.2f}x[/red]" if v <= 0.95 else f"{v:.2f}x")
        t.add_row(tenant, *cells)
    return t


def _accept(s: ModeSummary) -> str:
    if s.acceptance_rate is None or s.mean_acceptance_length is None:
        return "-"
    return f"{s.acceptance_rate:.0%} / {s.mean_acceptance_length:.2f}"


def mode_table(summaries: list[ModeSummary], title: str = "") -> Table:
    t = Table(title=title or None, header_style="bold")
    for name, justify in [("mode", "left"), ("req/s", "right"), ("out tok/s", "right"),
                          ("TTFT p50", "right"), ("TTFT p99", "right"), ("TPOT p50", "right"),
                          ("TPOT p99", "right"), ("E2E p99", "right"), ("tok/chunk", "right"),
                          ("accept", "right"), ("speedup", "right"), ("late p50/p99", "right"), ("errors", "right")]:
        t.add_column(name, justify=justify)
    for s in summaries:
        if s.speedup is None:
            speed = "ref" if s.mode == "baseline" else "-"
        else:
            speed = f"{s.speedup:.2f}x"
        bad = s.errors + s.not_sent
        t.add_row(s.mode, f"{s.req_per_s:.2f}", f"{s.out_tok_per_s:,.0f}", _ms(s.ttft_p50_ms), _ms(s.ttft_p99_ms),
                  _ms(s.tpot_p50_ms), _ms(s.tpot_p99_ms), _ms(s.e2e_p99_ms),
                  "-" if math.isnan(s.tokens_per_chunk) else f"{s.tokens_per_chunk:.2f}", _accept(s), speed,
                  f"{_ms(s.lateness_p50_ms)} / {_ms(s.lateness_p99_ms)}", f"{bad}" if not bad else f"[red]{bad}[/red]")
    t.caption = ("latencies in ms; req/s and tok/s from first send to last token; tok/chunk = completion tokens "
                 "(usage) / text chunks; accept = server acceptance rate / mean acceptance length (/metrics); "
                 "speedup = geometric mean over requests of baseline E2E / mode E2E; late = send lateness")
    return t
