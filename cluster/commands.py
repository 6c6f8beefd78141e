"""`loadtest cluster up|status|down`: a fleet that outlives one run, for the web UI and soak tests.

`up` provisions the fleet through the same provisioner as `loadtest run` and then holds it: it
writes the state file once every replica is ready, watches the replicas, and tears everything
down when it gets SIGINT or SIGTERM (which is what `down` sends it). `--detach` runs that
supervisor in the background and returns once the fleet is ready.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import deque
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cluster import FleetError, StartupCancelled
from cluster.fleet import available_modes, load_fleet, redacted, resolve_modes
from cluster.placement import PlanError
from cluster.provision import STOP_GRACE_S, Fleet, ray_address
from cluster.state import ClusterState, ReplicaState, pid_is_supervisor, replica_problem
from common.exits import BAD_INPUT as EXIT_USAGE
from common.exits import GATE_FAILED, INCOMPLETE, print_error
from common.exits import INTERRUPTED as EXIT_INTERRUPTED
from common.exits import OK as EXIT_OK
from common.process import stop_group
from common.times import utc_now

WATCH_INTERVAL_S = 5.0
DOWN_TIMEOUT_S = STOP_GRACE_S * 3 + 30  # at least; `down` allows more for bigger fleets


def _check_not_up(state_path: Path) -> None:
    if state_path.is_file():
        try:
            old = ClusterState.read(state_path)
        except FleetError:
            return
        if old.supervisor_alive():
            raise FleetError(f"a fleet ({old.fleet}) is already up with supervisor pid {old.supervisor_pid} "
                             f"(state file {state_path}); `loadtest cluster down` first, or use another --state")


def fleet_condition(state: ClusterState, health: dict[str, str | None] | None) -> str:
    """`ready`, or what the probes found: `degraded: 1 of 2 replicas unhealthy`, `down: ...`."""
    bad = sum(why is not None for why in (health or {}).values())
    if state.status != "ready" or not bad:
        return state.status
    return f"{'down' if bad == len(health) else 'degraded'}: {bad} of {len(health)} replicas unhealthy"


def endpoints_table(state: ClusterState, health: dict[str, str | None] | None = None) -> Table:
    table = Table(title=f"fleet {state.fleet} ({fleet_condition(state, health)})")
    for col in ("replica", "url", "served model", "pid", *(["health"] if health is not None else [])):
        table.add_column(col)
    for r in state.replicas:
        row = [r.label, r.url, r.served_model, str(r.pid)]
        if health is not None:
            why = health.get(r.label)
            row.append("[green]ok[/green]" if why is None else f"[red]{why}[/red]")
        table.add_row(*row)
    return table


def up(console: Console, fleet_name: str, modes_text: str | None, state_path: Path, logs_dir: Path,
       address: str | None, detach: bool, relaunch: list[str], skip_unavailable: bool = False) -> int:
    """Input problems raise FleetError (exit 2), and so does a fleet the cluster cannot hold at
    once (the pre-flight says the turns it would take); a fleet that fails to start returns 3.
    With `detach`, the supervisor is this command again without --detach: `relaunch` +
    `cluster up ...` (the caller's own command line, e.g. [python, -m, loadtest])."""
    spec, _raw = load_fleet(fleet_name)
    modes = resolve_modes(spec.name, list(spec.modes), modes_text)
    modes, skipped = available_modes(spec, modes, local=ray_address(address) is None, skip=skip_unavailable)
    for mode, why in skipped.items():
        console.print(f"[yellow]skipping {mode}: {why}[/yellow]", soft_wrap=True)
    _check_not_up(state_path)
    logs_dir = logs_dir.resolve()
    if detach:
        child = ["cluster", "up", "--fleet", fleet_name, "--modes", ",".join(modes), "--state", str(state_path),
                 "--logs", str(logs_dir), *(["--address", address] if address else [])]
        return _detach(console, spec.startup_timeout_s, state_path, logs_dir, [*relaunch, *child])

    state = ClusterState(fleet=spec.name, modes=modes, supervisor_pid=os.getpid(), fleet_spec=redacted(spec),
                         ray_address=ray_address(address), logs_dir=str(logs_dir.resolve()),
                         started_at=utc_now("seconds"))
    state.write(state_path)
    stop = {"signals": 0}

    def on_signal(signum, frame) -> None:
        stop["signals"] += 1

    def arm() -> None:  # again after ray.init, which installs its own SIGTERM handler
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)

    arm()
    logs_dir.mkdir(parents=True, exist_ok=True)
    try:
        with Fleet(spec, modes, logs_dir, address=state.ray_address, cancelled=lambda: stop["signals"] > 0,
                   on_ray_ready=arm) as fleet:
            console.print(fleet.plan.text(), soft_wrap=True)
            if not fleet.plan.all_at_once:
                raise PlanError(f"`cluster up` keeps every mode up at once, and the cluster holds "
                                f"{fleet.plan.at_once} of {len(modes)} at a time ({len(fleet.plan.turns)} turns: "
                                f"{', '.join('+'.join(t) for t in fleet.plan.turns)}); start fewer --modes, or let "
                                f"`loadtest run --fleet {fleet_name}` take them in turns")
            fleet.start(lambda msg: console.print(msg, soft_wrap=True))
            state.replicas = [ReplicaState(r.mode, r.index, r.url, r.served_model, r.pid, str(r.log_path))
                              for r in fleet.replicas]
            state.status = "ready"
            state.write(state_path)
            console.print(endpoints_table(state))
            console.print(f"state: {state_path}  (use: loadtest run --endpoints {state_path}; "
                          f"loadtest ui --endpoints {state_path}; stop: loadtest cluster down --state {state_path})",
                          soft_wrap=True)
            _watch(console, fleet, state, state_path, lambda: stop["signals"] > 0)
            state.status = "stopping"
            state.write(state_path)
            console.print("stopping the fleet")
    except StartupCancelled:
        console.print("stopped before the fleet was ready")
    except PlanError as exc:
        state_path.unlink(missing_ok=True)
        print_error("loadtest cluster up", str(exc))
        return EXIT_USAGE
    except FleetError as exc:
        state_path.unlink(missing_ok=True)
        print_error("loadtest cluster up", str(exc))
        return INCOMPLETE
    state_path.unlink(missing_ok=True)
    console.print(f"fleet {spec.name} is down")
    return EXIT_OK


