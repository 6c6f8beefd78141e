"""A replaying command's progress while it runs: one bar per mode, with what was done, sent and
never sent, and the client's live latencies (from the replay's tally, loadtest.request.tally).
Without a terminal (a log file, CI, nohup, a scheduled job) the bars are drawn only at the end, so
a line per running mode goes to the output every `--progress-every` seconds instead, as Locust's
headless statistics lines do."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, Task, TextColumn, TimeElapsedColumn

from contract.records import CLIENT, FAILED, NOT_SENT, OK, outcome_of
from loadtest.replay import protocol
from loadtest.request.tally import TenantTally, added_up


@contextmanager
def mode_progress(console: Console, log_every_s: float) -> Iterator[Progress]:
    """One bar per mode: what was done, sent and never sent, and the mode's own replay time; on a
    console that is not a terminal, also a line per running mode every `log_every_s` seconds."""
    progress = Progress(TextColumn("{task.description:>10}"), BarColumn(), TextColumn("{task.fields[counts]}"),
                        TimeElapsedColumn(), TextColumn("{task.fields[live]}"), console=console)
    with progress:
        if console.is_terminal:
            yield progress
            return
        stop = threading.Event()
        thread = threading.Thread(target=_log_lines, args=(progress, console, log_every_s, stop), daemon=True,
                                  name="loadtest-progress-log")
        thread.start()
        try:
            yield progress
        finally:
            stop.set()
            thread.join(timeout=5)


def _log_lines(progress: Progress, console: Console, every_s: float, stop: threading.Event) -> None:
    while not stop.wait(every_s):
        for task in list(progress.tasks):
            if task.started and not task.finished and task.stop_time is None:
                console.print(log_line(task), soft_wrap=True, highlight=False)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def log_line(task: Task) -> str:
    """`10:31:05 baseline: 80/300 done · 88 sent · TTFT p50 … ms · 0m41s in, ETA 1m52s`: ETA from
    the done rate so far (rich's estimate), - before it has one."""
    live = task.fields.get("live") or ""
    return (f"{time.strftime('%H:%M:%S')} {task.description}: {task.fields.get('counts', '')}"
            + (f" · {live}" if live else "") + f" · {_duration(task.elapsed)} in, ETA {_duration(task.time_remaining)}")


def progress_counts(p: protocol.Progress) -> str:
    """`80/300 done · 88 sent · 212 not sent` (the bar is the done share)."""
    text = f"{p.done:,}/{p.total:,} done · {p.sent:,} sent"
    return text + (f" · {p.not_sent:,} not sent" if p.not_sent else "")


# How the bar names the outcomes of the requests that ended (contract.records.OUTCOMES).
ENDED_AS = {OK: "ok", FAILED: "failed", CLIENT: "stopped by the client"}


def ended_text(total: TenantTally) -> str:
    """What the ended requests were, by outcome, the table's way (`146 ok · 1 stopped by the
    client`), when any was not ok; empty while every one was (the bar's `done` says it all)."""
    ended = Counter()
    for (status, kind), n in total.requests.items():
        if status != NOT_SENT:
            ended[outcome_of(status, kind or None)] += n
    if set(ended) <= {OK}:
        return ""
    return " · ".join(f"{ended[o]:,} {words}" for o, words in ENDED_AS.items() if ended[o])


def live_text(tenants: dict[str, TenantTally]) -> str:
    """The replay's tally so far, every tenant's added up: `TTFT p50 80.0 p99 120.0  TPOT p50 12.0
    late p99 0.4 ms` (latencies of the requests that succeeded; - while none has), after what the
    ended requests were when any was not ok (`146 ok · 1 stopped by the client`)."""
    total = added_up(tenants)
    ended = ended_text(total)

    def f(metric: str, q: float) -> str:
        v = total.quantile(metric, q)
        return "-" if v is None else f"{v:.1f}"

    return ((f"{ended} · " if ended else "") + f"TTFT p50 {f('ttft', 0.5)} p99 {f('ttft', 0.99)}  "
            f"TPOT p50 {f('tpot', 0.5)}  late p99 {f('lateness', 0.99)} ms")
