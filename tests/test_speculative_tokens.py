"""The number of speculative tokens as part of the answer (issue 42): `--num-speculative-tokens
2,3,5` makes each speculating mode one mode per K, each its own entry, curve and place in the
decision, on `plan` (and on every command that provisions a fleet)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from cluster import FleetError
from cluster.fleet import load_fleet, with_speculative_tokens
from tests.conftest import cli


def test_each_speculating_mode_becomes_one_mode_per_k_and_the_baseline_stays_one():
    spec, _ = load_fleet("local-sim")
    fleet, modes = with_speculative_tokens(spec, ["baseline", "eagle", "ngram"], [2, 4])
    assert modes == ["baseline", "eagle-k2", "eagle-k4", "ngram-k2", "ngram-k4"]
    assert list(fleet.modes) == modes
    assert [fleet.modes[m].num_speculative_tokens for m in modes[1:]] == [2, 4, 2, 4]
    assert fleet.modes["eagle-k4"].model == spec.modes["eagle"].model
    assert fleet.modes["ngram-k2"].prompt_lookup_max == spec.modes["ngram"].prompt_lookup_max
    assert fleet.speculative_config("eagle-k2").num_speculative_tokens == 2   # what the replica is started with
    with pytest.raises(FleetError, match="none of the modes baseline speculates"):
        with_speculative_tokens(spec, ["baseline"], [3])


@pytest.mark.parametrize("value,said", [("3,2", "the numbers must increase, got '3,2'"),
                                        ("0", "expected a positive integer, got '0'"),
                                        ("40", "expected at most 32 speculative tokens a step, got 40")])
def test_a_bad_k_is_one_line_and_exit_2(tmp_path, value, said):
    out = cli("plan", "--num-speculative-tokens", value, "--out", str(tmp_path))
    assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_running_fleet_keeps_its_k(tmp_path):
    out = cli("run", "--endpoints", "eagle=http://127.0.0.1:9", "--num-speculative-tokens", "2,3",
              "--out", str(tmp_path))
    assert out.returncode == 2 and "a running fleet (--endpoints) serves the K it was started with" in out.stderr


def test_a_plan_over_k_gives_each_k_its_curve_and_names_the_k_it_would_deploy(tmp_path):
    out = cli("plan", "--modes", "baseline,eagle", "--num-speculative-tokens", "2,5", "--rate-scale", "0.5",
              "--requests", "120", "--out", str(tmp_path), "--run-id", "k")
    assert out.returncode == 0, out.stdout + out.stderr
    sweep = pq.read_table(tmp_path / "k" / "sweep.parquet")
    assert set(sweep["mode"].to_pylist()) == {"baseline", "eagle-k2", "eagle-k5"}
    report = (tmp_path / "k" / "report.md").read_text()
    assert "## eagle-k2" in report and "## eagle-k5" in report
    decision = next(line for line in report.splitlines() if line.startswith("**Decision:"))
    assert "deploy eagle-k" in decision, decision
