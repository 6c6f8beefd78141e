"""`loadtest calibrate RUN_OR_SWEEP --out PROFILE.toml`: fit the simulator to a measured fleet
(loadtest.engine.calibrate) and print the fit and its residuals."""

from __future__ import annotations

import math

from rich.table import Table

from cluster import FleetError
from cluster.sim.fitting import FITTED_HARDWARE
from cluster.sim.sim_profile import ProfileError
from common.exits import BAD_INPUT, OK, print_error
from loadtest.commands.console import new_console
from loadtest.engine.calibrate import CalibrateError, calibrate
from loadtest.options.tools import CalibrateOptions

PROG = "loadtest calibrate"


def main(args: CalibrateOptions) -> int:
    console = new_console()
    try:
        fitted = calibrate(args)
    except (CalibrateError, FleetError, ProfileError) as exc:
        print_error(PROG, str(exc))
        return BAD_INPUT
    _print(console, fitted.prior, fitted.hardware, fitted.acceptance)
    console.print(f"wrote {fitted.out}")
    return OK


def _print(console, prior, hw_fit, acc_report) -> None:
    # the fit's one sentence is never broken by a narrow terminal (a log, CI): a reader greps it
    console.print(f"Hardware: fitted to {hw_fit.requests} baseline requests "
                  f"(mean step time, RMS residual {hw_fit.residual_pct:.1f}%)", soft_wrap=True)
    t = Table()
    for col in ("constant", "prior", "fitted", "ratio"):
        t.add_column(col, justify="left" if col == "constant" else "right")
    for name in FITTED_HARDWARE:
        before, after = getattr(prior, name), hw_fit.values[name]
        held = name in hw_fit.held
        t.add_row(name, f"{before:.4g}", "held" if held else f"{after:.4g}",
                  "-" if held or not math.isfinite(after) else f"{after / before:.3f}")
    console.print(t)
    if not acc_report:
        return
    console.print("Acceptance per method and domain (tokens per decode step: measured, and the fitted profile's)",
                  soft_wrap=True)
    a = Table()
    for col in ("mode", "domain", "requests", "per position", "spread", "match", "measured", "profile", "diff"):
        a.add_column(col, justify="left" if col in ("mode", "domain", "per position") else "right")
    for mode, domain, fit in acc_report:
        if isinstance(fit, str):
            a.add_row(mode, domain, "-", fit, "", "", "", "", "")
            continue
        acc = fit.acceptance
        diff = (fit.modelled_tokens_per_step - fit.tokens_per_step) / fit.tokens_per_step
        a.add_row(mode, domain, str(fit.requests), " ".join(f"{p:.2f}" for p in acc.positions), f"{acc.spread:.2f}",
                  f"{acc.match:.2f}", f"{fit.tokens_per_step:.2f}", f"{fit.modelled_tokens_per_step:.2f}",
                  f"{diff:+.1%}")
    console.print(a)
