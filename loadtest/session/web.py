"""One web UI session (`loadtest ui`), after its inputs are checked and the web UI is up: wait
for the form's Start, replay every chosen mode side by side as `loadtest run --mode-order
parallel` does (the trace, the run folder, one headless LocustProcess per mode, the same records,
manifest, summary, report and gate) while the board serves the live comparison back, let the
UI's Stop stop the replays as a first Ctrl-C does, then keep the UI up until Ctrl-C. What it
shows goes through the command's views (`WebViews`), so nothing here imports the commands."""

from __future__ import annotations

import queue
import shutil
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from analysis.gate import judge_gate
from analysis.run_analysis import RunAnalysis, analyse_run
from cluster import FleetError
from common import exits, files
from common.exits import print_error
from contract.manifest import Manifest
from loadtest.replay import protocol
from loadtest.replay.front_process import ALREADY_REPLAYED, LOG, STDOUT, FrontProcess
from loadtest.session.board import Board
from loadtest.session.engine import OneReplay, Session
from loadtest.session.guard import STOPPED, ended, served
from loadtest.session.inputs import OutError, choose_fleet, new_manifest, new_run_dir, prepare_trace
from loadtest.session.metrics_server import MetricsServer
from loadtest.session.options import UIOptions, with_values
from loadtest.session.signals import Signals
from scenarios import ScenarioError
from scenarios.spec import builtin_names
from scenarios.trace import write_trace

PROG = "loadtest ui"


@dataclass(frozen=True)
class WebViews:
    """How the command shows a finished run: its tables, its gate (returning the exit code), and a
    full disk met while writing its summaries."""

    run: Callable[[Console, RunAnalysis, bool], None]
    gate: Callable[[Console, list[str], list[str]], int]
    not_written: Callable[[str, Path, OSError], None]


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
        try:
            if ask.scenario not in (*builtin_names(), given.scenario, given.trace):
                raise ScenarioError(f"scenario: {ask.scenario!r} is not a built-in scenario "
                                    f"({', '.join(builtin_names())}); a scenario or trace file is given to "
                                    "loadtest ui as --scenario or --trace")
            trace = prepare_trace(a.trace, a.gate.slo_gate)
            fleet = choose_fleet(a.fleet, a.client.api_key_env)
            run_dir = new_run_dir(a.folder.out, a.folder.run_id, trace.info["name"],
                                  trace.table.num_rows * len(fleet.modes))
        except (FleetError, ScenarioError, OutError) as exc:
            self.board.end("failed", str(exc))
            self.console.print(f"[red]Start refused: {exc}[/red]", soft_wrap=True)
            return
        self.run_dir = run_dir
        self.manifest = manifest = new_manifest(run_dir, trace, fleet)
        manifest.write(run_dir)
        write_trace(trace.table, run_dir / "trace.parquet", trace.info["name"], trace.info["sha256"])
        self.console.print(f"[bold]{manifest.run_id}[/bold]: {trace.table.num_rows} requests of {trace.info['name']} "
                           f"over {trace.table['offset_s'][-1].as_py():.1f} s, modes {', '.join(fleet.modes)} side by "
                           f"side, fleet {fleet.info['name']} (started from the web UI)")

        def replay(signals: Signals, server: MetricsServer) -> None:
            run = Session(a, self.console, trace, fleet, run_dir, manifest, signals, server, OneReplay(),
                          on_line=self.board.on_line)
            self.board.begin(manifest.run_id, fleet.modes, trace.table.num_rows, server.live,
                             lambda: run.stage.scraper.latest_sums() if run.stage is not None else {})
            with self.lock:
                self.signals, asked = signals, self.stop_asked
            if asked:
                signals.ask_stop()
            run.replay_all()

        watcher = _StopWatcher(self)
        watcher.start()
        try:
            code = served(a, self.console, manifest, run_dir, replay)
        finally:
            watcher.stop()
        if code is None:   # /metrics could not listen after all: nothing ran
            self.board.end("failed", "the client's /metrics could not listen (see loadtest ui's output); quit and "
                           "start loadtest ui again")
            self.code = exits.BAD_INPUT
            return
        manifest.mode_order = "parallel, started from the web UI (all modes at once, sharing the client machine)"
        try:
            analysed = analyse_run(run_dir, fleet.modes, manifest, a.gate.max_errors)
            self.views.run(self.console, analysed, a.gate.slo_gate)
            checks = analysed.checks
        except files.NotWritten as exc:   # a full disk: the records stay, each summary whole or not at all
            self.views.not_written(PROG, run_dir, exc)
            checks, code = [], exits.INCOMPLETE if code == exits.OK else code
        if code == exits.OK:
            gate = judge_gate(manifest, checks, a.gate.slo_gate)
            code = self.views.gate(self.console, gate.failed, gate.unjudged)
        manifest.write(run_dir)
        report = next((p for p in (run_dir / "report.html", run_dir / "report.md") if p.exists()), None)
        if report is not None:
            self.console.print(f"report: {report}")
        self.board.end("finished", f"{manifest.status}: dataset {run_dir}/", report)
        self.code = code
        if code == exits.INTERRUPTED and not self.stop_asked:
            self.console.print(f"results: {run_dir}/")
            self.front.asked.put("quit")   # Ctrl-C here: quit now, not after another
        else:
            self.console.print(f"results: {run_dir}/ (the web UI stays up for its charts: Ctrl-C to quit)")

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
