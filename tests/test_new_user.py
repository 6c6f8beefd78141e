"""What a new user following the README and `--help` met, held as they see it (console, files, exit
code): simulated numbers said to be simulated where the decision is, with the hardware modelled; a
held fleet's key, missing or wrong, said apart and by its variable, by `cluster status` as by a run;
bounds that agree, and errors that blame the flag the user gave."""

from __future__ import annotations

import json
import os

import pytest

from cluster.fleet import load_fleet
from tests.conftest import cli

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


MISSING = ("the server requires an API key and none was sent (LOADTEST_API_KEY is not set; set it to the key, or "
           "name another variable with --api-key-env)")
REFUSED = "the server refused the API key in LOADTEST_API_KEY (it is not the server's key)"


@pytest.mark.e2e
def test_a_held_fleets_key_missing_or_wrong_is_said_apart_by_status_and_by_a_run(world_fleet, tmp_path):
    """The shared fleet requires the session's key (VLLM_API_KEY in its fleet's env)."""
    state = str(world_fleet.state)
    assert cli("cluster", "status", "--state", state).returncode == 0   # the session's key: every replica ok
    for key, said in ((None, MISSING), ("sk-not-the-key", REFUSED)):
        env = {k: v for k, v in os.environ.items() if k != "LOADTEST_API_KEY"}
        env |= {"LOADTEST_API_KEY": key} if key else {}
        status = cli("cluster", "status", "--state", state, env=env)
        assert status.returncode == 1, status.stdout + status.stderr   # replicas up, but a run could not use them
        for mode in world_fleet.replicas:
            assert f"{mode}-0: GET /v1/models answered HTTP 401: {said}" in status.stdout.splitlines(), status.stdout
        run = cli("run", "--endpoints", state, "--modes", "baseline", "--requests", "4", "--out", str(tmp_path),
                  env=env)
        assert run.returncode == 2 and run.stderr.count("error:") == 1, run.stderr
        assert said in run.stderr, run.stderr


def test_concurrency_levels_stop_where_the_client_does():
    out = cli("sweep", "--modes", "baseline", "--requests", "20", "--concurrency", "1,100000000")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--concurrency: expected at most 65,535 requests in flight" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("flags, blamed", [
    (["--duration", "100000h"], "loadtest soak: error: --duration: 100,000 h at the default window"),
    (["--duration", "1000h", "--window", "60"], "loadtest soak: error: --window: 60 s (each a fifth of it apart)"),
    (["--duration", "1000h", "--window-step", "5"], "loadtest soak: error: --window-step: 5 s over the"),
    (["--duration", "1h", "--window", "2"], "loadtest soak: error: --window: at least 5 s, got 2 s"),
])
def test_a_soak_with_too_many_windows_blames_the_flag_given(flags, blamed, tmp_path):
    out = cli("soak", *flags, "--out", str(tmp_path))
    assert out.returncode == 2 and out.stderr.startswith(blamed), out.stderr
    assert not list(tmp_path.iterdir()), "refused before anything was written"
