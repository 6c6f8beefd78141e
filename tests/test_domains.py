"""The simulator reads a request's domain the way a person would: on a labelled corpus written
by someone else (tests/data/domain_corpus.jsonl, at least 50 prompts per domain in many styles),
at least 95% of each domain's prompts are classified as labelled."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from cluster.sim.domains import DOMAINS, classify_domain
from scenarios.prompts import make_prompt
from tests.conftest import DATA

CORPUS = [json.loads(line) for line in (DATA / "domain_corpus.jsonl").read_text(encoding="utf-8").splitlines()
          if line.strip()]


def test_the_corpus_has_at_least_fifty_prompts_per_domain_in_many_styles():
    counts = Counter(r["domain"] for r in CORPUS)
    assert set(counts) == set(DOMAINS) and min(counts.values()) >= 50, counts
    assert len({r["text"] for r in CORPUS}) == len(CORPUS)
    for domain in DOMAINS:
        assert len({r["style"] for r in CORPUS if r["domain"] == domain}) >= 10, domain


@pytest.mark.parametrize("domain", DOMAINS)
def test_each_domain_is_recognised_at_least_95_percent_of_the_time(domain):
    mine = [r for r in CORPUS if r["domain"] == domain]
    wrong = [(classify_domain(r["text"]), r["text"][:80]) for r in mine if classify_domain(r["text"]) != domain]
    assert 1 - len(wrong) / len(mine) >= 0.95, wrong


def test_the_cases_a_person_found_misread_are_read_right():
    # A Rust borrow-checker question quoting one short function, and a request for a macro_rules!
    # macro, were both classified as chat by the regexes this classifier replaced.
    borrow = ("Why does the borrow checker complain here? I only want to push while I iterate.\n\n"
              "fn add_all(v: &mut Vec<i32>) {\n    for x in v.iter() {\n        v.push(*x);\n    }\n}")
    macro = "Can you write me a macro_rules! macro that builds a HashMap from key => value pairs?"
    assert classify_domain(borrow) == "code" and classify_domain(macro) == "code"


@pytest.mark.parametrize("domain, language", [("chat", None), ("code", "rust"), ("code", "cpp"), ("code", "python"),
                                              ("sql", None), ("summarize", None), ("structured", None)])
def test_the_projects_own_prompts_keep_their_domain(domain, language):
    for tokens in (60, 400, 3000):
        for uid in range(10):
            assert classify_domain(make_prompt(domain, language, tokens, uid, uid * 977)) == domain


def test_prompts_no_one_tuned_on_are_mostly_read_right():
    # tests/data/domain_holdout.jsonl was written after the classifier was tuned on the corpus,
    # by an author who read neither: the honest estimate of how it does on new text. Measured:
    # 122 of 137 (89%); code (81%) and summaries (85%) are the weakest. This guards against a
    # change that makes it worse, not a figure it was fitted to.
    holdout = [json.loads(line) for line in (DATA / "domain_holdout.jsonl").read_text(encoding="utf-8").splitlines()
               if line.strip()]
    assert Counter(r["domain"] for r in holdout).most_common()[-1][1] >= 25
    right = Counter(r["domain"] for r in holdout if classify_domain(r["text"]) == r["domain"])
    total = Counter(r["domain"] for r in holdout)
    assert sum(right.values()) / len(holdout) >= 0.85
    assert all(right[d] / total[d] >= 0.75 for d in DOMAINS), {d: right[d] / total[d] for d in DOMAINS}
