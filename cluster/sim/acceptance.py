"""How many drafted tokens the target accepts: per method and subdomain, per position, per request.

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
chosen to match). The subdomain (a domain, or a finer kind of content within one: math,
translation, C/C++/Rust) is read from the request's own text (cluster/sim/domains.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.sim.domains import PARENT, SUBDOMAINS


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
# 0.681: each position keeps about 0.97 of the previous one's conditional acceptance. EAGLE's
# anchor decays so; EAGLE-3's own decay is fitted with its chain (ANCHORS, below).
EAGLE_DECAY = 0.97
# Medusa's heads decay much faster: each head predicts further ahead from the same hidden state.
# SOURCED shape: Medusa paper (Cai et al. 2024, Fig. 2/Table 1) top-1 accuracy falls ~0.1 per head
# from head 1 to head 5. ASSUMED: 0.85 of the previous head's conditional acceptance.
MEDUSA_DECAY = 0.85


def shifted(acc: Acceptance, z: float) -> Acceptance:
    """`acc` with every position's logit moved by `z` (a position that never accepts stays so)."""
    if z == 0:
        return acc
    moved = tuple(0.0 if a <= 0 else min(0.9999, float(1 / (1 + np.exp(-(np.log(a / (1 - a)) + z)))))
                  for a in acc.positions)
    return Acceptance(moved, acc.spread, acc.match)


def decaying(first: float, decay: float, k: int = 5) -> tuple[float, ...]:
    """`k` positions' conditional acceptance, from `first`, each `decay` of the one before."""
    return tuple(round(first * decay**i, 4) for i in range(k))


# Profiles. A method's acceptance is a chain profile on chat, per position, and each subdomain's
# offset from it on the logit of every position (cluster/sim/domains.py reads the subdomain from the
# request's text). Where the published figure is a tree's (EAGLE, EAGLE-3 and Medusa papers,
# Spec-Bench), cluster/sim/published.py says how it is read as a chain, and bench/fit_acceptance.py
# solves the offsets from it; calibration.py's "fitted" table holds each fit, its "predicted" table
# the figures none was chosen for.
#
# The anchor: one subdomain's chain profile per method, from a chain figure (vLLM's own where one is
# published). Chat follows from it and that subdomain's offset.
ANCHORS: dict[str, tuple[str, Acceptance]] = {
    # FITTED: vLLM issue #20780's mean acceptance length at K=2..7 (2.36, 2.79, 3.08, 3.32, 3.46,
    # 3.54; Llama-3.1-8B-Instruct with yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, batch 1, V1 chains; read
    # as MT-Bench, published.py says why), MT-Bench as the mixture of subdomains its questions are:
    # first 0.7706, decay 0.958.
    "eagle3": ("chat", Acceptance(decaying(0.7706, 0.958, 8), SPREAD["eagle3"])),
    # FITTED: SpecDecode-Bench Fig. 1 (Llama-3-70B TP4, CNN/DailyMail, K=3, batch 1: 1.85x), with
    # EAGLE_DECAY.
    "eagle": ("summarize", Acceptance(decaying(0.579, EAGLE_DECAY), SPREAD["eagle"])),
    # SOURCED: head-1 acceptance 68.4% on code (the seed's row; Medusa-5 on HumanEval-style Python);
    # MEDUSA_DECAY.
    "medusa": ("code", Acceptance(decaying(0.684, MEDUSA_DECAY), SPREAD["medusa"])),
    # FITTED: 3.4 tokens per pass at K=5 on English chat (the seed's row; Llama-3.2-1B drafting for a
    # 70B), flat per position (the draft is a whole model; Leviathan et al. 2023 model it i.i.d.).
    "draft_model": ("chat", Acceptance((0.765,), SPREAD["draft_model"])),
}


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


# Each subdomain's offset from chat on the logit: a number (FITTED to a published figure, or from
# two FITTED profiles), or the subdomain whose offset it takes (ASSUMED: no figure measured it).
# FITTED offsets, per method (bench/fit_acceptance.py solves them; the figures are in published.py):
# - eagle3: code, math, summarize to EAGLE-3's Table 1, LLaMA-Instruct 3.1 8B, T=0 (τ: MT-bench 6.13,
#   HumanEval 6.74, GSM8K 6.23, CNN/DM 5.34; tree depth 8); translation to Spec-Bench's EAGLE-3 row
#   (Vicuna-13B: translation 2.36x over MT-Bench 3.48x).
# - eagle: code, math, summarize to EAGLE-3's Table 1, EAGLE on Vicuna 13B, T=0 (τ 3.98, 4.39, 3.97,
#   3.52; depth 5); translation to Spec-Bench, Vicuna-7B (1.77x over 2.45x).
# - medusa: code, math, summarize to EAGLE-3's Table 1, Medusa on Vicuna 13B (τ 2.59, 2.78, 2.64,
#   2.09; depth 5); structured to the Medusa paper's per-category figure (Vicuna-7B, extraction 3.62x
#   over 2.67x, the mean of writing, roleplay, reasoning, STEM and humanities); translation to
#   Spec-Bench, Vicuna-7B (1.65x over 1.97x).
# - draft_model: code, math to EAGLE-3's Table 1, SpS (Vicuna-68M drafting for Vicuna 13B; τ 2.27,
#   2.57, 2.01; read as a chain of 5); translation to Spec-Bench's SpS, Vicuna-7B (1.13x over 1.66x);
#   summarize FITTED alone to SpecDecode-Bench Fig. 1 (Llama-3-70B with Llama-3.2-1B, CNN/DM, K=3,
#   batch 1: 2.10x): 0.82 flat; systems-code FITTED alone to the seed's 0.82x on Rust/C++ at K=5:
#   0.188 flat.
# ASSUMED, every method: sql takes chat's offset, structured code's (a format is as regular as
# code; Medusa's extraction, its one figure, is its highest category), systems-code code's (no
# figure but the draft model's separates C, C++ and Rust from Python).
OFFSETS: dict[str, dict[str, float | str]] = {
    "eagle3": {"chat": 0.0, "code": 0.419, "math": 0.129, "summarize": -0.323, "translation": -1.018,
               "systems-code": "code", "sql": "chat", "structured": "code"},
    "eagle": {"chat": 0.0, "code": 0.413, "math": 0.065, "summarize": -0.280, "translation": -0.772,
              "systems-code": "code", "sql": "chat", "structured": "code"},
    "medusa": {"chat": 0.0, "code": 0.346, "math": 0.216, "summarize": -0.372, "translation": -0.276,
               "structured": 1.245, "systems-code": "code", "sql": "chat"},
    "draft_model": {"chat": 0.0, "code": 0.288, "math": -0.264, "translation": -0.938,
                    "summarize": _logit(0.82) - _logit(0.765), "systems-code": _logit(0.188) - _logit(0.765),
                    "sql": "chat", "structured": "code"},
}


