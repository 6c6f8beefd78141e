"""One web UI session (`loadtest ui`), after its inputs are checked and the web UI is up: wait
for the form's Start, replay every chosen mode side by side as `loadtest run --mode-order
parallel` does (the trace, the run folder, one headless LocustProcess per mode, the same records,
manifest, summary, report and gate) while the board serves the live comparison back, let the
UI's Stop stop the replays as a first Ctrl-C does, then keep the UI up until Ctrl-C. What it
shows goes through the command's views (`WebViews`), so nothing here imports the commands."""

from __future__ import annotations

import errno
import queue
import shutil
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from cluster import FleetError
from common import exits
from common.exits import print_error
from common.login import bind_error
from contract.manifest import Manifest
from loadtest.engine.conclude import Concluded, conclude
from loadtest.engine.events import CannotObserve
from loadtest.engine.guard import STOPPED, ended
from loadtest.engine.inputs import OutError, prepare_trace
from loadtest.engine.pipeline import Run, open_run, replay
from loadtest.engine.replays import OneReplay
from loadtest.engine.signals import Signals
from loadtest.live.board import Board
from loadtest.live.watch import observers
from loadtest.options.replaying import UIOptions, with_values
from loadtest.replay import protocol
from loadtest.replay.front_process import ALREADY_REPLAYED, LOG, STDOUT, FrontProcess
from scenarios import ScenarioError
from scenarios.spec import builtin_names

PROG = "loadtest ui"


def listen_problem(host: str, port: int) -> str | None:
    """Why the web UI could not listen on host:port (None if it can)."""
    exc = bind_error(host, port)
    if exc is None:
        return None
    if exc.errno == errno.EADDRINUSE:
        return f"{host}:{port} is in use; pick another --web-port"
    return f"cannot listen on {host}:{port} ({exc.strerror or exc}); check --web-host"


@dataclass(frozen=True)
class WebViews:
    """How the command shows a run: its first lines, and once concluded its tables and gate."""

    start: Callable[[Console, Run, str], None]
    concluded: Callable[[Console, str, Path, Concluded, bool], None]


