"""Child processes we start and stop: each leads its own process group, dies with its parent, and
is stopped by group (SIGTERM, then SIGKILL after a grace period), never by name."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess

_PR_SET_PDEATHSIG = 1
# What a Locust process gets when the process that started it dies: a signal of its own, because
# the kernel sends PR_SET_PDEATHSIG when the *thread* that started the child exits, which in a
# dying multi-threaded parent (a Ray actor) comes before the child's ppid changes, so a SIGTERM
# could not be told from a stop someone asked for. The locustfile handles it as a SIGTERM that
# ends the worker as worker_lost.
PARENT_GONE = signal.SIGUSR2
# The pid of the process that started a Locust process, in its environment: if that parent dies
# between fork and prctl, no signal ever comes, and the child's own first getppid() would already
# be the reaper's. The locustfile compares against this one.
PARENT_PID_ENV = "LOADTEST_PARENT_PID"


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """preexec_fn: the child gets `sig` when the process that started it dies."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)


def told_when_parent_dies() -> None:
    """preexec_fn for a Locust process: PARENT_GONE when the process that started it dies."""
    die_with_parent(PARENT_GONE)


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a Locust process started now by this process: ours, `extra`, and our pid
    (PARENT_PID_ENV)."""
    return {**os.environ, **(extra or {}), PARENT_PID_ENV: str(os.getpid())}


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(proc: subprocess.Popen, grace_s: float) -> int | None:
    """SIGTERM `proc`'s group (it was started with start_new_session), SIGKILL it after `grace_s`,
    then SIGKILL any stragglers left in the group; return the exit code."""
    pgid = proc.pid
    if proc.poll() is None:
        signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            signal_group(pgid, signal.SIGKILL)
            proc.wait(5)
    signal_group(pgid, signal.SIGKILL)
    return proc.returncode