def _watch(console: Console, fleet: Fleet, state: ClusterState, state_path: Path, stopping) -> None:
    """Hold the fleet until a signal; note replicas that die (the rest stay up)."""
    next_check = time.monotonic() + WATCH_INTERVAL_S
    while not stopping():
        time.sleep(0.2)
        if time.monotonic() < next_check:
            continue
        next_check = time.monotonic() + WATCH_INTERVAL_S
        changed = False
        for rep, entry in zip(fleet.replicas, state.replicas, strict=True):
            if entry.pid != rep.pid:  # its server exited and was started again (the fleet's max_restarts)
                entry.pid, entry.exit_code, changed = rep.pid, None, True
                console.print(f"replica {rep.label} restarted as pid {rep.pid}", soft_wrap=True)
            if entry.exit_code is None:
                code = fleet.exit_code(rep)
                if code is not None:
                    entry.exit_code = code
                    changed = True
                    console.print(f"[red]replica {rep.label} exited with code {code}; see {rep.log_path}[/red]")
        if changed:
            state.write(state_path)


def _detach(console: Console, startup_timeout_s: float, state_path: Path, logs_dir: Path, argv: list[str]) -> int:
    """Start `argv` (the same `cluster up`, without --detach) as a background supervisor in its own
    session, and return once its state file says ready (or it has failed). Ctrl-C while waiting
    stops the supervisor, which tears down whatever it had started."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = logs_dir / "supervisor.log"
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + startup_timeout_s + 60
    try:
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                with open(log_path, errors="replace") as f:
                    tail = "".join(deque(f, maxlen=15))
                console.print(f"[red]the fleet supervisor exited with code {code} before the fleet was ready; "
                              f"last lines of {log_path}:[/red]\n{tail}", soft_wrap=True)
                return EXIT_USAGE if code == EXIT_USAGE else INCOMPLETE
            try:
                state = ClusterState.read(state_path)
            except FleetError:
                state = None
            if state is not None and state.supervisor_pid == proc.pid and state.status == "ready":
                console.print(endpoints_table(state))
                console.print(f"supervisor pid {proc.pid} (log {log_path}); state: {state_path}; "
                              f"stop with: loadtest cluster down --state {state_path}", soft_wrap=True)
                return EXIT_OK
            time.sleep(0.5)
        console.print(f"[red]the fleet was not ready within {startup_timeout_s + 60:g} s; stopping it "
                      f"(see {log_path})[/red]")
        stop_group(proc, DOWN_TIMEOUT_S)  # it tears its fleet down on SIGTERM
        return INCOMPLETE
    except KeyboardInterrupt:
        console.print("interrupted: stopping the fleet supervisor")
        stop_group(proc, DOWN_TIMEOUT_S)  # it tears its fleet down on SIGTERM
        return EXIT_INTERRUPTED


def status(console: Console, state_path: Path, api_key_env: str) -> int:
    """Print the fleet and each replica's health as a run would find it (its /health, then its
    /v1/models to the key in $`api_key_env`); exit 0 when the fleet is ready and every replica
    would take a run, 1 when not, or when no fleet is up (the check failed; it is not bad input)."""
    if not state_path.is_file():
        console.print(f"[red]no fleet is up: no state file at {state_path} (start one with `loadtest cluster up`)"
                      "[/red]", soft_wrap=True)
        return GATE_FAILED
    state = ClusterState.read(state_path)
    if not state.supervisor_alive():
        console.print(f"[red]stale state file {state_path}: its supervisor (pid {state.supervisor_pid}) is not "
                      "running; `loadtest cluster down` removes it[/red]", soft_wrap=True)
        return GATE_FAILED
    health = {r.label: replica_problem(r, api_key_env) for r in state.replicas}
    console.print(endpoints_table(state, health))
    for label, why in health.items():   # whole, under the table whose cells wrap them
        if why is not None:
            console.print(f"[red]{label}: {why}[/red]", soft_wrap=True)
    healthy = sum(v is None for v in health.values())
    console.print(f"{healthy}/{len(health)} replicas healthy; supervisor pid {state.supervisor_pid}; "
                  f"up since {state.started_at}")
    return EXIT_OK if state.status == "ready" and healthy == len(health) else GATE_FAILED


def down(console: Console, state_path: Path, timeout_s: float) -> int:
    """SIGTERM the fleet's supervisor and wait until it has torn the fleet down. Nothing up is not
    an error (so `down` can sit in a cleanup step)."""
    if not state_path.exists():
        console.print(f"no fleet is up (no state file at {state_path})")
        return EXIT_OK
    state = ClusterState.read(state_path)
    pid = state.supervisor_pid
    if not state.supervisor_alive():
        state_path.unlink(missing_ok=True)
        console.print(f"no supervisor running (pid {pid} is gone); removed the stale state file {state_path}")
        return EXIT_OK
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it exited between the check and the signal: the wait below sees it gone
    # Replicas are stopped one after another, each within its grace period.
    deadline = time.monotonic() + max(timeout_s, len(state.replicas) * (STOP_GRACE_S + 10) + 30)
    while time.monotonic() < deadline:
        if not pid_is_supervisor(pid):
            state_path.unlink(missing_ok=True)
            console.print(f"fleet {state.fleet} is down ({len(state.replicas)} replica(s) stopped)")
            return EXIT_OK
        time.sleep(0.2)
    console.print(f"[red]the supervisor (pid {pid}) did not stop within {timeout_s:g} s; "
                  f"see {state.logs_dir}/supervisor.log[/red]")
    return INCOMPLETE

