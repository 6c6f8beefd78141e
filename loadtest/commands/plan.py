"""`loadtest plan`: each mode at several loads predicted by the simulator's model in virtual time
(loadtest.engine.plan), written as run folders, with the curves (report.md, and report.html with
the interactivity frontier) and, with --capacity, each mode's highest rate within the SLOs."""

from __future__ import annotations

import time

from analysis.capacity import peak_fleets, peak_markdown, plan_capacity_markdown
from analysis.sweep import sweep_markdown
from analysis.sweep_html import sweep_html, tenant_targets
from cluster import FleetError
from cluster.sim.config import SimArgsError
from common import exits, files
from common.exits import print_error
from loadtest.commands.console import new_console, say_written, show_markdown
from loadtest.engine.inputs import OutError
from loadtest.engine.plan import new_plan, plan_capacity, plan_levels
from loadtest.options.replaying import CAPACITY_PRECISION, CapacityOptions, PlanOptions
from scenarios import ScenarioError


def main(args: PlanOptions) -> int:
    console = new_console()
    started = time.monotonic()
    try:
        plan = new_plan(args)
    except (ScenarioError, FleetError, SimArgsError, OutError) as exc:
        print_error("loadtest plan", str(exc))
        return exits.BAD_INPUT
    run_dir = plan.run_dir
    console.print(f"plan {run_dir.name}: {plan.base.num_rows:,} requests of {plan.scenario} per level, modes "
                  f"{', '.join(plan.modes)}, fleet {plan.fleet.name} on {plan.hardware} (the simulator's model, in "
                  "virtual time)", soft_wrap=True)
    console.print(f"[bold magenta]{plan.predicted()}[/bold magenta]", soft_wrap=True)
    sweep = plan_levels(plan.base, plan.levels, plan.servers, plan.fleet, run_dir, plan.top, "",
                        lambda name, offered: console.print(f"  {name}: offered {offered:,.2f} req/s"))
    report = sweep_markdown(sweep, plan.title(), plan.predicted(), plan.fleet.gpus_per_mode, args.gpu_hour_cost)
    if args.capacity:
        rows = plan_capacity(plan.base, plan.servers, plan.modes, plan.fleet, run_dir)
        report += "\n" + plan_capacity_markdown(rows, plan.fleet.gpus_per_mode, CAPACITY_PRECISION,
                                                plan.base.num_rows, CapacityOptions.probe_duration)
        if args.peak is not None:
            fleet = plan.fleet
            report += "\n" + peak_markdown(peak_fleets(rows, args.peak, fleet.replicas, fleet.tensor_parallel_size),
                                           args.peak, fleet.replicas, fleet.tensor_parallel_size)
    files.write_text(run_dir / "report.md", report)
    files.write_text(run_dir / "report.html", sweep_html(plan.title(), report, sweep, plan.fleet.gpus_per_mode,
                                                         targets=tenant_targets(plan.base), measured=False))
    show_markdown(console, report)
    say_written(console, "plan", run_dir / "report.md", ("curves", run_dir / "sweep.parquet"),
                ("plots", run_dir / "report.html"), ("levels as run folders under", run_dir / "levels"),
                took_s=time.monotonic() - started)
    return exits.OK
