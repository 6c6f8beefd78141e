"""How many drafted tokens the target accepts: per method, per domain, per position.

A profile is the conditional acceptance of draft position i given positions 1..i-1 were
accepted (vLLM stops at the first rejection). The domain is read from the request's own text,
never from a hint, so a Rust prompt behaves like code whoever sends it.
"""

from __future__ import annotations

import re

import numpy as np

DOMAINS = ("chat", "code", "sql", "summarize", "structured")

# Conditional per-position acceptance. Fitted to published single-stream figures
# (Llama-3.3-70B target at TP4 on H100, K=5; bench/calibrate.py prints them side by side):
# - draft_model (Llama-3.2-1B) on English chat: 3.4 tokens per verification pass -> a ≈ 0.765;
#   on Rust/C++ code 0.82x, i.e. ≈ 1.2 tokens per pass -> a ≈ 0.17;
#   on summarisation 1.5x at QPS 1 (vLLM blog, 4xH100) -> a ≈ 0.55.
# - medusa heads: head-1 top-1 acceptance 68.4% on code, decaying per head (Medusa paper, Table 2
#   shape); EAGLE: 2.7-3.5x on 70B chat (EAGLE paper) -> a ≈ 0.85.
# - ngram: copies from the prompt; 2.8x on summarisation at QPS 1 (vLLM blog) -> a ≈ 0.68, and
#   little to copy in open chat.
PROFILES: dict[str, dict[str, tuple[float, ...]]] = {
    "draft_model": {
        "chat": (0.765,), "code": (0.17,), "sql": (0.45,), "summarize": (0.55,), "structured": (0.6,),
    },
    "medusa": {
        "chat": (0.70, 0.60, 0.50, 0.42, 0.35), "code": (0.684, 0.55, 0.45, 0.40, 0.35),
        "sql": (0.65, 0.52, 0.44, 0.38, 0.32), "summarize": (0.66, 0.55, 0.46, 0.40, 0.34),
        "structured": (0.72, 0.62, 0.52, 0.45, 0.38),
    },
    "eagle": {
        "chat": (0.85,), "code": (0.80,), "sql": (0.78,), "summarize": (0.80,), "structured": (0.84,),
    },
    "eagle3": {
        "chat": (0.88,), "code": (0.84,), "sql": (0.82,), "summarize": (0.84,), "structured": (0.87,),
    },
    "mtp": {
        "chat": (0.85,), "code": (0.82,), "sql": (0.80,), "summarize": (0.82,), "structured": (0.85,),
    },
    "mlp_speculator": {
        "chat": (0.65, 0.55, 0.45), "code": (0.55, 0.45, 0.38), "sql": (0.55, 0.45, 0.38),
        "summarize": (0.6, 0.5, 0.42), "structured": (0.65, 0.55, 0.45),
    },
    "ngram": {
        "chat": (0.15,), "code": (0.35,), "sql": (0.30,), "summarize": (0.68,), "structured": (0.40,),
    },
    "suffix": {
        "chat": (0.20,), "code": (0.40,), "sql": (0.35,), "summarize": (0.70,), "structured": (0.45,),
    },
}
# Sampling at temperature T accepts less than greedy: acceptance is scaled by
# (1 - TEMPERATURE_PENALTY * min(T, 1)). Speculative-sampling papers report 10-20% lower
# acceptance at T=1 than at T=0 (Leviathan et al. 2023, Table 3); 0.15 is the middle.
TEMPERATURE_PENALTY = 0.15

_CODE = re.compile(
    r"\bfn\s+\w+|\blet\s+mut\b|\bimpl\b|#include\s*<|\btemplate\s*<|std::|\bdef\s+\w+\(|"
    r"\bclass\s+\w+|\breturn\b.*;|=>|\bpub\s+(fn|struct)"
)
_SQL = re.compile(r"\bSELECT\b.*\bFROM\b|\bJOIN\b|\bGROUP BY\b|\bOVER\s*\(", re.S)
_STRUCTURED = re.compile(r"\bJSON\b|\bjson\b|\"\w+\"\s*:")
_SUMMARIZE = re.compile(r"\b(summari[sz]e|summary|tl;dr|key points)\b", re.I)


def classify_domain(text: str) -> str:
    """The domain a request's text belongs to, from its content alone."""
    head = text[:4000]
    if _SQL.search(head):
        return "sql"
    if len(_CODE.findall(head)) >= 2:
        return "code"
    if _SUMMARIZE.search(head) and len(text) > 2000:
        return "summarize"
    if _STRUCTURED.search(head):
        return "structured"
    return "chat"


def position_alphas(method: str, domain: str, k: int, temperature: float = 0.0) -> np.ndarray:
    """Conditional acceptance for positions 1..k (the last listed value repeats)."""
    profile = PROFILES[method][domain]
    alphas = np.array([profile[min(i, len(profile) - 1)] for i in range(k)], dtype=np.float64)
    return alphas * (1.0 - TEMPERATURE_PENALTY * min(max(temperature, 0.0), 1.0))


def expected_tokens_per_pass(alphas: np.ndarray) -> float:
    """Mean tokens a verification pass emits: the bonus token plus the accepted prefix."""
    return 1.0 + float(np.cumprod(alphas).sum())


def draw_accepted(rng: np.random.Generator, alphas: np.ndarray) -> np.ndarray:
    """Accepted draft tokens for each row of `alphas` (one row per sequence, one column per
    position): the length of the run of successes from position 1."""
    hits = rng.random(alphas.shape) < alphas
    return np.cumprod(hits, axis=1).sum(axis=1)
