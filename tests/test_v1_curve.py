"""The simulator, served over HTTP and measured by a closed-loop sweep, reproduces vLLM V1's
load curve: SpecDecode-Bench's Llama-3-70B at TP4 on H100, K=3, CNN/DailyMail (arXiv
2601.11580, Fig. 1), generated-token throughput over no speculation at batch 1, 16, 64 and 128.
Only the batch-1 points were used to fit any constant (the acceptance on summaries); the rest
are the model's predictions, here checked through the live servers, not the offline model."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from analysis.reader import read_requests
from cluster.sim.calibration import CURVES, V1_BATCHES
from tests.conftest import DATA, ROOT, loadtest

pytestmark = pytest.mark.e2e
LEVEL_S = 20.0       # wall seconds each level sends for (the fleet runs at twice real time)
ARTIFACTS = ROOT / "tests" / "artifacts"
MODES = {"ngram": "70B TP4 n-gram", "eagle": "70B TP4 EAGLE", "draft": "70B TP4 draft 1B"}


def tokens_per_s_at_full_batch(rows: list[dict]) -> float:
    """Generated tokens per second while the level held its N requests in flight: from the first
    completion (the first round's prefill done) to the end of sending, counted chunk by chunk."""
    start = min(r["last_token_ns"] for r in rows) / 1e9
    stop = min(r["sent_ns"] for r in rows) / 1e9 + LEVEL_S
    tokens = 0
    for r in rows:
        times = r["sent_ns"] / 1e9 + np.cumsum(np.asarray(r["itl_ms"], dtype=np.float64)) / 1e3
        inside = (times > start) & (times <= stop)
        tokens += int(np.asarray(r["chunk_tokens"])[inside].sum())
    return tokens / (stop - start)


def test_closed_loop_throughput_over_http_follows_the_v1_curve(tmp_path):
    out = loadtest("sweep", "--fleet", str(DATA / "v1-70b.toml"), "--scenario", str(DATA / "cnn-dm.toml"),
                   "--requests", "600", "--concurrency", ",".join(map(str, V1_BATCHES)),
                   "--level-duration", str(LEVEL_S), "--keep-going", "--out", str(tmp_path), "--run-id", "v1",
                   timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    published = {c.name: c.published for c in CURVES}
    misses, lines = [], []
    for i, batch in enumerate(V1_BATCHES):
        records = read_requests(tmp_path / "v1" / "levels" / f"concurrency-{batch}")
        ok = records.filter(pc.equal(records["status"], "ok"))
        rate = {m: tokens_per_s_at_full_batch(ok.filter(pc.equal(ok["mode"], m)).to_pylist())
                for m in ("baseline", *MODES)}
        for mode, curve in MODES.items():
            measured, expected = rate[mode] / rate["baseline"], published[curve][i]
            lines.append(f"{mode} batch {batch}: {measured:.2f}x, published {expected:.2f}x")
            if not 0.8 <= measured / expected <= 1.2:
                misses.append(f"{mode} at batch {batch}: {measured:.2f}x, published {expected:.2f}x")
    ARTIFACTS.mkdir(exist_ok=True)      # what was measured, for the README (ignored by git)
    (ARTIFACTS / "v1-curve.txt").write_text("\n".join(lines) + "\n")
    assert not misses, misses
