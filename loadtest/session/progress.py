"""A replaying command's progress while it runs: one bar per mode, with what was done, sent and
never sent, and the client's live latencies."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from loadtest.replay import protocol


def mode_progress(console: Console) -> Progress:
    """One bar per mode: what was done, sent and never sent, and the mode's own replay time."""
    return Progress(TextColumn("{task.description:>10}"), BarColumn(), TextColumn("{task.fields[counts]}"),
                    TimeElapsedColumn(), TextColumn("{task.fields[live]}"), console=console)


def progress_counts(p: protocol.Progress) -> str:
    """`80/300 done · 88 sent · 212 not sent` (the bar is the done share)."""
    text = f"{p.done:,}/{p.total:,} done · {p.sent:,} sent"
    return text + (f" · {p.not_sent:,} not sent" if p.not_sent else "")


def live_text(live: protocol.Live) -> str:
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    return (f"TTFT p50 {f(live.ttft_p50)} p99 {f(live.ttft_p99)}  TPOT p50 {f(live.tpot_p50)}  "
            f"late p99 {f(live.late_p99)} ms")
