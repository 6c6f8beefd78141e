"""One stream at a time over HTTP, on real corpora: the single-stream cells the calibration names
(the draft model on chat and on Rust, Medusa on Python, EAGLE-3's TPOT), measured through live
simulator servers as a client would see them.

    python bench/single_stream_corpora.py        (about 5 minutes; one core, mostly idle)
    python bench/single_stream_corpora.py --limit 2 --cells 1   (the suite's tiny run)

Each cell starts the baseline's server and the mode's (`python -m cluster.sim`, loopback, at
--time-scale 0.2), sends each corpus prompt through /v1/chat/completions (streamed, greedy, at most
256 tokens, usage included), and takes each request's TPOT = (last content chunk - first) /
(completion tokens - 1), in simulated time. The speedup is the mean over requests of the
baseline's TPOT over the mode's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

from cluster.sim.calibration import DRAFT_1B, LLAMA8, LLAMA70
from scenarios.corpus import items

ROOT = Path(__file__).resolve().parents[1]
SCALE = 0.2
L70, L8 = LLAMA70, LLAMA8
DRAFT = {"method": "draft_model", "model": DRAFT_1B, "num_speculative_tokens": 5}
MEDUSA = {"method": "medusa", "model": "medusa-heads", "num_speculative_tokens": 5}
EAGLE3 = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 4}
CHAT_CATEGORIES = ("writing", "roleplay", "reasoning", "stem", "humanities")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(model: str, tp: int, spec: dict | None) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    argv = [sys.executable, "-m", "cluster.sim", model, "--port", str(port), "-tp", str(tp),
            "--time-scale", str(SCALE), "--max-model-len", "8192"]
    if spec:
        argv += ["--speculative-config", json.dumps(spec)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc, port
        except OSError:
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGTERM)
    raise RuntimeError(f"the simulator for {model} did not start")


def _tpot_s(port: int, model: str, text: str) -> float:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 256,
                       "temperature": 0.0, "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    first = last = 0.0
    tokens = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("choices") and event["choices"][0].get("delta", {}).get("content"):
                last = time.perf_counter()
                first = first or last
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
    return (last - first) / (tokens - 1) / SCALE


LIMIT: int | None = None   # --limit: at most this many prompts a cell


def cell(label: str, texts: list[str], model: str, tp: int, spec: dict) -> None:
    texts = texts[:LIMIT] if LIMIT else texts
    tpots = {}
    for name, config in (("baseline", None), ("mode", spec)):
        proc, port = _start(model, tp, config)
        try:
            tpots[name] = np.array([_tpot_s(port, model, t) for t in texts])
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
    base, mode = tpots["baseline"], tpots["mode"]
    print(f"{label:52s} n={len(texts):3d}  speedup {np.mean(base / mode):.2f}x  TPOT {1e3 * mode.mean():.2f} ms "
          f"(baseline {1e3 * base.mean():.2f} ms)", flush=True)


def main() -> int:
    global LIMIT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, help="at most N prompts a cell (default: all)")
    ap.add_argument("--cells", type=int, help="only the first N cells (default: all five)")
    args = ap.parse_args()
    LIMIT = args.limit
    start = time.perf_counter()
    mt = items("mt-bench")
    cells = [
        ("draft 1B -> 70B TP4 K=5, MT-Bench (80)", [it.text for it in mt], L70, 4, DRAFT),
        ("draft 1B -> 70B TP4 K=5, MT-Bench's chat categories",
         [it.text for it in mt if it.category in CHAT_CATEGORIES], L70, 4, DRAFT),
        ("draft 1B -> 70B TP4 K=5, HumanEval-Rust (first 40)", [it.text for it in items("humaneval-rust")[:40]],
         L70, 4, DRAFT),
        ("Medusa-5, 70B TP4, HumanEval (first 40)", [it.text for it in items("humaneval")[:40]], L70, 4, MEDUSA),
        ("EAGLE-3 K=4, Llama-3.1-8B, MT-Bench (80)", [it.text for it in mt], L8, 1, EAGLE3),
    ]
    for args_ in cells[:args.cells]:
        cell(*args_)
    print(f"{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