class WebSession:
    """One web UI session: wait for Start, replay, then keep the UI up until Ctrl-C."""

    def __init__(self, args: UIOptions, console: Console, board: Board, front: FrontProcess,
                 logs: Path, views: WebViews) -> None:
        self.args, self.console, self.board, self.front, self.logs = args, console, board, front, logs
        self.views = views
        self.code: int | None = None
        self.run_dir: Path | None = None
        self.manifest: Manifest | None = None
        self.signals: Signals | None = None
        self.stop_asked = False          # Stop pressed (maybe before the replays had their signal handlers)
        self.lock = threading.Lock()     # between the two: the Stop watcher's thread and the replay's

    def _next(self) -> protocol.StartAsked | protocol.StopAsked | str | None:
        """The web UI's next line ("quit" on Ctrl-C or SIGTERM here, None when its process is gone).
        While it waits, a signal only sets a flag: a KeyboardInterrupt raised inside the queue's
        wait could leave the queue's lock held, and the front process's reader, putting its next
        line, would then block the exit for ever."""
        asked: list[int] = []
        old = {sig: signal.signal(sig, lambda signum, frame: asked.append(signum))
               for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while not asked:
                try:
                    return self.front.asked.get(timeout=0.2)
                except queue.Empty:
                    continue
            return "quit"
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def go(self) -> int:
        while True:
            msg = self._next()
            if msg == "quit" or msg is None:
                if msg is None:
                    print_error(PROG, f"the web UI's Locust process exited; see {self.logs / LOG}")
                return self._quit(msg is None)
            if not isinstance(msg, protocol.StartAsked):
                continue
            if self.code is not None:   # the form refuses a second Start; this is any other way in
                self.board.refuse(ALREADY_REPLAYED)
                continue
            try:
                self._start(msg)
            except KeyboardInterrupt:   # Ctrl-C or SIGTERM as the trace was built or the summary written
                if self.manifest is not None and self.run_dir is not None:
                    ended(self.manifest, self.run_dir, "interrupted", STOPPED)
                self.code = exits.INTERRUPTED
                return self.code

    def _start(self, ask: protocol.StartAsked) -> None:
        given = self.args.trace
        trace_file = given.trace if ask.scenario == given.trace else None   # the --trace given here
        a = with_values(self.args, scenario=ask.scenario, trace=trace_file, modes=",".join(ask.modes),
                        rate_scale=ask.rate_scale)
        self.board.starting(f"building the trace of {ask.scenario}")
        watch = observers(a, self.console, self.board)
        try:
            if ask.scenario not in (*builtin_names(), given.scenario, given.trace):
                raise ScenarioError(f"scenario: {ask.scenario!r} is not a built-in scenario "
                                    f"({', '.join(builtin_names())}); a scenario or trace file is given to "
                                    "loadtest ui as --scenario or --trace")
            trace = prepare_trace(a.trace, a.gate.slo_gate)
            run = open_run(a, trace, watch, trace.info["name"], trace.table.num_rows)
        except (FleetError, ScenarioError, OutError, CannotObserve) as exc:
            self.board.end("failed", str(exc))
            self.console.print(f"[red]Start refused: {exc}[/red]", soft_wrap=True)
            return
        self.run_dir, self.manifest = run.run_dir, run.manifest
        modes = run.choice.modes
        self.views.start(self.console, run, f"[bold]{run.manifest.run_id}[/bold]: {trace.table.num_rows} requests of "
                         f"{trace.info['name']} over {trace.table['offset_s'][-1].as_py():.1f} s, modes "
                         f"{', '.join(modes)} side by side, fleet {run.choice.info['name']} (started from the web UI)")

        def hand_signals(signals: Signals) -> None:
            with self.lock:
                self.signals, asked = signals, self.stop_asked
            if asked:
                signals.ask_stop()

        watcher = _StopWatcher(self)
        watcher.start()
        try:
            replayed = replay(run, OneReplay(), watch, on_signals=hand_signals)
        finally:
            watcher.stop()
        if not replayed.ran:   # /metrics could not listen after all: nothing ran
            self.board.end("failed", "the client's /metrics could not listen (see loadtest ui's output); quit and "
                           "start loadtest ui again")
            self.code = exits.BAD_INPUT
            return
        run.record(mode_order="parallel, started from the web UI (all modes at once, sharing the client machine)")
        concluded = conclude(run, replayed)
        self.views.concluded(self.console, PROG, run.run_dir, concluded, a.gate.slo_gate)
        code = concluded.code
        report = next((p for p in (run.run_dir / "report.html", run.run_dir / "report.md") if p.exists()), None)
        if report is not None:
            self.console.print(f"report: {report}")
        self.board.end("finished", f"{run.manifest.status}: dataset {run.run_dir}/", report)
        self.code = code
        if code == exits.INTERRUPTED and not self.stop_asked:
            self.console.print(f"results: {run.run_dir}/")
            self.front.asked.put("quit")   # Ctrl-C here: quit now, not after another
        else:
            self.console.print(f"results: {run.run_dir}/ (the web UI stays up for its charts: Ctrl-C to quit)")

    def _quit(self, front_gone: bool) -> int:
        if self.code is None:
            self.console.print("nothing was replayed")
            return exits.INCOMPLETE if front_gone else exits.OK
        return self.code

    def keep_logs(self) -> None:
        """The web UI's log and output, into the run's logs/ (when a run was made)."""
        if self.run_dir is not None:
            for name in (LOG, STDOUT):
                if (self.logs / name).exists():
                    shutil.copyfile(self.logs / name, self.run_dir / "logs" / name)


class _StopWatcher:
    """While a run replays: the web UI's Stop stops it as a first Ctrl-C would."""

    def __init__(self, session: WebSession) -> None:
        self.session, self.done = session, threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True, name="loadtest-ui-stop")

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()

    def _stop(self) -> None:
        s = self.session
        with s.lock:
            s.stop_asked, signals = True, s.signals
        if signals is not None:
            signals.ask_stop()

    def _watch(self) -> None:
        s = self.session
        while not self.done.is_set():
            try:
                msg = s.front.asked.get(timeout=0.2)
            except queue.Empty:
                continue
            if isinstance(msg, protocol.StopAsked):
                self._stop()
            elif msg is None:   # the web UI's process is gone: stop, and the main loop sees it once the run ends
                s.front.asked.put(None)
                self._stop()
                return
