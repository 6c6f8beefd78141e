"""Reading a Locust replay process: its typed messages (loadtest/protocol.py) go to the command
that started it, everything else Locust prints goes to the mode's stats log."""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable
from typing import TextIO

from loadtest import protocol

log = logging.getLogger("loadtest")


def read_output(proc: subprocess.Popen, other: TextIO, on_message: Callable[[protocol.Message], None]) -> None:
    """Until `proc`'s stdout closes: each message line to `on_message`, any other line to `other`."""
    for line in proc.stdout:
        try:
            msg = protocol.parse(line)
        except ValueError as exc:  # a bug between the two sides: say it, keep reading
            log.error("%s", exc)
            continue
        if msg is None:
            other.write(line)
        else:
            on_message(msg)


def start_reader(proc: subprocess.Popen, other: TextIO,
                 on_message: Callable[[protocol.Message], None]) -> threading.Thread:
    """read_output on a daemon thread, started."""
    reader = threading.Thread(target=read_output, args=(proc, other, on_message), daemon=True,
                              name=f"locust-{proc.pid}-reader")
    reader.start()
    return reader
