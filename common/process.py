"""Child processes we start and stop: each leads its own process group, dies with its parent, and
is stopped by group (SIGTERM, then SIGKILL after a grace period), never by name."""

from __future__ import annotations

import ctypes
import os
import signal
import site
import subprocess
from pathlib import Path

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


# Locust takes every option from LOCUST_<OPTION> variables and from ~/.locust.conf, ./locust.conf
# and ./pyproject.toml ([tool.locust]) besides its command line (locust.argument_parser,
# DEFAULT_CONFIG_FILES): a user's file or variable would set options under a replay (a run-time
# that cuts it short, a CSV or HTML writer, another log level). A Locust process of ours runs in a
# folder of the run's (its logs/, which holds none of those files) as its working directory and HOME,
# and without Locust's variables, so its command line is the whole of its configuration.
LOCUST_ENV_PREFIX = "LOCUST_"


def child_env(extra: dict[str, str] | None = None, home: Path | None = None) -> dict[str, str]:
    """The environment for a Locust process started now by this process: ours without Locust's
    own variables, `extra`, our pid (PARENT_PID_ENV) and, given `home`, HOME there (the user's
    site-packages kept through PYTHONUSERBASE, which Python would otherwise look for under HOME)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LOCUST_ENV_PREFIX)}
    if home is not None:
        env.setdefault("PYTHONUSERBASE", site.getuserbase())
        env["HOME"] = str(home)
    return {**env, **(extra or {}), PARENT_PID_ENV: str(os.getpid())}


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
