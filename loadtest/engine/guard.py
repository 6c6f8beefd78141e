"""How every replaying command's replays are held (pipeline.replay): under the signal handlers
(the 1st, 2nd and 3rd SIGINT), the manifest saying how they ended (completed, interrupted, failed
or refused) and with which exit code."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from cluster import ClusterAccessError, FleetError, StartupCancelled
from cluster.placement import PlanError
from common import exits
from common.exits import print_error
from common.times import utc_now
from contract.manifest import Manifest, hold_reserve, release_reserve
from contract.records import NO_RECORD
from loadtest.engine.signals import Signals
from loadtest.replay.options import ReplayError

log = logging.getLogger("loadtest")


def unrecorded_text(unrecorded: dict[str, int]) -> str | None:
    """One line for the scheduled requests a run's records do not hold, by mode; None for none."""
    if not unrecorded:
        return None
    total = sum(unrecorded.values())
    return (f"{total:,} scheduled requests {NO_RECORD} (" + ", ".join(f"{m}: {n:,}" for m, n in unrecorded.items())
            + "): their outcome is unknown")


STOPPED = "stopped by signal"   # the reason an interrupted run's manifest gives


def ended(manifest: Manifest, run_dir: Path, status: str, reason: str | None) -> None:
    """The manifest says how the run ended, and when."""
    manifest.status, manifest.reason, manifest.ended_at = status, reason, utc_now()
    manifest.write(run_dir)


class Interrupted(Exception):
    """A signal (or the web UI's Stop) ended the replays."""


def guarded(replay: Callable[[Signals], None], manifest: Manifest, run_dir: Path, prog: str) -> int:
    """Run `replay` under the signal handlers and say in the manifest how it ended; the exit code
    (OK, INTERRUPTED, BAD_INPUT for a refused pre-flight, INCOMPLETE for anything else)."""
    status, reason, code = "failed", None, exits.INCOMPLETE
    hold_reserve(run_dir)   # so that a disk the records fill still takes the manifest's last word
    with Signals() as signals:
        try:
            replay(signals)
            status, code = "completed", exits.OK
        except (Interrupted, StartupCancelled, KeyboardInterrupt):
            status, reason, code = "interrupted", STOPPED, exits.INTERRUPTED
        except (PlanError, ClusterAccessError) as exc:  # the pre-flight: the cluster cannot hold a mode, or
            # would not let this process join; nothing was started
            status, reason, code = "refused", str(exc), exits.BAD_INPUT
            print_error(prog, reason)
        except (FleetError, ReplayError) as exc:
            reason = str(exc)
            print_error(prog, reason)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            log.debug("replay failed", exc_info=True)
            print_error(prog, reason)
        finally:
            lost = unrecorded_text(manifest.unrecorded)
            if lost and status != "failed":   # a replay that lost rows never ends without saying so (a failed
                # one said what it lost in the line that failed it)
                status, code = ("failed", exits.INCOMPLETE) if status == "completed" else (status, code)
                reason = f"{reason}; {lost}" if reason else lost
                print_error(prog, lost)
            ended(manifest, run_dir, status, reason)
            release_reserve(run_dir)
    return code
