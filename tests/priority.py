"""CPU priority for the tests that compare timings (marker `serial`), which under `make test` share
the 2 cores with the tests running beside them. While one runs, it and every process it uses get
nice SERIAL_NICE, so the scheduler gives them a contended core first and the others cannot skew
what it measures.

On Linux a nice value counts twice: per thread (inherited at fork), against the threads of the
same autogroup, and, when the kernel groups by session (`kernel.sched_autogroup_enabled`, on
here), per autogroup (`/proc/PID/autogroup`), against the other sessions. The processes a serial
test relies on mostly start sessions of their own (Locust, the simulators, the shared fleet's
replicas), so both are raised: the test's own thread (its children inherit it), each new session
the test's processes start (found as tests/invariants.py finds them), and the shared fleet's
replicas; all put back after the test. Raising a priority needs CAP_SYS_NICE (root, as `make
test`'s installs run); without it the tests run unraised, and the session says so once."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

SERIAL_NICE = -15     # weight 29154 against nice 0's 1024 (the kernel's sched_prio_to_weight): ~97% of a contended core


class Boost:
    """One serial test's raised priorities, and how to put them back."""

    warned = False

    def __init__(self) -> None:
        self.threads: dict[int, int] = {}               # thread id -> its nice before
        self.groups: dict[int, tuple[int, int]] = {}    # session -> (a process of it, its autogroup's nice before)
        self.session = os.getsid(0)                     # the test run's own session: never raised as a group

    def raise_thread(self, tid: int) -> None:
        try:
            before = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, SERIAL_NICE)
            self.threads.setdefault(tid, before)
        except OSError as exc:
            self._cannot(exc)

    def raise_process(self, pid: int) -> None:
        """Every thread of `pid`, and its session's autogroup if it is not the test run's."""
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            sid = os.getsid(pid)
        except OSError:
            return   # gone meanwhile
        for tid in tids:
            self.raise_thread(tid)
        if sid != self.session and sid not in self.groups:
            before = _autogroup_nice(pid)
            if before is not None and _set_autogroup_nice(pid, SERIAL_NICE, self):
                self.groups[sid] = (pid, before)

    def restore(self) -> None:
        for tid, nice in self.threads.items():
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:
                pass   # the thread is gone
        for pid, nice in self.groups.values():
            _set_autogroup_nice(pid, nice, None)

    def _cannot(self, exc: OSError) -> None:
        if not Boost.warned:
            Boost.warned = True
            warnings.warn(f"the serial tests run at the same CPU priority as the tests beside them: {exc}",
                          stacklevel=2)


def _autogroup_nice(pid: int) -> int | None:
    """`/autogroup-25 nice 0` -> 0; None without autogroups (or once the process is gone)."""
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def _set_autogroup_nice(pid: int, nice: int, boost: Boost | None) -> bool:
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
        return True
    except OSError as exc:
        if boost is not None and not isinstance(exc, FileNotFoundError | ProcessLookupError):
            boost._cannot(exc)
        return False
