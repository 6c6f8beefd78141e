"""The published per-dataset and per-category figures of speculative decoding, as data, and how the
simulator's chain acceptance is compared with them.

Each table is one method on one target in one publication, cited where it is defined. Most were
measured with a draft *tree* (EAGLE, EAGLE-2/3 and Medusa verify many candidate paths per step) in
a Hugging Face backend at batch 1; vLLM, which the simulator models, drafts a *chain* of K tokens.
So a tree figure is never used as a chain one. The mapping:

- A publication's tree of depth D is read as a chain of depth D whose every position accepts more:
  its logit raised by a `bonus`, one number per table (the tree's width, and the target and draft of
  that row). τ = the simulator's own expected tokens per verification (acceptance.py), spread
  included, at depth D.
- A category moves every position's logit by the same offset in a tree as in a chain, and on every
  target a method's head is trained for (ASSUMED; the predicted rows test it: one target's offsets
  against another target's and another paper's figures).
- A dataset is what its prompts are: a pure one is one subdomain (HumanEval code, GSM8K math,
  Alpaca chat, CNN/DailyMail summaries, WMT translation); MT-Bench is the mixture its 80 questions
  make when the simulator classifies them (`MT_BENCH`, the vendored corpus read by
  cluster/sim/domains.py; tests/test_sim_categories.py holds it to the corpus).
- A speedup ratio between two datasets of one table is read as their τ ratio: the step costs the
  same at batch 1 whatever is written (EAGLE-3's Table 1 gives both; speedup/τ is 0.718-0.720 on its
  L31 8B MT-bench, HumanEval, GSM8K and Alpaca rows, 0.684 on CNN/DM's long prompts).

`fit_offsets` and `fit_chain` solve the constants acceptance.py holds (bench/fit_acceptance.py prints
them); `calibration.py` turns these tables into the fitted and predicted rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from cluster.sim.acceptance import Acceptance, expected_tokens_per_pass, shifted

Shares = Mapping[str, float]

# MT-Bench's 80 first turns as cluster/sim/domains.py reads them, per MT-Bench category (the vendored
# corpus scenarios/corpora/mt-bench; tests/test_sim_categories.py checks these counts against it).
MT_BENCH_CATEGORIES: dict[str, dict[str, int]] = {
    "writing": {"chat": 9, "summarize": 1},
    "roleplay": {"chat": 9, "translation": 1},
    "reasoning": {"chat": 10},
    "math": {"math": 9, "chat": 1},
    "coding": {"code": 8, "systems-code": 1, "chat": 1},
    "extraction": {"structured": 6, "chat": 4},
    "stem": {"chat": 9, "code": 1},
    "humanities": {"chat": 10},
}


def mix(*parts: Mapping[str, int]) -> dict[str, float]:
    """Several mixtures of subdomains as one (counts added)."""
    out: dict[str, float] = {}
    for part in parts:
        for s, n in part.items():
            out[s] = out.get(s, 0) + n
    return out


MT_BENCH = mix(*MT_BENCH_CATEGORIES.values())
# Medusa's per-category figure groups the five categories it found alike against the other three.
MT_CHAT_CATEGORIES = mix(*(MT_BENCH_CATEGORIES[c] for c in ("writing", "roleplay", "reasoning", "stem",
                                                              "humanities")))

# What each dataset's prompts are.
DATASETS: dict[str, Shares] = {
    "MT-bench": MT_BENCH, "HumanEval": {"code": 1}, "GSM8K": {"math": 1}, "Alpaca": {"chat": 1},
    "CNN/DM": {"summarize": 1}, "translation": {"translation": 1}, "summarization": {"summarize": 1},
    "math": {"math": 1},
}


@dataclass(frozen=True)
class PerDataset:
    """τ (mean tokens per verification) per dataset of one method on one target, drafted as a tree
    of `depth` (a chain where `tree` is False), at `temperature`."""

    source: str
    method: str       # the simulator's method it speaks for
    target: str
    depth: int
    tau: dict[str, float]
    temperature: float = 0.0
    tree: bool = True


# EAGLE-3 (Li et al., arXiv 2503.01840v3, NeurIPS 2025), Table 1: speedup and τ on MT-bench, HumanEval,
# GSM8K, Alpaca and CNN/DM; Hugging Face backend, batch 1, GPU not stated. EAGLE-3's tree has depth 8
# (its Appendix A), EAGLE-1's and Medusa's the default mc_sim_7b_63 tree of depth 5; SpS is Hugging
# Face's assisted generation with Vicuna-68M drafting (a chain of dynamic length; read as depth 5,
# its starting length: ASSUMED). Read from the paper's Table 1 as reproduced in public notes and
# cross-checked on the means (L31 8B 3.23x -> 4.44x, L33 70B 2.85x -> 4.12x) and on Table 2's rows.
E3 = "EAGLE-3 paper Table 1"
_DS = ("MT-bench", "HumanEval", "GSM8K", "Alpaca", "CNN/DM")


def _t(source: str, method: str, target: str, depth: int, taus: tuple[float, ...], temperature: float = 0.0,
       tree: bool = True) -> PerDataset:
    return PerDataset(source, method, target, depth, dict(zip(_DS, taus, strict=True)), temperature, tree)


E3_L31_8B = _t(E3, "eagle3", "LLaMA-Instruct 3.1 8B", 8, (6.13, 6.74, 6.23, 6.70, 5.34))
E3_L33_70B = _t(E3, "eagle3", "LLaMA-Instruct 3.3 70B", 8, (5.63, 6.52, 6.15, 6.09, 5.02))
E3_V13B = _t(E3, "eagle3", "Vicuna 13B", 8, (6.65, 7.54, 6.29, 6.17, 6.47))
E3_L31_8B_T1 = _t(E3, "eagle3", "LLaMA-Instruct 3.1 8B", 8, (4.24, 5.82, 4.59, 5.56, 4.39), temperature=1.0)
E3_L33_70B_T1 = _t(E3, "eagle3", "LLaMA-Instruct 3.3 70B", 8, (5.45, 6.16, 5.95, 5.87, 4.88), temperature=1.0)
EAGLE_V13B = _t(E3, "eagle", "Vicuna 13B", 5, (3.98, 4.39, 3.97, 3.95, 3.52))
MEDUSA_V13B = _t(E3, "medusa", "Vicuna 13B", 5, (2.59, 2.78, 2.64, 2.45, 2.09))
SPS_V13B = _t(E3, "draft_model", "Vicuna 13B (Vicuna-68M drafting)", 5, (2.27, 2.57, 2.01, 2.03, 2.33), tree=False)
# Its DeepSeek-R1-Distill-LLaMA 8B row is left out: that head was trained on OpenThoughts math too, so
# its categories are not the chat-trained heads' (GSM8K 6.93 against MT-bench 5.58).

# vLLM issue #20780 (2025-07-10): Llama-3.1-8B-Instruct, batch 1, vLLM V1 chains of K=2..7: mean
# acceptance length per K for EAGLE-1 (yuhuili/EAGLE-LLaMA3.1-Instruct-8B) and EAGLE-3
# (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B), and TPOT (vanilla 7.07 ms). It names neither its dataset nor
# its GPU; read as MT-Bench on one H100, what its author's tracking issue (#17812) and PR #16937 ran.
VLLM_20780 = "vLLM issue #20780"
VLLM_20780_K = (2, 3, 4, 5, 6, 7)
VLLM_20780_AL = {"eagle": (2.10, 2.29, 2.39, 2.43, 2.45, 2.47), "eagle3": (2.36, 2.79, 3.08, 3.32, 3.46, 3.54)}
VLLM_20780_TPOT_MS = {"none": 7.07, "eagle": (4.37, 4.29, 4.48, 4.71, 4.94, 5.20),
                      "eagle3": (4.32, 4.09, 4.05, 4.13, 4.20, 4.29)}

# Spec-Bench (Xia et al., arXiv 2401.07851), its leaderboard (hemingkx/Spec-Bench Leaderboard.md @
# fd2c1cd, 2025-04-22): one A100 80GB, PyTorch 2.5.1, greedy, fp16, batch 1; speedup per task
# (Multi-turn Conversation = MT-Bench, Translation = WMT14 DE-EN, Summarization = CNN/DM,
# Question Answering = Natural Questions, Mathematical Reasoning = GSM8K, RAG) and one mean accepted
# length over all tasks. SpS is Vicuna-68M drafting; EAGLE, Medusa(-1) their released heads and trees.
SPEC_BENCH = "Spec-Bench leaderboard (A100)"
SB_TASKS = ("MT-bench", "translation", "summarization", "qa", "math", "rag")
SPEC_BENCH_SPEEDUP: dict[tuple[str, str], tuple[float, ...]] = {
    ("eagle", "Vicuna-7B"): (2.45, 1.77, 2.08, 1.93, 2.44, 1.87),
    ("eagle", "Vicuna-13B"): (2.52, 1.84, 2.12, 1.91, 2.52, 2.01),
    ("eagle", "Vicuna-33B"): (2.75, 2.04, 2.42, 2.16, 2.97, 2.20),
    ("eagle3", "Vicuna-13B"): (3.48, 2.36, 3.14, 2.94, 3.42, 2.78),
    ("medusa", "Vicuna-7B"): (1.97, 1.65, 1.57, 1.65, 1.94, 1.49),
    ("medusa", "Vicuna-13B"): (2.05, 1.71, 1.62, 1.69, 2.08, 1.61),
    ("medusa", "Vicuna-33B"): (1.94, 1.72, 1.58, 1.65, 2.05, 1.56),
    ("draft_model", "Vicuna-7B"): (1.66, 1.13, 1.71, 1.50, 1.47, 1.66),
    ("draft_model", "Vicuna-13B"): (1.67, 1.15, 1.71, 1.43, 1.58, 1.70),
    ("draft_model", "Vicuna-33B"): (1.70, 1.27, 1.71, 1.52, 1.66, 1.60),
}


def spec_bench_ratio(method: str, target: str, task: str) -> float:
    """A task's speedup over the same row's MT-Bench speedup."""
    row = SPEC_BENCH_SPEEDUP[(method, target)]
    return row[SB_TASKS.index(task)] / row[0]


# Medusa (Cai et al., arXiv 2401.10774), the figure "Speedup on different categories for Vicuna-7B"
# (MT-Bench, batch 1; it sits with the paper's Medusa-2 results, Vicuna-7B 2.83x overall), its bars'
# labels as a text extraction of the figure gives them.
MEDUSA_PAPER = "Medusa paper, per-category figure"
MEDUSA_CATEGORY_SPEEDUP = {"humanities": 2.58, "reasoning": 2.58, "roleplay": 2.70, "writing": 2.72, "stem": 2.77,
                           "math": 3.01, "coding": 3.29, "extraction": 3.62}
MEDUSA_CHAT_SPEEDUP = float(np.mean([MEDUSA_CATEGORY_SPEEDUP[c] for c in
                                     ("humanities", "reasoning", "roleplay", "writing", "stem")]))

# vLLM's acceptance-length test (tests/v1/spec_decode/test_acceptance_length.py): Llama-3.1-8B-Instruct
# with its EAGLE-3 head, MT-Bench, K=3, greedy: acceptance at positions 1/2/3 of 0.730/0.521/0.355.
VLLM_TEST_E3_AL3 = 1 + 0.730 + 0.521 + 0.355


# ---- the mapping ---------------------------------------------------------------------------------

Profiles = Callable[[str], Acceptance]   # a subdomain's chain acceptance


def dataset_tau(profiles: Profiles, shares: Shares, depth: int, bonus: float = 0.0,
                temperature: float = 0.0) -> float:
    """τ on a dataset made of `shares` of subdomains: each subdomain's chain acceptance, every
    position's logit raised by `bonus`, over `depth` positions, weighted by its share."""
    total = sum(shares.values())
    return sum(w * expected_tokens_per_pass(shifted(profiles(s), bonus), depth, temperature)
               for s, w in shares.items()) / total


