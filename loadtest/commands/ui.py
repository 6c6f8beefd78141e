"""`loadtest ui`: Locust's web UI once for a run, every chosen mode replaying side by side.

The web UI is its own Locust process (loadtest/replay/front.py), which sends no request. This
command checks what the form does not choose, opens the web UI and the board that serves it the
live comparison, and hands the session to loadtest/live/web.py (wait for Start, replay, keep
the UI up) with its views. The UI stays up after the run for its charts; Ctrl-C here quits, with
the run's exit code (0 before any Start).
"""

from __future__ import annotations

import shutil
import signal
import tempfile
from pathlib import Path

from cluster import FleetError
from common import exits
from common.exits import print_error
from common.login import is_loopback, login_problem
from loadtest.commands.console import new_console
from loadtest.commands.replaying import show_concluded, show_start
from loadtest.engine.inputs import OutError, choose_fleet, prepare_trace
from loadtest.live.board import Board, BoardServer
from loadtest.live.metrics_server import MetricsError, MetricsServer, hostport
from loadtest.live.web import WebSession, WebViews, listen_problem
from loadtest.options.replaying import UIOptions
from loadtest.replay.front_process import FrontProcess
from scenarios import ScenarioError

PROG = "loadtest ui"


def main(args: UIOptions) -> int:
    console = new_console()
    try:  # everything the form does not choose, before the web UI opens
        problem = login_problem(args.web_host, "the web UI") or listen_problem(args.web_host, args.web_port)
        if problem:
            raise FleetError(problem)
        prepare_trace(args.trace, args.gate.slo_gate)   # the form's default builds (the files first, then the servers)
        fleet = choose_fleet(args.fleet, args.client.api_key_env)
        MetricsServer.of(args.metrics).check()
        folder = args.folder
        if folder.run_id and (Path(folder.out) / folder.run_id).exists():
            raise OutError(f"{Path(folder.out) / folder.run_id} already exists; pick another --run-id")
    except (FleetError, ScenarioError, OutError, MetricsError) as exc:
        print_error(PROG, str(exc))
        return exits.BAD_INPUT
    board = Board(fleet.modes)
    logs = Path(tempfile.mkdtemp(prefix="loadtest-ui-"))
    web = f"http://{hostport(args.web_host, args.web_port)}"
    about = f"fleet {fleet.info['name']} (modes {', '.join(fleet.modes)})"
    old_term = signal.signal(signal.SIGTERM, _interrupt)   # SIGTERM while no replay runs: as Ctrl-C
    try:
        with BoardServer(board) as server, FrontProcess(
                args.web_host, args.web_port, fleet.modes, args.trace.trace or args.trace.scenario,
                args.trace.rate_scale, about,
                server.url,
                server.token, logs, login=not is_loopback(args.web_host)) as front:
            console.print(f"Locust web UI: [bold]{web}[/bold] (choose the scenario, modes and rate scale under "
                          f"Custom parameters, then Start; the Comparison page is {web}/comparison; Ctrl-C here "
                          "quits)", soft_wrap=True)
            session = WebSession(args, console, board, front, logs, WebViews(show_start, show_concluded))
            code = session.go()
        session.keep_logs()   # the web UI's process has ended: its logs are whole
        return code
    finally:
        signal.signal(signal.SIGTERM, old_term)
        shutil.rmtree(logs, ignore_errors=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