def offset(method: str, subdomain: str, offsets: dict[str, dict[str, float | str]] = OFFSETS) -> float:
    """A subdomain's logit offset from chat for `method` (an ASSUMED one read through the subdomain it takes)."""
    value = offsets[method][subdomain]
    return offset(method, value, offsets) if isinstance(value, str) else value


def chat_profile(method: str, offsets: dict[str, dict[str, float | str]] = OFFSETS) -> Acceptance:
    """A method's chain acceptance on chat: its anchor moved back by the anchor subdomain's offset."""
    subdomain, anchor = ANCHORS[method]
    return shifted(anchor, -offset(method, subdomain, offsets))


def _from_offsets(method: str) -> dict[str, Acceptance]:
    chat = chat_profile(method)
    return {s: shifted(chat, offset(method, s)) for s in SUBDOMAINS}


# The other methods, domain by domain (their subdomains take their domain's profile: ASSUMED):
# - mtp: ASSUMED equal to eagle3 (a trained head on the target's own hidden states).
# - mlp_speculator: ASSUMED below medusa (IBM's speculators report 2x on chat at K=3-4).
# - ngram, suffix: acceptance given a match, and the chance of a match. summarize FITTED to
#   SpecDecode-Bench Fig. 1 (batch 1: 1.28x) with the match rate ASSUMED 0.3; others ASSUMED from
#   Spec-Bench's prompt-lookup ordering (summarisation 2.43x > chat 1.64x > QA 1.14x, Vicuna-7B).
def _profiles(method: str, first: dict[str, float | tuple[float, ...]], decay: float | None = None,
              match: dict[str, float] | None = None) -> dict[str, Acceptance]:
    """One method's profile per domain: a listed tuple as is, else the first position's value,
    decaying per position when `decay` is given (flat otherwise), with the method's spread; each
    subdomain takes its domain's."""
    def positions(v: float | tuple[float, ...]) -> tuple[float, ...]:
        return v if isinstance(v, tuple) else decaying(v, decay) if decay else (v,)
    by_domain = {d: Acceptance(positions(v), SPREAD[method], (match or {}).get(d, 1.0)) for d, v in first.items()}
    return {s: by_domain[PARENT[s]] for s in SUBDOMAINS}


PROFILES: dict[str, dict[str, Acceptance]] = {
    **{m: _from_offsets(m) for m in ANCHORS},
    "mlp_speculator": _profiles("mlp_speculator", {"chat": 0.65, "code": 0.55, "sql": 0.55, "summarize": 0.6,
                                                   "structured": 0.65}, MEDUSA_DECAY),
    "ngram": _profiles("ngram", {"chat": 0.35, "code": 0.5, "sql": 0.5, "summarize": 0.685, "structured": 0.5},
                       match={"chat": 0.15, "code": 0.3, "sql": 0.3, "summarize": 0.3, "structured": 0.35}),
}
PROFILES["mtp"] = dict(PROFILES["eagle3"])
PROFILES["suffix"] = {d: Acceptance(a.positions, a.spread, min(1.0, a.match * 1.2))
                      for d, a in PROFILES["ngram"].items()}
assert all(set(p) == set(SUBDOMAINS) for p in PROFILES.values())

# Sampling at temperature T accepts less than greedy: acceptance is scaled by
# (1 - TEMPERATURE_PENALTY * min(T, 1)). SOURCED range: speculative-sampling papers report 10-20%
# lower acceptance at T=1 than at T=0 (Leviathan et al. 2023, Table 3); 0.15 is the middle.
TEMPERATURE_PENALTY = 0.15

# Gauss-Hermite nodes for the expectation over the per-request spread.
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(24)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()

Table = dict[str, dict[str, Acceptance]]


def profile(method: str, subdomain: str, table: Table | None = None) -> Acceptance:
    """A method's acceptance on a subdomain (or a domain): the fleet's fitted table first, for the
    subdomain, else its domain (`loadtest calibrate` fits per domain), then the defaults."""
    mine = table.get(method, {}) if table else {}
    for key in (subdomain, PARENT.get(subdomain, subdomain)):
        if key in mine:
            return mine[key]
    return PROFILES[method][subdomain]


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
