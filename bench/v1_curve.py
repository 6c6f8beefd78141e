"""vLLM V1's load curve through the live simulator servers: SpecDecode-Bench's Llama-3-70B at TP4
on H100, K=3, CNN/DailyMail-shaped summaries (arXiv 2601.11580, Fig. 1), generated-token
throughput over no speculation at batch 1, 16, 64 and 128, measured by a closed-loop sweep over
HTTP and printed beside the published curve.

    python bench/v1_curve.py                                     # the full curve, about 7.5 min
    python bench/v1_curve.py --modes eagle --concurrency 1 --level-duration 2 --requests 4   # a smoke run

Only the batch-1 points were used to fit any constant (the acceptance on summaries); the rest are
the model's predictions. The model itself is held to the curve in virtual time by
tests/test_calibration.py, and the servers to the model under batch by
tests/test_sweep.py::test_closed_loop_from_a_few_streams_to_a_full_batch_is_what_the_model_predicts;
this measures the two together, as a user of the simulator would see them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from analysis.reader import read_requests  # noqa: E402
from cluster.sim.calibration import CURVES, V1_BATCHES  # noqa: E402

MODES = {"ngram": "70B TP4 n-gram", "eagle": "70B TP4 EAGLE", "draft": "70B TP4 draft 1B"}
FLEET = ROOT / "tests" / "data" / "v1-70b.toml"       # the fleet at twice real time
SCENARIO = ROOT / "tests" / "data" / "cnn-dm.toml"


def tokens_per_s_at_full_batch(rows: list[dict], level_s: float) -> float:
    """Generated tokens per second while the level held its N requests in flight: from the first
    completion (the first round's prefill done) to the end of sending, counted chunk by chunk."""
    start = min(r["last_token_ns"] for r in rows) / 1e9
    stop = min(r["sent_ns"] for r in rows) / 1e9 + level_s
    tokens = 0
    for r in rows:
        times = r["sent_ns"] / 1e9 + np.cumsum(np.asarray(r["itl_ms"], dtype=np.float64)) / 1e3
        inside = (times > start) & (times <= stop)
        tokens += int(np.asarray(r["chunk_tokens"])[inside].sum())
    return tokens / (stop - start) if stop > start else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default=",".join(map(str, V1_BATCHES)),
                    help="the batches measured (default the published ones: 1,16,64,128)")
    ap.add_argument("--level-duration", type=float, default=20.0,
                    help="wall seconds each level sends for (default 20; shorter measures the largest batch badly)")
    ap.add_argument("--requests", type=int, default=600, help="requests per level (default 600)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"the curves measured (default {','.join(MODES)})")
    a = ap.parse_args()
    batches = [int(b) for b in a.concurrency.split(",")]
    modes = {m: MODES[m] for m in a.modes.split(",")}
    published = {c.name: dict(zip(V1_BATCHES, c.published, strict=True)) for c in CURVES}
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-m", "loadtest", "sweep", "--fleet", str(FLEET), "--scenario",
                              str(SCENARIO), "--requests", str(a.requests), "--concurrency", a.concurrency,
                              "--level-duration", str(a.level_duration), "--modes", ",".join(["baseline", *modes]),
                              "--keep-going", "--out", tmp,
                              "--run-id", "v1"], cwd=ROOT, capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stdout[-3000:], out.stderr[-3000:], file=sys.stderr)
            return out.returncode
        print(f"closed loop over HTTP, {a.level_duration:g} s per level; measured (published), "
              "generated tokens/s over the baseline's")
        print(f"{'curve':<20}" + "".join(f"{'batch ' + str(b):>18}" for b in batches))
        for mode, curve in modes.items():
            cells = []
            for b in batches:
                records = read_requests(Path(tmp) / "v1" / "levels" / f"concurrency-{b}")
                ok = records.filter(pc.equal(records["status"], "ok"))
                rate = {m: tokens_per_s_at_full_batch(ok.filter(pc.equal(ok["mode"], m)).to_pylist(),
                                                      a.level_duration) for m in ("baseline", mode)}
                pub = published[curve].get(b)
                cells.append(f"{rate[mode] / rate['baseline']:.2f}" + (f" ({pub:.2f})" if pub else ""))
            print(f"{curve:<20}" + "".join(f"{c:>18}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
