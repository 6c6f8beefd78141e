"""`loadtest calibrate`: fit the simulator to a measured fleet. A simulator fleet made with a
perturbed hardware profile stands in for a real one; the fit must find the perturbation, write
a profile that the simulator, fleets and `loadtest plan` load, and refuse bad input in one line."""

from __future__ import annotations

import pytest
import requests

from cluster.sim.acceptance import Acceptance, expected_tokens_per_step
from cluster.sim.fitting import FITTED_HARDWARE
from cluster.sim.sim_profile import load_profile
from tests.conftest import DATA, cli, loadtest, sim_server

PERTURBED = {"compute_efficiency": 0.55, "kv_read_efficiency": 0.7, "step_overhead_s": 0.003}
EAGLE_CHAT = Acceptance((0.6, 0.55, 0.5), 0.3)
FLEET = """name = "perturbed-sim"
engine = "sim"
model = "meta-llama/Llama-3.1-8B-Instruct"
cpus_per_replica = 0.2
startup_timeout_s = 60

[sim]
hardware = "perturbed.toml"     # relative to this file

[modes.baseline]
method = "none"

[modes.eagle]
method = "eagle"
model = "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
num_speculative_tokens = 3
"""


def _perturbed_fleet(tmp_path):
    (tmp_path / "perturbed.toml").write_text(
        "[hardware]\nbase = \"h100-sxm\"\n" + "".join(f"{k} = {v}\n" for k, v in PERTURBED.items())
        + "\n[acceptance.eagle.chat]\npositions = [0.6, 0.55, 0.5]\nspread = 0.3\n")
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(FLEET)
    return fleet


def _first_position(sweep) -> tuple[float, float]:
    """The mean first-position acceptance over the sweep's eagle chat requests, and its standard
    error: per request, the share of its drafting steps that accepted at least one token."""
    import numpy as np
    import pyarrow.compute as pc

    from analysis.reader import read_requests
    from loadtest.engine.calibrate import request_domains, run_folders

    shares = []
    for folder in run_folders(sweep):
        domains = request_domains(folder)
        records = read_requests(folder)
        ok = records.filter(pc.and_(pc.equal(records["mode"], "eagle"), pc.equal(records["status"], "ok")))
        for rid, hist in zip(ok["request_id"].to_pylist(), ok["spec_acceptance_histogram"].to_pylist(), strict=True):
            if domains.get(rid) == "chat" and hist and sum(hist) > 0:
                shares.append(1 - hist[0] / sum(hist))
    assert len(shares) >= 10, f"{len(shares)} eagle chat requests drafted: too few to check the fit"
    return float(np.mean(shares)), float(np.std(shares, ddof=1) / np.sqrt(len(shares)))


@pytest.mark.e2e
@pytest.mark.serial   # the step times it fits are measured: nothing may share a core with them
def test_calibrate_recovers_a_perturbed_profile_and_the_fit_loads_everywhere(tmp_path):
    fleet = _perturbed_fleet(tmp_path)
    sweep = loadtest("sweep", "--fleet", str(fleet), "--scenario", str(DATA / "calib-mix.toml"), "--requests", "400",
                     "--concurrency", "1,8,32,64", "--level-duration", "8", "--keep-going", "--workers", "1",
                     "--cooldown", "0", "--out", str(tmp_path), "--run-id", "s", timeout=600)
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    profile = tmp_path / "my-fleet-profile.toml"
    out = cli("calibrate", str(tmp_path / "s"), "--out", str(profile))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "RMS residual" in out.stdout and "Acceptance per method and domain" in out.stdout
    fitted = load_profile(profile)
    for name in FITTED_HARDWARE:      # the hardware the fleet really had, within 5%
        assert getattr(fitted.hardware, name) == pytest.approx(PERTURBED[name], rel=0.05), name
    eagle_chat = fitted.acceptance["eagle"]["chat"]
    assert expected_tokens_per_step(eagle_chat, 3) == pytest.approx(expected_tokens_per_step(EAGLE_CHAT, 3), rel=0.05)
    # The first position varies per request (spread 0.3 on the logit), so a sweep's requests show
    # it only to within their sampling error: they are checked against the profile within 3
    # standard errors (never tighter than 0.03), and the fit against what they showed.
    shown, se = _first_position(tmp_path / "s")
    assert shown == pytest.approx(0.6, abs=max(0.03, 3 * se))
    assert eagle_chat.positions[0] == pytest.approx(shown, abs=0.03)
    # what was written, the simulator serves ...
    with sim_server("--hardware", str(profile), model="meta-llama/Llama-3.1-8B-Instruct") as url:
        info = requests.get(f"{url}/sim/info", timeout=5).json()
    assert info["performance_model"]["compute_efficiency"] == pytest.approx(fitted.hardware.compute_efficiency)
    # ... and the model plans on
    plan = cli("plan", "--fleet", str(fleet), "--modes", "baseline", "--scenario", str(DATA / "calib-mix.toml"),
               "--requests", "40", "--concurrency", "4", "--hardware", str(profile), "--out", str(tmp_path),
               "--run-id", "p")
    assert plan.returncode == 0, plan.stdout + plan.stderr


def test_calibrate_and_profiles_refuse_bad_input_in_one_line(tmp_path):
    missing = cli("calibrate", str(tmp_path / "nope"), "--out", str(tmp_path / "x.toml"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    assert "not a folder" in missing.stderr and "Traceback" not in missing.stderr
    empty = cli("calibrate", str(tmp_path), "--out", str(tmp_path / "x.toml"))
    assert empty.returncode == 2 and "no run here" in empty.stderr, empty.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[hardware]\nbase = \"h100-sxm\"\ncompute_efficiency = -1\n\n[acceptance.eagle.chat]\n"
                   "positions = [1.5]\n")
    sim = cli("sim", "meta-llama/Llama-3.1-8B-Instruct", "--hardware", str(bad), "--port", "1")
    assert sim.returncode == 2, sim.stdout + sim.stderr
    assert "hardware.compute_efficiency" in sim.stderr and "acceptance.eagle.chat.positions" in sim.stderr
    assert "Traceback" not in sim.stderr
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(FLEET.replace("perturbed.toml", "absent.toml"))
    plan = cli("plan", "--fleet", str(fleet), "--requests", "10", "--out", str(tmp_path))
    assert plan.returncode == 2 and "absent.toml" in plan.stderr and "does not exist" in plan.stderr, plan.stderr
