"""The published figures the performance model must reproduce, and how the model computes each.

Used by bench/calibrate.py (prints them) and tests/test_calibration.py (checks them). Single-
stream rows come from the pure step-time functions; the load rows run the engine's scheduler
offline (cluster/sim/offline.py) on the same request shapes for every mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cluster.sim.acceptance import expected_tokens_per_pass, position_alphas
from cluster.sim.offline import SimRequest, poisson_requests, simulate
from cluster.sim.perf_model import Deployment, proposer_weight_bytes, step_s
from cluster.sim.profiles import HARDWARE, model_profile
from cluster.speculation import parse_speculative_config

TARGET = "meta-llama/Llama-3.3-70B-Instruct"
DRAFT = "meta-llama/Llama-3.2-1B-Instruct"
CONTEXT = 1024  # tokens of context per sequence for single-stream rows


def deployment(method: str | None, k: int = 5, tp: int = 4) -> Deployment:
    hw, target = HARDWARE["h100-sxm"], model_profile(TARGET)
    if method is None:
        return Deployment(hw, target, tp)
    cfg: dict = {"method": method, "num_speculative_tokens": k}
    if method == "ngram":
        cfg |= {"prompt_lookup_min": 2, "prompt_lookup_max": 4}
    else:
        cfg["model"] = DRAFT if method == "draft_model" else f"{method}-heads"
    return Deployment(hw, target, tp, parse_speculative_config(cfg, tp),
                      model_profile(DRAFT) if method == "draft_model" else None)


def single_stream_speedup(method: str, domain: str, k: int = 5) -> float:
    """Tokens per second of one stream under `method` over the baseline's, same context."""
    spec, base = deployment(method, k), deployment(None)
    tokens = expected_tokens_per_pass(position_alphas(method, domain, k))
    return tokens * step_s(base, 1, CONTEXT) / step_s(spec, 1, CONTEXT)


def tokens_per_pass(method: str, domain: str, k: int = 5) -> float:
    return expected_tokens_per_pass(position_alphas(method, domain, k))


def _paired(base: list, mode: list) -> float:
    return float(np.exp(np.mean([np.log(b.e2e_s / m.e2e_s) for b, m in zip(base, mode, strict=True)])))


# CNN/DailyMail-like summarisation: ~1,500-token articles, ~256-token summaries.
SUMMARY_PROMPT, SUMMARY_OUTPUT = 1500, 256


def low_qps_speedup(method: str, qps: float = 1.0, n: int = 200) -> float:
    reqs = poisson_requests(qps, n, SUMMARY_PROMPT, SUMMARY_OUTPUT, "summarize", seed=1)
    return _paired(simulate(deployment(None), reqs), simulate(deployment(method), reqs))


def saturated_speedup(method: str, concurrency: int = 256, n: int = 768) -> float:
    """Output tokens/s of `method` over the baseline's with every batch slot busy (closed loop)."""
    reqs = [SimRequest(0.0, SUMMARY_PROMPT, SUMMARY_OUTPUT, "summarize") for _ in range(n)]
    spans = []
    for dep in (deployment(None), deployment(method)):
        res = simulate(dep, reqs, max_num_seqs=concurrency)
        spans.append(max(r.e2e_s for r in res))
    return spans[0] / spans[1]


@dataclass(frozen=True)
class Row:
    case: str
    published: str
    low: float
    high: float
    compute: Callable[[], float]
    unit: str = "x"

    def check(self) -> tuple[float, bool]:
        value = self.compute()
        return value, self.low <= value <= self.high


def _tol(value: float, rel: float) -> tuple[float, float]:
    return value * (1 - rel), value * (1 + rel)


ROWS: list[Row] = [
    Row("draft 1B K=5, English chat: speedup", "2.3x", *_tol(2.3, 0.10),
        lambda: single_stream_speedup("draft_model", "chat")),
    Row("draft 1B K=5, English chat: tokens per pass", "3.4", *_tol(3.4, 0.10),
        lambda: tokens_per_pass("draft_model", "chat"), unit=""),
    Row("draft 1B K=5, Rust/C++ code: speedup", "0.82x", *_tol(0.82, 0.10),
        lambda: single_stream_speedup("draft_model", "code")),
    Row("Medusa-5 on code: speedup", "2.1x", *_tol(2.1, 0.10), lambda: single_stream_speedup("medusa", "code")),
    Row("Medusa-5 on code: head-1 acceptance", "68.4%", *_tol(68.4, 0.10),
        lambda: 100 * float(position_alphas("medusa", "code", 5)[0]), unit="%"),
    Row("draft model, summarisation, 1 QPS", "1.5x", *_tol(1.5, 0.15), lambda: low_qps_speedup("draft_model")),
    Row("ngram, summarisation, 1 QPS", "2.8x", *_tol(2.8, 0.15), lambda: low_qps_speedup("ngram")),
    Row("draft model, summarisation, saturated", "0.71x", *_tol(0.71, 0.20),
        lambda: saturated_speedup("draft_model")),
    Row("ngram, summarisation, saturated", "0.56x", *_tol(0.56, 0.20), lambda: saturated_speedup("ngram")),
    Row("EAGLE K=5 on chat: speedup", "2.7x-3.5x", 2.7, 3.5, lambda: single_stream_speedup("eagle", "chat")),
    Row("Medusa-5 heads memory per GPU (TP4, shared LM head)", "< 500 MB", 0.0, 500.0,
        lambda: proposer_weight_bytes(deployment("medusa")) / 4 / 1e6, unit=" MB"),
]