def solve(f: Callable[[float], float], lo: float = -8.0, hi: float = 8.0) -> float:
    """The root of an increasing `f` in [lo, hi], by bisection."""
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def fit_bonus(profiles: Profiles, table: PerDataset, dataset: str = "MT-bench") -> float:
    """The tree bonus that makes `dataset`'s τ the table's."""
    return solve(lambda b: dataset_tau(profiles, DATASETS[dataset], table.depth, b, table.temperature)
                 - table.tau[dataset])


def fit_offsets(base: Callable[[str, float], Acceptance], table: PerDataset, datasets: Mapping[str, str],
                anchor: str = "MT-bench", rounds: int = 30) -> tuple[float, dict[str, float]]:
    """The table's bonus and each pure dataset's subdomain offset (`datasets`: dataset -> subdomain),
    with `base(subdomain, offset)` the chain acceptance a subdomain would have at that offset (chat
    and any subdomain not fitted keep offset 0 unless `base` says otherwise): the anchor (a mixture)
    fixes the bonus, each pure dataset its offset, in turn until they agree."""
    offsets = dict.fromkeys(datasets.values(), 0.0)
    bonus = 0.0
    for _ in range(rounds):
        bonus = fit_bonus(lambda s: base(s, offsets.get(s, 0.0)), table, anchor)
        for dataset, s in datasets.items():
            offsets[s] = solve(lambda z, s=s, d=dataset, b=bonus: dataset_tau(
                lambda _: base(s, z), {s: 1}, table.depth, b, table.temperature) - table.tau[d])
    return bonus, offsets


def chain_al(profiles: Profiles, shares: Shares, k: int, temperature: float = 0.0) -> float:
    """vLLM's mean acceptance length on a chain of `k`, over a dataset of `shares`."""
    return dataset_tau(profiles, shares, k, 0.0, temperature)


def fit_chain(make: Callable[[float, float], Profiles], ks: tuple[int, ...], published: tuple[float, ...],
              shares: Shares) -> tuple[float, float]:
    """The first position's acceptance and the per-position decay of a chain profile (`make(first,
    decay)`) that best reproduce a published acceptance length per K (least squares, on a grid
    refined three times)."""
    def err(first: float, decay: float) -> float:
        p = make(first, decay)
        return sum((chain_al(p, shares, k) - al) ** 2 for k, al in zip(ks, published, strict=True))
    first, decay, step = 0.75, 0.95, 0.04
    for _ in range(4):
        grid = [(f, d) for f in np.arange(first - 5 * step, first + 5.01 * step, step)
                for d in np.arange(decay - 5 * step / 2, min(1.0, decay + 5.01 * step / 2), step / 2) if 0 < f < 1]
        first, decay = min(grid, key=lambda fd: err(*fd))
        step /= 4
    return float(first), float(decay)
