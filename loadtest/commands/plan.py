"""`loadtest plan`: each mode at several loads predicted by the simulator's model in virtual time
(loadtest.session.plan), written as run folders, with the curves and, with --capacity, each
mode's highest rate within the SLOs."""

from __future__ import annotations

import time

from analysis.slo import has_targets
from analysis.sweep import sweep_markdown
from cluster import FleetError
from cluster.fleet import load_fleet, redacted, resolve_modes
from cluster.sim import cli as sim_cli
from cluster.sim import sim_profile
from common import exits, files
from common.exits import print_error
from loadtest.commands.console import new_console
from loadtest.manifest import Manifest
from loadtest.session.inputs import new_run_dir
from loadtest.session.levels import levels_of, native_rate
from loadtest.session.options import DEFAULT_FLEET, PlanOptions
from loadtest.session.plan import capacity_section, plan_levels, simulator_of
from scenarios import ScenarioError
from scenarios.spec import load_scenario
from scenarios.trace import META_HASH, META_NAME, build_trace, scenario_hash


def main(args: PlanOptions) -> int:
    console = new_console()
    started = time.monotonic()
    try:
        fleet, raw_fleet = load_fleet(args.fleet.fleet or DEFAULT_FLEET)
        modes = resolve_modes(fleet.name, list(fleet.modes), args.fleet.modes)
        if args.hardware is not None:
            try:
                sim_profile.resolve(args.hardware)
            except sim_profile.ProfileError as exc:
                raise FleetError(f"--hardware {exc}") from None
        scenario, raw = load_scenario(args.trace.scenario)
        seed = scenario.seed if args.trace.seed is None else args.trace.seed
        base = build_trace(scenario, requests=args.trace.requests or scenario.demo_requests, seed=seed)
        base = base.replace_schema_metadata({**(base.schema.metadata or {}), META_NAME: scenario.name.encode(),
                                             META_HASH: scenario_hash(raw).encode()})
        if args.capacity:
            native_rate(base)
        levels = levels_of(args.levels, base)
        if args.capacity and not has_targets(base):
            raise ScenarioError(f"--capacity: the scenario {scenario.name} sets no SLO targets to hold (give its "
                                "tenants an `slo`)")
        servers = {m: simulator_of(fleet, m, args.hardware) for m in modes}
        run_dir = new_run_dir(args.folder.out, args.folder.run_id, f"plan-{scenario.name}")
    except (ScenarioError, FleetError, sim_cli.SimArgsError, FileExistsError) as exc:
        print_error("loadtest plan", str(exc))
        return exits.BAD_INPUT
    hardware = args.hardware or fleet.sim.hardware
    console.print(f"plan {run_dir.name}: {base.num_rows:,} requests of {scenario.name} per level, modes "
                  f"{', '.join(modes)}, fleet {fleet.name} on {hardware} (the simulator's model, in virtual time)",
                  soft_wrap=True)

    top = Manifest(run_dir.name, {"name": scenario.name, "source": str(args.trace.scenario),
                                  "sha256": scenario_hash(raw)},
                   {"name": fleet.name, "sha256": scenario_hash(raw_fleet), "spec": redacted(fleet),
                    "planned_on": hardware}, modes, seed, base.num_rows)

    sweep = plan_levels(base, levels, servers, fleet, run_dir, top, "",
                        lambda name, offered: console.print(f"  {name}: offered {offered:,.2f} req/s"))
    report = sweep_markdown(sweep, f"Plan {run_dir.name}: {scenario.name} on fleet {fleet.name} ({hardware}), "
                            "predicted by the simulator's performance model in virtual time")
    if args.capacity:
        report += "\n" + capacity_section(base, servers, modes, fleet, run_dir)
    files.write_text(run_dir / "report.md", report)
    console.print(report, markup=False, highlight=False)
    console.print(f"plan: {run_dir / 'report.md'}  (curves: {run_dir / 'sweep.parquet'}; levels as run folders "
                  f"under {run_dir / 'levels'}) in {time.monotonic() - started:.1f} s")
    return exits.OK
