"""How many drafted tokens the target accepts: per method and domain, per position, per request.

An `Acceptance` is a distribution, not a constant:
- `positions`: the conditional acceptance of draft position i given positions 1..i-1 were
  accepted (vLLM stops at the first rejection); the last value repeats past the list's end;
- `spread`: requests differ strongly, so each request draws its own offset z ~ Normal(0, spread)
  on the logit of every position's acceptance;
- `match`: the chance that a step proposes at all. vLLM V1's n-gram (and suffix) proposer
  proposes nothing for a sequence whose recent tokens match nothing in its context, and that
  sequence then verifies one token, not K+1.
Sampling at temperature T lowers every position's acceptance.

Each value says where it comes from: FITTED (to a published figure, a row of bench/calibrate.py's
"fitted" table), SOURCED (read from a measurement and used as is) or ASSUMED (what it was
chosen to match). The domain is read from the request's own text (cluster/sim/domains.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.sim.domains import DOMAINS


@dataclass(frozen=True)
class Acceptance:
    positions: tuple[float, ...]
    spread: float = 0.0
    match: float = 1.0

    def __post_init__(self) -> None:
        if not self.positions or not all(0.0 <= a < 1.0 for a in self.positions):
            raise ValueError(f"acceptance per position must be in [0, 1): {self.positions}")
        if self.spread < 0 or not 0.0 <= self.match <= 1.0:
            raise ValueError(f"spread must be >= 0 and match in [0, 1]: {self.spread}, {self.match}")


# Requests differ, and by how much depends on the method. SpecDecode-Bench (arXiv 2601.11580)
# per-request mean accepted lengths: EAGLE on Llama-3.1-8B, CNN/DailyMail, K=3, p10/p50/p90 =
# 2.03/2.33/2.61 (from its published per-position data), which a logit spread of 0.34 around a flat
# 0.645 reproduces: SOURCED. Its Fig. 7 (Llama-3-70B, CNN/DM, large K) shows the draft model's
# interquartile range at 0.89-1.17 of the median and n-gram's at 0.80-1.33: ASSUMED 0.5 and 1.0,
# chosen to give about those relative ranges.
SPREAD = {"eagle": 0.34, "eagle3": 0.34, "mtp": 0.34, "medusa": 0.34, "mlp_speculator": 0.34,
          "draft_model": 0.5, "ngram": 1.0, "suffix": 1.0}

# Per-position decay. SOURCED: vLLM's acceptance-length test (tests/v1/spec_decode/
# test_acceptance_length.py; Llama-3.1-8B-Instruct with its EAGLE-3 head, MT-Bench, K=3, greedy)
# measures acceptance at positions 1/2/3 of 0.730/0.521/0.355, i.e. conditional 0.730, 0.714,
# 0.681: each position keeps about 0.97 of the previous one's conditional acceptance.
EAGLE_DECAY = 0.97
# Medusa's heads decay much faster: each head predicts further ahead from the same hidden state.
# SOURCED shape: Medusa paper (Cai et al. 2024, Fig. 2/Table 1) top-1 accuracy falls ~0.1 per head
# from head 1 to head 5. ASSUMED: 0.85 of the previous head's conditional acceptance.
MEDUSA_DECAY = 0.85


def _decaying(first: float, decay: float, k: int = 5) -> tuple[float, ...]:
    return tuple(round(first * decay**i, 4) for i in range(k))


# Profiles. Method by method:
# - draft_model (a small model of the target's family, e.g. Llama-3.2-1B for Llama-3.3-70B):
#   per-position acceptance roughly constant (the draft is a full model; Leviathan et al. 2023
#   model it as i.i.d.). chat FITTED to 3.4 tokens per pass at K=5 (English chat); code FITTED to
#   0.82x single-stream on Rust/C++; summarize FITTED to SpecDecode-Bench Fig. 1 (Llama-3-70B,
#   CNN/DailyMail, K=3, batch 1: 2.10x). sql, structured ASSUMED between code and chat.
# - eagle: summarize FITTED to SpecDecode-Bench Fig. 1 (batch 1: 1.85x); chat FITTED to the EAGLE
#   paper's 2.7-3.5x on 70B chat (the row's middle); code, sql, structured ASSUMED from chat less
#   the draft model's chat-to-code gap scaled down (EAGLE reads the target's own features).
# - eagle3: chat SOURCED from vLLM's test above (0.730 at position 1); other domains ASSUMED eagle's
#   relative to chat.
# - mtp: ASSUMED equal to eagle3 (a trained head on the target's own hidden states).
# - medusa: code position 1 SOURCED (head-1 acceptance 68.4% on code, the seed's row); other domains
#   ASSUMED close to it (heads are trained on ShareGPT chat).
# - mlp_speculator: ASSUMED below medusa (IBM's speculators report 2x on chat at K=3-4).
# - ngram, suffix: acceptance given a match, and the chance of a match. summarize FITTED to
#   SpecDecode-Bench Fig. 1 (batch 1: 1.28x) with the match rate ASSUMED 0.3; others ASSUMED from
#   Spec-Bench's prompt-lookup ordering (summarisation 2.43x > chat 1.64x > QA 1.14x, Vicuna-7B).
def _profiles(method: str, first: dict[str, float | tuple[float, ...]], decay: float | None = None,
              match: dict[str, float] | None = None) -> dict[str, Acceptance]:
    """One method's profile per domain: a listed tuple as is, else the first position's value,
    decaying per position when `decay` is given (flat otherwise), with the method's spread."""
    def positions(v: float | tuple[float, ...]) -> tuple[float, ...]:
        return v if isinstance(v, tuple) else _decaying(v, decay) if decay else (v,)
    return {d: Acceptance(positions(v), SPREAD[method], (match or {}).get(d, 1.0)) for d, v in first.items()}


