"""The simulator reads the new content by category: every vendored corpus' prompts fall in the
(sub)domain a person would give them, MT-Bench's categories in the mixture the calibration counts
on, and the acceptance per subdomain is fitted to, and predicts, published per-dataset figures
(the rows themselves are held in tests/test_calibration.py with the rest)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from cluster.sim import published as pub
from cluster.sim.acceptance import ANCHORS, OFFSETS, PROFILES, Acceptance, offset, profile
from cluster.sim.calibration import CATEGORY_FITTED, CATEGORY_PREDICTED, FITTED, MISSES, PREDICTED
from cluster.sim.domains import DOMAINS, PARENT, SUBDOMAINS, classify_domain, classify_subdomain
from cluster.sim.server import sequence_for
from scenarios.corpus import CORPORA, items
from tests.conftest import DATA

# Each corpus but MT-Bench (below, per category): the subdomain at least 95% of its prompts must read as.
EXPECTED = {"humaneval": "code", "humaneval-go": "code", "humaneval-java": "code", "humaneval-js": "code",
            "humaneval-rust": "systems-code", "humaneval-cpp": "systems-code", "defog-sql": "sql",
            "pydoc-topics": "summarize"}


def _shares(name: str) -> Counter:
    return Counter(classify_subdomain(it.text) for it in items(name))


def test_every_corpus_has_an_expected_reading():
    missing = sorted(set(CORPORA) - set(EXPECTED) - {"mt-bench"})
    assert not missing, f"say which subdomain these corpora should read as: {missing}"


@pytest.mark.parametrize("name", sorted(set(EXPECTED) & set(CORPORA)))
def test_a_corpus_reads_as_its_subdomain(name):
    shares = _shares(name)
    assert shares[EXPECTED[name]] / sum(shares.values()) >= 0.95, shares
    # and as the domain its tenants declare
    assert PARENT[EXPECTED[name]] == CORPORA[name].domain


def test_mt_bench_categories_read_sensibly_and_as_the_calibration_counts_them():
    by_category: dict[str, Counter] = {}
    for it in items("mt-bench"):
        by_category.setdefault(it.category, Counter())[classify_subdomain(it.text)] += 1
    # the mixture calibration.py compares MT-Bench's published figures with is the corpus' own reading
    assert {c: dict(v) for c, v in by_category.items()} == pub.MT_BENCH_CATEGORIES
    share = {c: {s: n / sum(v.values()) for s, n in v.items()} for c, v in by_category.items()}
    for c in ("writing", "roleplay", "reasoning", "stem", "humanities"):
        assert share[c].get("chat", 0) >= 0.9, (c, share[c])
    assert share["math"]["math"] >= 0.9
    assert share["coding"].get("code", 0) + share["coding"].get("systems-code", 0) >= 0.9
    assert share["extraction"]["structured"] >= 0.6   # the rest ask for prose answers about the text


def test_subdomains_refine_domains_and_never_change_them():
    rows = [json.loads(line) for name in ("domain_corpus.jsonl", "domain_holdout.jsonl")
            for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    assert set(PARENT) == set(SUBDOMAINS) and set(PARENT.values()) == set(DOMAINS)
    for r in rows:
        assert PARENT[classify_subdomain(r["text"])] == classify_domain(r["text"]), r["text"][:80]


@pytest.mark.parametrize("text, subdomain", [
    ("Translate German to English: Die Katze schläft auf dem warmen Sofa.", "translation"),
    ("How do you say 'where is the station?' in Japanese?", "translation"),
    ("Grace weighs 125 pounds. Alex weighs 2 pounds less than 4 times what Grace weighs. "
     "What are their combined weights in pounds?", "math"),
    ("Given that f(x) = 4x^3 - 9x - 14, find the value of f(2).", "math"),
    ("David has three sisters. Each of them has one brother. How many brothers does David have?", "chat"),
    ("Write a persuasive email to a friend about volunteering at the food bank.", "chat"),
    ("Complete this Rust function.\n```rust\nfn add(a: i32, b: i32) -> i32 {\n```\n", "systems-code"),
    ("Why does this segfault?\n```c\nint main() { char *p = malloc(4); printf(\"%s\", p); }\n```", "systems-code"),
    ("Complete this Python function.\n```python\ndef add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n```\n", "code"),
    ("Write a function in Go that reverses a slice of ints in place.", "code"),
])
def test_the_refinements_a_person_would_make(text, subdomain):
    assert classify_subdomain(text) == subdomain


def test_the_server_draws_acceptance_by_subdomain():
    text = "If 6 potatoes make 36 hash browns, how many hash browns can you make out of 96 potatoes?"
    seq = sequence_for({"max_tokens": 16}, text, 30, 4096, "r1")
    assert seq.domain == "math"
    # a fleet's fitted table is per domain (`loadtest calibrate`): its chat stands for math...
    fitted = Acceptance((0.5,), 0.3)
    assert profile("eagle3", "math", {"eagle3": {"chat": fitted}}) is fitted
    # ...unless it has math itself; without either, the defaults
    own = Acceptance((0.9,), 0.3)
    assert profile("eagle3", "math", {"eagle3": {"chat": fitted, "math": own}}) is own
    assert profile("eagle3", "math") is PROFILES["eagle3"]["math"]


def test_a_profile_file_may_name_a_subdomain(tmp_path):
    from cluster.sim.sim_profile import ProfileError, load_profile
    good = tmp_path / "good.toml"
    good.write_text("[hardware]\nbase = \"h100-sxm\"\n\n[acceptance.draft_model.systems-code]\npositions = [0.2]\n")
    assert load_profile(good).acceptance["draft_model"]["systems-code"].positions == (0.2,)
    bad = tmp_path / "bad.toml"
    bad.write_text("[hardware]\nbase = \"h100-sxm\"\n\n[acceptance.draft_model.poetry]\npositions = [0.2]\n")
    with pytest.raises(ProfileError, match=r"acceptance\.draft_model\.poetry: not a domain or subdomain"):
        load_profile(bad)


def test_every_method_has_every_subdomain_and_every_offset_says_where_it_comes_from():
    assert all(set(p) == set(SUBDOMAINS) for p in PROFILES.values())
    for method, offsets in OFFSETS.items():
        assert set(offsets) == set(SUBDOMAINS), method
        assert offsets["chat"] == 0.0
        for s in SUBDOMAINS:
            offset(method, s)   # an ASSUMED one names a subdomain that resolves to a number
        anchor, acc = ANCHORS[method]
        assert PROFILES[method][anchor].positions == pytest.approx(acc.positions, abs=1e-6), method


def test_the_fitted_and_predicted_category_rows_are_in_the_tables_and_the_misses_say_why():
    fitted, predicted = {r.case for r in FITTED}, {r.case for r in PREDICTED}
    assert {r.case for r in CATEGORY_FITTED} <= fitted and {r.case for r in CATEGORY_PREDICTED} <= predicted
    # a published table's pure datasets are each either fitted or predicted, never both
    names = {"eagle3": "EAGLE-3", "eagle": "EAGLE", "medusa": "Medusa", "draft_model": "SpS (draft)"}
    for table in (pub.E3_L31_8B, pub.EAGLE_V13B, pub.MEDUSA_V13B, pub.SPS_V13B):
        for dataset in set(table.tau) - {"MT-bench"}:
            cases = [c for c in fitted | predicted if c.startswith(f"{names[table.method]} {table.target} {dataset}:")]
            assert len(cases) == 1, (table.method, dataset, cases)
    # other targets' tables are predictions whole (their MT-bench only fixes the tree's bonus)
    for table in (pub.E3_L33_70B, pub.E3_V13B):
        assert not [c for c in fitted if c.startswith(f"EAGLE-3 {table.target} ")]
        assert len([c for c in predicted if c.startswith(f"EAGLE-3 {table.target} ")]) == 4
    for miss in MISSES:
        value, inside = miss.row.check()
        assert not inside and miss.why, (miss.row.case, value)   # one that holds belongs in PREDICTED
