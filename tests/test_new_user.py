"""What a new user following the README and `--help` met, held as they see it (console, files, exit
code): simulated numbers said to be simulated where the decision is, with the hardware modelled."""

from __future__ import annotations

import json

import pytest

from cluster.fleet import load_fleet

SIMULATED = ("SIMULATED: these numbers come from loadtest's simulator (a performance model of "
             "meta-llama/Llama-3.3-70B-Instruct at TP4 on h100-sxm), not from a GPU fleet")


def test_make_runs_default_fleet_says_it_is_the_simulator_and_what_it_models():
    spec, _ = load_fleet("local-sim")   # what `make run` replays against
    text = spec.simulated()
    assert text is not None and text.startswith("SIMULATED: ") and spec.sim.hardware in text and spec.model in text
    assert load_fleet("h100-70b")[0].simulated() is None   # real vLLM: nothing to say


@pytest.mark.e2e
def test_a_run_on_the_simulator_says_so_before_its_decision_everywhere(session_run):
    run_dir, ran = session_run   # against the shared simulator fleet, held up by `cluster up`
    out = ran.stdout
    said = out.index(SIMULATED)
    assert said < out.index("decision: ") and said < out.index("speedup"), out
    assert out.splitlines()[1] == SIMULATED, out.splitlines()[:3]   # the first screen: right under the run's line
    report = (run_dir / "report.md").read_text().splitlines()
    assert report[2] == f"**{SIMULATED}.**" and report[4].startswith("**Decision: "), report[:6]
    html = (run_dir / "report.html").read_text()
    assert html.index("SIMULATED: these numbers") < html.index("Decision: ") < html.index("<h2>Plots</h2>")
    assert json.loads((run_dir / "manifest.json").read_text())["simulated"] == SIMULATED
