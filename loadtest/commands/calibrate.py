"""`loadtest calibrate RUN_OR_SWEEP --out PROFILE.toml`: fit the simulator to a measured fleet
(loadtest.engine.calibrate) and print the fit and its residuals."""

from __future__ import annotations

from cluster import FleetError
from cluster.sim.sim_profile import ProfileError
from common.exits import BAD_INPUT, OK, print_error
from loadtest.commands.console import new_console
from loadtest.commands.views import show_calibration
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
    show_calibration(console, fitted.prior, fitted.hardware, fitted.acceptance)
    console.print(f"wrote {fitted.out}")
    return OK
