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
from contextlib import ExitStack, contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, Task, TaskID, TextColumn, TimeElapsedColumn

from contract.records import CLIENT, FAILED, NOT_SENT, OK, outcome_of
from loadtest.engine.events import Began, Observer
from loadtest.replay import protocol
from loadtest.request.exporter import key_of
from loadtest.request.tally import LiveTallies, TenantTally, added_up


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


class ProgressView(Observer):
    """The engine's events on the console: its notices printed, and a bar per mode (the replay's
    counts, and its live latencies from the run's tally) while the modes replay."""

    def __init__(self, console: Console, log_every_s: float) -> None:
        self.console, self.log_every_s = console, log_every_s
        self.stack = ExitStack()
        self.progress: Progress | None = None
        self.tasks: dict[str, TaskID] = {}
        self.live: LiveTallies | None = None

    def say(self, text: str) -> None:
        self.console.print(text, soft_wrap=True, highlight=False)

    def begin(self, began: Began) -> None:
        self.live = began.live
        self.progress = progress = self.stack.enter_context(mode_progress(self.console, self.log_every_s))
        self.tasks = {m: progress.add_task(m, total=began.total, start=False, counts="waiting", live="")
                      for m in began.modes}

    def _update(self, mode: str, **fields: object) -> None:
        if self.progress is not None and mode in self.tasks:
            self.progress.update(self.tasks[mode], **fields)

    def mode_state(self, mode: str, text: str) -> None:
        self._update(mode, counts=text)

    def mode_started(self, mode: str, replicas: list[tuple[str, str]], gpus: list[tuple[str, str]]) -> None:
        if self.progress is not None and mode in self.tasks:
            self.progress.start_task(self.tasks[mode])

    def level(self, mode: str, name: str, total: int) -> None:
        self._update(mode, description=f"{mode} {name}", completed=0, total=total, counts="starting")

    def line(self, mode: str, run_id: str, msg: protocol.Line) -> None:
        if isinstance(msg, protocol.Progress):
            self._update(mode, completed=msg.done, total=msg.total, counts=progress_counts(msg))
        elif isinstance(msg, protocol.Observed) and self.live is not None:   # added up into the tally already
            self._update(mode, live=live_text(self.live.of(key_of(run_id, mode))))

    def stopped(self, mode: str, reason: str) -> None:
        if self.progress is not None and mode in self.tasks:
            counts = self.progress.tasks[self.tasks[mode]].fields.get("counts", "")
            self._update(mode, counts=f"[yellow]{reason}[/yellow]: {counts}")

    def mode_ended(self, mode: str) -> None:
        if self.progress is not None and mode in self.tasks:
            self.progress.stop_task(self.tasks[mode])

    def finish(self) -> None:
        self.stack.close()
        self.progress = None

    def close(self) -> None:
        self.finish()
