"""The web UI's Locust process for `loadtest ui` (front.py): started with an argument list in its
own process group, its Start and Stop lines read into a queue, stopped (SIGTERM, then SIGKILL)
on every path. Locust is never imported here."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from common.process import child_env, die_with_parent, stop_group
from loadtest.replay import protocol
from loadtest.replay.process import read_output

FRONT = Path(__file__).with_name("front.py")
# the front's environment: the board's address and token (never on a command line), the form's modes
BOARD_ENV, TOKEN_ENV, MODES_ENV = "LOADTEST_BOARD_URL", "LOADTEST_BOARD_TOKEN", "LOADTEST_UI_MODES"
TOKEN_HEADER = "X-Loadtest-Token"   # the board answers only requests that carry its token in this header
ALREADY_REPLAYED = ("This session has replayed its run already; its dataset and report are written. Quit "
                    "loadtest ui (Ctrl-C) and start it again for another run.")
LOG, STDOUT = "locust-ui.log", "locust-ui.stdout.txt"   # the front's log and its other output
STOP_WAIT_S = 10.0


@dataclass
class FrontProcess:
    host: str
    port: int
    modes: list[str]            # the form's choices (all chosen at first)
    scenario: str
    rate_scale: float | None
    about: str
    board_url: str
    board_token: str
    logs: Path                  # the front's log and its other output go here
    login: bool = False
    asked: queue.Queue = field(default_factory=queue.Queue)   # StartAsked / StopAsked, as they come
    proc: subprocess.Popen | None = None
    _out: TextIO | None = None
    _reader: threading.Thread | None = None

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "locust", "-f", str(FRONT), "--web-host", self.host, "--web-port",
                str(self.port), "--logfile", str(self.logs / LOG), "--scenario", self.scenario,
                "--rate-scale", "" if self.rate_scale is None else f"{self.rate_scale:g}", "--about", self.about]
        return [*argv, "--login"] if self.login else argv

    def __enter__(self) -> FrontProcess:
        self.logs = self.logs.absolute()   # its working directory and HOME (common.process.child_env)
        env = child_env({BOARD_ENV: self.board_url, TOKEN_ENV: self.board_token, MODES_ENV: json.dumps(self.modes)},
                        home=self.logs)
        self.logs.mkdir(parents=True, exist_ok=True)
        self._out = open(self.logs / STDOUT, "w", buffering=1)
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     bufsize=1, cwd=self.logs, env=env, start_new_session=True,
                                     preexec_fn=die_with_parent)
        self._reader = threading.Thread(target=self._read, daemon=True, name="loadtest-ui-front")
        self._reader.start()
        return self

    def _read(self) -> None:
        read_output(self.proc.stdout, self._out, lambda msg: self.asked.put(msg) if isinstance(
            msg, protocol.StartAsked | protocol.StopAsked) else None)
        self.asked.put(None)   # the web UI's process is gone

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        stop_group(self.proc, STOP_WAIT_S)
        self._reader.join(5)
        if self._out is not None:
            self._out.close()