PROFILES: dict[str, dict[str, Acceptance]] = {
    "draft_model": _profiles("draft_model", {"chat": 0.765, "code": 0.188, "sql": 0.45, "summarize": 0.82,
                                             "structured": 0.6}),
    "eagle": _profiles("eagle", {"chat": 0.829, "code": 0.76, "sql": 0.74, "summarize": 0.579, "structured": 0.80},
                       EAGLE_DECAY),
    "eagle3": _profiles("eagle3", {"chat": (0.730, 0.714, 0.681, 0.66, 0.64), "code": 0.68, "sql": 0.66,
                                   "summarize": 0.62, "structured": 0.71}, EAGLE_DECAY),
    "medusa": _profiles("medusa", {"chat": 0.70, "code": 0.684, "sql": 0.65, "summarize": 0.66, "structured": 0.72},
                        MEDUSA_DECAY),
    "mlp_speculator": _profiles("mlp_speculator", {"chat": 0.65, "code": 0.55, "sql": 0.55, "summarize": 0.6,
                                                   "structured": 0.65}, MEDUSA_DECAY),
    "ngram": _profiles("ngram", {"chat": 0.35, "code": 0.5, "sql": 0.5, "summarize": 0.685, "structured": 0.5},
                       match={"chat": 0.15, "code": 0.3, "sql": 0.3, "summarize": 0.3, "structured": 0.35}),
}
PROFILES["mtp"] = dict(PROFILES["eagle3"])
PROFILES["suffix"] = {d: Acceptance(a.positions, a.spread, min(1.0, a.match * 1.2))
                      for d, a in PROFILES["ngram"].items()}
assert all(set(p) == set(DOMAINS) for p in PROFILES.values())

# Sampling at temperature T accepts less than greedy: acceptance is scaled by
# (1 - TEMPERATURE_PENALTY * min(T, 1)). SOURCED range: speculative-sampling papers report 10-20%
# lower acceptance at T=1 than at T=0 (Leviathan et al. 2023, Table 3); 0.15 is the middle.
TEMPERATURE_PENALTY = 0.15

# Gauss-Hermite nodes for the expectation over the per-request spread.
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(24)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()

Table = dict[str, dict[str, Acceptance]]


def profile(method: str, domain: str, table: Table | None = None) -> Acceptance:
    """A method's acceptance on a domain: the fleet's fitted table first, then the defaults."""
    if table and domain in table.get(method, {}):
        return table[method][domain]
    return PROFILES[method][domain]


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _alphas(acc: Acceptance, k: int, offset: np.ndarray | float, temperature: float) -> np.ndarray:
    base = np.array([acc.positions[min(i, len(acc.positions) - 1)] for i in range(k)], dtype=np.float64)
    logit_ = logit(base)
    z = np.asarray(offset, dtype=np.float64)[..., None]
    shifted = np.where(base > 0, 1.0 / (1.0 + np.exp(-(logit_ + z))), 0.0)
    return shifted * (1.0 - TEMPERATURE_PENALTY * min(max(temperature, 0.0), 1.0))


def request_alphas(rng: np.random.Generator, acc: Acceptance, k: int, temperature: float = 0.0) -> np.ndarray:
    """One request's conditional acceptance for positions 1..k, its own draw from the spread."""
    return _alphas(acc, k, rng.normal(0.0, acc.spread) if acc.spread else 0.0, temperature)


def mean_alphas(acc: Acceptance, k: int, temperature: float = 0.0) -> np.ndarray:
    """The median request's conditional acceptance (no offset)."""
    return _alphas(acc, k, 0.0, temperature)


def tokens_per_step(alphas: np.ndarray, match: float = 1.0) -> np.ndarray | float:
    """Mean tokens a step emits for conditional acceptance `alphas` (last axis = positions): the
    bonus token plus, where it proposed, the accepted prefix."""
    return 1.0 + match * np.cumprod(alphas, axis=-1).sum(axis=-1)


def expected_tokens_per_step(acc: Acceptance, k: int, temperature: float = 0.0) -> float:
    """Mean tokens per step over requests (the spread integrated out)."""
    per_node = tokens_per_step(_alphas(acc, k, acc.spread * _NODES, temperature), acc.match)
    return float(np.dot(_WEIGHTS, per_node))


def expected_tokens_per_pass(acc: Acceptance, k: int, temperature: float = 0.0) -> float:
    """Mean tokens per verification that had drafts (vLLM's mean acceptance length)."""
    return expected_tokens_per_step(Acceptance(acc.positions, acc.spread, 1.0), k, temperature)


def draw_accepted(rng: np.random.Generator, alphas: np.ndarray, drafted: np.ndarray | None = None) -> np.ndarray:
    """Accepted draft tokens for each row of `alphas` (one row per sequence, one column per
    position): the length of the run of successes from position 1 (0 where it drafted nothing)."""
    hits = rng.random(alphas.shape) < alphas
    accepted = np.cumprod(hits, axis=1).sum(axis=1)
    return accepted if drafted is None else np.where(drafted, accepted, 0)
