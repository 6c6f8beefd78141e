"""A replaying command's progress while it runs: one bar per mode, with what was done, sent and
never sent, and the client's live latencies (from the replay's tally, loadtest.request.tally)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from loadtest.replay import protocol
from loadtest.request.tally import TenantTally, added_up


def mode_progress(console: Console) -> Progress:
    """One bar per mode: what was done, sent and never sent, and the mode's own replay time."""
    return Progress(TextColumn("{task.description:>10}"), BarColumn(), TextColumn("{task.fields[counts]}"),
                    TimeElapsedColumn(), TextColumn("{task.fields[live]}"), console=console)


def progress_counts(p: protocol.Progress) -> str:
    """`80/300 done · 88 sent · 212 not sent` (the bar is the done share)."""
    text = f"{p.done:,}/{p.total:,} done · {p.sent:,} sent"
    return text + (f" · {p.not_sent:,} not sent" if p.not_sent else "")


def live_text(tenants: dict[str, TenantTally]) -> str:
    """The replay's tally so far, every tenant's added up: `TTFT p50 80.0 p99 120.0  TPOT p50 12.0
    late p99 0.4 ms` (latencies of the requests that succeeded; - while none has)."""
    total = added_up(tenants)

    def f(metric: str, q: float) -> str:
        v = total.quantile(metric, q)
        return "-" if v is None else f"{v:.1f}"

    return (f"TTFT p50 {f('ttft', 0.5)} p99 {f('ttft', 0.99)}  TPOT p50 {f('tpot', 0.5)}  "
            f"late p99 {f('lateness', 0.99)} ms")
