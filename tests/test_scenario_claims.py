"""What the built-in scenario files say of themselves, held to the simulator's performance model
in virtual time (`loadtest plan`, no servers): a scenario that calls its rate "below saturation"
keeps up in every mode of the default fleet over a long trace, and its demo size (what `make run`
replays) lasts long enough for a steady state in every mode. A new file that makes the claim is
checked too, or this test says it is not."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from analysis.long_summary import SummaryView
from analysis.sweep import saturation
from tests.conftest import ROOT, cli

BUILTIN = ROOT / "scenarios" / "builtin"
CLAIMED = ["saas-mix"]           # the files whose comments say "below saturation"
LONG = 2000                      # requests: 400 s of saas-mix, several times its slowest E2E p99


def test_every_file_that_claims_below_saturation_is_checked_here():
    claims = sorted(p.stem for p in BUILTIN.glob("*.toml") if "below saturation" in p.read_text())
    assert claims == CLAIMED


@pytest.mark.parametrize("name", CLAIMED)
def test_a_scenario_below_saturation_keeps_up_in_every_mode_and_its_demo_reaches_a_steady_state(name, tmp_path):
    long = cli("plan", "--scenario", name, "--rate-scale", "1", "--requests", str(LONG), "--out", str(tmp_path),
               "--run-id", "long")
    assert long.returncode == 0, long.stdout + long.stderr
    sweep = pq.read_table(tmp_path / "long" / "sweep.parquet")
    flags = saturation(sweep)
    assert len(flags) == 5 and set(flags.values()) == {False}, flags   # judged, and not saturated, every mode
    demo = cli("plan", "--scenario", name, "--rate-scale", "1", "--out", str(tmp_path), "--run-id", "demo")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    view = SummaryView(pq.read_table(tmp_path / "demo" / "levels" / "scale-1" / "summary.parquet"))
    for mode in view.modes:
        assert view.get(mode, "steady_window_s", "length"), mode     # throughput and goodput to show
    assert "too short for a steady state" not in demo.stdout
