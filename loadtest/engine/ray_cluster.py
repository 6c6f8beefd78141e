"""The Ray side of a run: the fleet it replays on, joined (`join_fleet`), and the cluster under it
watched, so that a cluster that goes away (its head killed, its machine gone) is said in one line
and ends the run with exit code 3, in bounded time, with the records written so far kept.

`RayCluster` is entered before the fleet, so it outlasts the fleet's teardown, and armed once Ray
is joined. When its ClusterWatch finds the GCS gone, the replays are stopped as a first Ctrl-C
stops them (in-flight requests get their grace period, rows not yet sent are recorded as
not_sent) and the fleet skips its Ray calls, which would block. Leaving it, after the fleet's
teardown, raises FleetError naming the cluster, which `guarded` prints as one line, writes into
the manifest (`failed`) and turns into exit code 3. Should the command be stuck in some Ray call
all the same, the watch's last resort writes the manifest, kills the Locust processes' groups and
exits with 3 itself, before Ray's own client ends the process with code 1 (cluster/ray_watch.py).
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import ExitStack
from pathlib import Path

import ray

from cluster import FleetError
from cluster.provision import Fleet, init_ray, ray_address
from cluster.ray_watch import ClusterWatch
from cluster.state import ExistingFleet
from common import exits
from common.exits import print_error
from common.process import signal_group
from common.times import utc_now
from contract.manifest import Manifest
from loadtest.engine.inputs import FleetChoice
from loadtest.engine.signals import Signals


def join_fleet(choice: FleetChoice, address_flag: str | None, ray_workers: bool, signals: Signals,
               manifest: Manifest, run_dir: Path, prog: str, stack: ExitStack) -> Fleet | ExistingFleet:
    """The fleet a run replays on, entered on `stack` and watched from then on: a fleet of its own
    on Ray (a local instance, or the cluster at --address), or the one `cluster up` left (Ray then
    only for --ray-workers). The watch is entered first, so it outlasts the fleet's teardown."""
    logs = run_dir / "logs"
    address = ray_address(address_flag)
    cluster = stack.enter_context(RayCluster(address, signals, manifest, run_dir, prog))
    if choice.existing is None:
        fleet = stack.enter_context(Fleet(choice.spec, choice.modes, logs, address=address,
                                          cancelled=lambda: signals.stop, on_ray_ready=signals.rearm))
    else:
        if ray_workers and init_ray(address or choice.existing.ray_address, log_file=logs / "ray.log"):
            signals.rearm()  # ray.init installs its own SIGTERM handler
            stack.callback(ray.shutdown)
        fleet = stack.enter_context(ExistingFleet(choice.existing, choice.modes))
    cluster.arm(fleet)
    return fleet


class RayCluster:
    """The Ray cluster a command's replay runs on (`address` as given; None: one it started)."""

    def __init__(self, address: str | None, signals: Signals, manifest: Manifest, run_dir: Path, prog: str) -> None:
        self.address, self.signals, self.manifest, self.run_dir, self.prog = address, signals, manifest, run_dir, prog
        self.fleet: object | None = None
        self.watch: ClusterWatch | None = None
        self.message: str | None = None   # set once the cluster is gone

    def __enter__(self) -> RayCluster:
        return self

    def arm(self, fleet: object) -> None:
        """Start watching the GCS this process joined (nothing to watch without Ray)."""
        if not ray.is_initialized() or self.watch is not None:
            return
        self.fleet = fleet
        self.watch = ClusterWatch(ray.get_runtime_context().gcs_address, self._gone, self._last_resort).start()

    def __exit__(self, exc_type, exc, tb) -> None:
        # The fleet is down. Once Ray is shut down too, nothing of it can block us or end the process.
        if self.watch is not None and (self.message is None or not ray.is_initialized()):
            self.watch.done()
        if self.message is not None:  # the run could not complete, whatever else it met on the way
            raise FleetError(self.message) from None

    def _gone(self, unreachable_s: float) -> None:
        where = f"at {self.address}" if self.address else "this run started"
        self.message = (f"the Ray cluster {where} went away (its GCS at {self.watch.gcs} has not answered for "
                        f"{unreachable_s:.0f} s); the run could not complete")
        if hasattr(self.fleet, "cluster_gone"):
            self.fleet.cluster_gone = self.message   # its teardown then calls nothing of Ray
        for replay in list(self.signals.replays):   # nor does the stop of a replay's Ray workers
            if replay.ray_pool is not None:
                replay.ray_pool.cluster_gone = True
        self.signals.ask_stop()

    def _last_resort(self) -> None:
        """The command is still stuck in Ray: say how it ended, stop what we started, and exit."""
        self.manifest.status, self.manifest.reason, self.manifest.ended_at = "failed", self.message, utc_now()
        try:
            self.manifest.write(self.run_dir)
        except OSError:
            pass
        for replay in list(self.signals.replays):
            for pid in replay.pids:   # each Locust process leads its own group
                signal_group(pid, signal.SIGKILL)
        print_error(self.prog, f"{self.message}; stopped while waiting on Ray")
        sys.stdout.flush()
        os._exit(exits.INCOMPLETE)
