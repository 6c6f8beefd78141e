"""The performance model's physics, as pure functions: why the modes differ."""

from __future__ import annotations

import numpy as np
import pytest

from cluster.sim.acceptance import classify_domain, draw_accepted, expected_tokens_per_pass, position_alphas
from cluster.sim.perf_model import Deployment, kv_capacity_tokens, proposer_weight_bytes, step_s
from cluster.sim.profiles import HARDWARE, model_profile
from cluster.speculation import parse_speculative_config
from scenarios.prompts import make_prompt

H100 = HARDWARE["h100-sxm"]
LLAMA70 = model_profile("meta-llama/Llama-3.3-70B-Instruct")
LLAMA1 = model_profile("meta-llama/Llama-3.2-1B-Instruct")
BASE = Deployment(H100, LLAMA70, tp=4)


def dep(method: str, **extra) -> Deployment:
    cfg = {"method": method, "num_speculative_tokens": 5, **extra}
    if method == "ngram":
        cfg["prompt_lookup_max"] = 4
    elif "model" not in cfg:
        cfg["model"] = "meta-llama/Llama-3.2-1B-Instruct" if method == "draft_model" else "heads"
    spec = parse_speculative_config(cfg, 4)
    return Deployment(H100, LLAMA70, 4, spec, LLAMA1 if method == "draft_model" else None)


def speedup(d: Deployment, domain: str, batch: int, ctx: int = 1024) -> float:
    tokens = expected_tokens_per_pass(position_alphas(d.method, domain, d.k)) if d.spec else 1.0
    return tokens * step_s(BASE, batch, batch * ctx) / step_s(d, batch, batch * ctx)


def test_baseline_step_matches_measured_70b_tp4():
    # vLLM CI: ~19 ms per decode step, Llama-3-70B, TP4 H100, batch 8.
    assert step_s(BASE, 8, 8 * 1024) == pytest.approx(0.019, rel=0.05)


def test_draft_model_wins_on_chat_and_loses_on_code():
    draft = dep("draft_model")
    assert speedup(draft, "chat", 1) == pytest.approx(2.3, rel=0.10)
    assert expected_tokens_per_pass(position_alphas("draft_model", "chat", 5)) == pytest.approx(3.4, rel=0.10)
    assert speedup(draft, "code", 1) == pytest.approx(0.82, rel=0.10)


def test_speedup_shrinks_as_batch_grows_and_inverts_when_compute_bound():
    for method in ("draft_model", "eagle", "ngram", "medusa"):
        d = dep(method)
        s1, s64, s256 = (speedup(d, "chat", b) for b in (1, 64, 256))
        assert s1 > s64 > s256, method
    assert speedup(dep("draft_model"), "chat", 256) < 1.0


def test_verification_is_almost_free_when_memory_bound():
    spec = dep("ngram")
    assert step_s(spec, 1, 1024) / step_s(BASE, 1, 1024) < 1.01
    assert step_s(spec, 256, 256 * 1024) / step_s(BASE, 256, 256 * 1024) > 3


def test_proposers_cost_memory_and_kv_capacity():
    assert kv_capacity_tokens(dep("draft_model")) < kv_capacity_tokens(dep("eagle")) < kv_capacity_tokens(BASE)
    assert proposer_weight_bytes(dep("ngram")) == 0
    # 70B does not fit on one H100
    assert kv_capacity_tokens(Deployment(H100, LLAMA70, tp=1)) == 0


def test_accepted_tokens_follow_the_profile():
    rng = np.random.default_rng(0)
    alphas = np.tile(position_alphas("draft_model", "chat", 5), (20000, 1))
    mean = 1 + draw_accepted(rng, alphas).mean()
    assert mean == pytest.approx(expected_tokens_per_pass(alphas[0]), rel=0.02)
    hot = position_alphas("draft_model", "chat", 5, temperature=1.0)
    assert (hot < position_alphas("draft_model", "chat", 5, temperature=0.0)).all()


@pytest.mark.parametrize("domain, language", [("chat", None), ("code", "rust"), ("code", "cpp"), ("sql", None),
                                              ("summarize", None), ("structured", None)])
def test_domain_is_read_from_the_prompt_text(domain, language):
    for uid in range(5):
        prompt = make_prompt(domain, language, 800, uid, uid * 977)
        assert classify_domain(prompt) == domain


def test_unknown_model_size_is_read_from_its_name():
    assert model_profile("acme/SuperChat-13B-v2").params == pytest.approx(13e9)
    with pytest.raises(ValueError, match="no size"):
        model_profile("acme/mystery")
