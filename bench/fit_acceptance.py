"""Solve the acceptance constants that cluster/sim/acceptance.py holds from the published figures
(cluster/sim/published.py), and print them beside the values in the file.

    python bench/fit_acceptance.py

The fitted table of bench/calibrate.py shows that the file's values reproduce the figures; this
shows how they were found: EAGLE-3's chain on chat from vLLM issue #20780's acceptance length per K,
then, per method, each FITTED offset from one table of EAGLE-3's Table 1 (its MT-bench, a mixture of
subdomains, fixing the tree's bonus), translation from Spec-Bench's ratio, Medusa's structured from
its paper's extraction bar; and Llama-3.1-8B's own EAGLE-1 chain (calibration.EAGLE_8B_MT). ASSUMED
offsets follow whatever they take. Runs in about 15 s.
"""

from __future__ import annotations

import copy
import sys
import time

from cluster.sim import published as P
from cluster.sim.acceptance import (
    ANCHORS,
    OFFSETS,
    SPREAD,
    Acceptance,
    chat_profile,
    decaying,
    offset,
    shifted,
)

# Each method's per-dataset table and which subdomain each pure dataset fits; its Spec-Bench row for
# translation.
FITS = {
    "eagle3": (P.E3_L31_8B, {"HumanEval": "code", "GSM8K": "math", "CNN/DM": "summarize"}, "Vicuna-13B"),
    "eagle": (P.EAGLE_V13B, {"HumanEval": "code", "GSM8K": "math", "CNN/DM": "summarize"}, "Vicuna-7B"),
    "medusa": (P.MEDUSA_V13B, {"HumanEval": "code", "GSM8K": "math", "CNN/DM": "summarize"}, "Vicuna-7B"),
    "draft_model": (P.SPS_V13B, {"HumanEval": "code", "GSM8K": "math"}, "Vicuna-7B"),
}
# The Spec-Bench row's bonus: its own target's table where EAGLE-3's Table 1 has one.
SB_TABLE = {"eagle3": P.E3_V13B}


def profiles(method: str, offsets: dict, anchor: Acceptance | None = None):
    anchors = dict(ANCHORS)
    if anchor is not None:
        anchors[method] = (anchors[method][0], anchor)
    sub, acc = anchors[method]
    chat = shifted(acc, -offset(method, sub, offsets))
    return lambda s: shifted(chat, offset(method, s, offsets))


def fit_method(method: str, offsets: dict, anchor: Acceptance | None = None) -> None:
    """Solve `method`'s FITTED offsets in place: the table's pure datasets, then translation and
    (Medusa) structured."""
    table, datasets, sb_target = FITS[method]
    mine = offsets[method]
    chat = profiles(method, offsets, anchor)("chat")   # held still while the offsets are solved

    def base(s: str, z: float) -> Acceptance:
        return shifted(chat, z if s in datasets.values() else offset(method, s, offsets))

    _, found = P.fit_offsets(base, table, datasets)
    mine.update(found)
    prof = lambda s: shifted(chat, offset(method, s, offsets))  # noqa: E731
    sb_table = SB_TABLE.get(method, table)
    bonus = P.fit_bonus(prof, sb_table)
    want = P.spec_bench_ratio(method, sb_target, "translation") * P.dataset_tau(prof, P.MT_BENCH, sb_table.depth, bonus)
    mine["translation"] = P.solve(lambda z: P.dataset_tau(lambda _: shifted(chat, z), {"translation": 1},
                                                          sb_table.depth, bonus) - want)
    if method == "medusa":
        bonus = P.fit_bonus(prof, table)
        ratio = P.MEDUSA_CATEGORY_SPEEDUP["extraction"] / P.MEDUSA_CHAT_SPEEDUP

        def extraction(z: float) -> float:
            p = lambda s: shifted(chat, z if s == "structured" else offset(method, s, offsets))  # noqa: E731
            return (P.dataset_tau(p, P.MT_BENCH_CATEGORIES["extraction"], table.depth, bonus)
                    - ratio * P.dataset_tau(p, P.MT_CHAT_CATEGORIES, table.depth, bonus))
        mine["structured"] = P.solve(extraction)


def fit_all() -> tuple[dict, tuple[float, float]]:
    offsets = copy.deepcopy(OFFSETS)
    first, decay = ANCHORS["eagle3"][1].positions[0], 0.958
    for _ in range(4):   # EAGLE-3's chain and its offsets depend on each other through MT-Bench's mixture
        def make(f: float, d: float) -> P.Profiles:
            return profiles("eagle3", offsets, Acceptance(decaying(f, d, 8), SPREAD["eagle3"]))
        first, decay = P.fit_chain(make, P.VLLM_20780_K, P.VLLM_20780_AL["eagle3"], P.MT_BENCH)
        fit_method("eagle3", offsets, Acceptance(decaying(first, decay, 8), SPREAD["eagle3"]))
    for method in ("eagle", "medusa", "draft_model"):
        for _ in range(5):
            fit_method(method, offsets)
    return offsets, (first, decay)


def main() -> int:
    start = time.perf_counter()
    offsets, (first, decay) = fit_all()
    print(f"eagle3 chat chain: first {first:.4f} (file {ANCHORS['eagle3'][1].positions[0]:.4f}), "
          f"decay {decay:.3f}")
    worst = 0.0
    for method, table in offsets.items():
        for s, value in table.items():
            if isinstance(value, str):
                continue
            mine = OFFSETS[method][s]
            worst = max(worst, abs(value - mine))
            print(f"{method:12s} {s:13s} fitted {value:+.3f}   file {mine:+.3f}")
        print(f"{method:12s} chat first position {chat_profile(method).positions[0]:.3f}")
    # Llama-3.1-8B's own EAGLE-1 head in vLLM (calibration.EAGLE_8B_MT), from the same issue
    def e1(f: float, d: float) -> P.Profiles:
        chat = Acceptance(decaying(f, d, 8), SPREAD["eagle"])
        return lambda s: shifted(chat, offset("eagle", s, offsets))
    f1, d1 = P.fit_chain(e1, P.VLLM_20780_K, P.VLLM_20780_AL["eagle"], P.MT_BENCH)
    print(f"8B EAGLE-1 chat chain (calibration.EAGLE_8B_MT): first {f1:.4f}, decay {d1:.3f}")
    print(f"largest difference {worst:.3f} ({time.perf_counter() - start:.1f} s)")
    return 0 if worst < 0.02 else 1


if __name__ == "__main__":
    sys.exit(main())
