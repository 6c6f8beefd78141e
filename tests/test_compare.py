"""`loadtest compare BASE NEW` as a release pipeline uses it: runs of the same trace against a
server made slower (exit 1, the regression named), one made faster (exit 0, better), and runs
that cannot be compared (exit 2)."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from analysis.stats import paired_quantile_ratio_ci
from scenarios.spec import load_scenario
from scenarios.trace import build_trace, write_trace
from tests.conftest import DATA, cli, sim_server

pytestmark = pytest.mark.e2e
TP4 = ("--tensor-parallel-size", "4", "--served-model-name", "m")


def _run(url: str, tmp_path, run_id: str, mode: str = "baseline"):
    out = cli("run", "--endpoints", f"{mode}={url}", "--scenario", str(DATA / "tiny-mix.toml"), "--requests",
              "40", "--out", str(tmp_path), "--run-id", run_id)
    assert out.returncode == 0, out.stdout + out.stderr
    return str(tmp_path / run_id)


@pytest.mark.serial   # latencies of three servers compared: none may share a core with another test
def test_compare_flags_a_slower_server_passes_a_faster_one_and_refuses_unrelated_runs(tmp_path):
    with sim_server(*TP4, "--time-scale", "0.5") as url:
        base = _run(url, tmp_path, "base")
    with sim_server(*TP4, "--time-scale", "0.8") as url:    # every duration 60% longer
        slower = _run(url, tmp_path, "slower")
    with sim_server(*TP4, "--time-scale", "0.3") as url:    # 40% shorter
        faster = _run(url, tmp_path, "faster")
        other = _run(url, tmp_path, "other", mode="eagle")

    worse = cli("compare", base, slower, "--metric", "e2e_p90", "--metric", "tpot_p50")
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "gate failed: baseline/all e2e_p90 regressed +" in worse.stdout
    assert "gate failed: baseline/all tpot_p50 regressed +" in worse.stdout
    # a p99 of 40 requests cannot be bounded (it needs 368): neither a pass nor a fail, and said; the
    # typical request's change, which 40 pairs do bound, fails the gate
    tail = cli("compare", base, slower, "--metric", "e2e_p99")
    assert tail.returncode == 1, tail.stdout + tail.stderr
    said = " ".join(tail.stdout.split())
    assert "gate failed: baseline/all the typical request's e2e_per_request regressed +" in said
    assert "e2e_p99 regressed" not in said
    assert "figures had too few requests in both runs to judge (neither passed nor failed)" in said
    assert "a p99 368" in said   # the rule, stated

    lenient = cli("compare", base, slower, "--metric", "tpot_p50", "--max-regression", "100")
    assert lenient.returncode == 0, lenient.stdout   # significantly worse, but within 100%
    assert "worse (within threshold)" in lenient.stdout

    better = cli("compare", base, faster, "--metric", "e2e_p50", "--metric", "e2e_p90")
    assert better.returncode == 0, better.stdout + better.stderr
    assert "better" in better.stdout and "gate failed" not in better.stdout
    assert "no metric regressed beyond 5% with significance" in better.stdout

    unrelated = cli("compare", base, other)
    assert unrelated.returncode == 2, unrelated.stdout + unrelated.stderr
    assert "the runs have no mode in common (BASE: baseline; NEW: eagle)" in unrelated.stderr
    itself = cli("compare", base, base)
    assert itself.returncode == 0, itself.stdout + itself.stderr
    assert "paired by request: the same 40 requests in both" in itself.stdout.replace("\n", " ")
    elsewhere = tmp_path / "elsewhere"   # the same records beside another scenario's trace
    shutil.copytree(base, elsewhere)
    chat = build_trace(load_scenario("chat")[0], requests=40, seed=7)
    write_trace(chat, elsewhere / "trace.parquet", "chat", "0" * 64)
    unpaired = cli("compare", base, str(elsewhere))
    assert unpaired.returncode == 2 and "\n" not in unpaired.stderr.strip()
    assert "replayed different traces: no request is the same in both" in unpaired.stderr
    missing = cli("compare", base, str(tmp_path / "nope"))
    assert missing.returncode == 2 and "nope: not a run folder (no requests/)" in missing.stderr
    bad = cli("compare", base, slower, "--metric", "e2e_max")
    assert bad.returncode == 2 and "--metric 'e2e_max': expected LATENCY_pNN" in bad.stderr

    # the same runs in one summary: every run's rows in one file, told apart by run_id
    both = cli("report", base, slower, faster, "--out", str(tmp_path / "all"))
    assert both.returncode == 0, both.stdout + both.stderr
    combined = pq.read_table(tmp_path / "all" / "summary.parquet")
    assert set(combined["run_id"].to_pylist()) == {"base", "slower", "faster"}
    p99 = {r["run_id"]: r["value"] for r in combined.to_pylist()
           if (r["mode"], r["tenant"], r["metric"], r["statistic"]) == ("baseline", "all", "e2e_ms", "p99")}
    assert p99["faster"] < p99["base"] < p99["slower"]
    side_by_side = (tmp_path / "all" / "report.md").read_text()
    assert all(f"| {run} | baseline |" in side_by_side for run in ("base", "slower", "faster"))


def test_the_paired_percentile_ratio_against_numpy():
    rng = np.random.default_rng(4)
    base = rng.lognormal(6, 0.5, 400)
    new = base * rng.lognormal(0.2, 0.1, 400)
    r = paired_quantile_ratio_ci(base, new, 99, resamples=500)
    assert r.value == pytest.approx(np.percentile(new, 99) / np.percentile(base, 99))
    idx = np.random.default_rng(2026).integers(0, 400, size=(500, 400))
    boot = np.percentile(new[idx], 99, axis=1) / np.percentile(base[idx], 99, axis=1)
    assert (r.low, r.high) == (pytest.approx(np.percentile(boot, 2.5)), pytest.approx(np.percentile(boot, 97.5)))
    assert r.significant and r.low > 1
