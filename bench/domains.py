"""The domain classifier on the labelled corpus: accuracy per domain and the confusion matrix.

    python bench/domains.py [tests/data/domain_corpus.jsonl]

The corpus (tests/data/domain_corpus.jsonl) was written by a different author than the
classifier (cluster/sim/domains.py), without reading it: prompts in many styles, labelled with the
domain a person would give. tests/test_domains.py asserts at least 95% per domain.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cluster.sim.domains import DOMAINS, classify_domain

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "domain_corpus.jsonl"


def load(path: Path = CORPUS) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def confusion(rows: list[dict]) -> Counter:
    return Counter((r["domain"], classify_domain(r["text"])) for r in rows)


def main() -> int:
    rows = load(Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS)
    start = time.perf_counter()
    matrix = confusion(rows)
    per_prompt_us = (time.perf_counter() - start) / len(rows) * 1e6
    t = Table(title=f"Domain classifier on {len(rows)} labelled prompts (rows: label, columns: classified)")
    t.add_column("label")
    for d in DOMAINS:
        t.add_column(d, justify="right")
    t.add_column("recall", justify="right")
    worst = 1.0
    for label in DOMAINS:
        n = sum(v for (a, _), v in matrix.items() if a == label)
        recall = matrix[(label, label)] / n if n else float("nan")
        worst = min(worst, recall)
        t.add_row(label, *(str(matrix[(label, d)]) for d in DOMAINS), f"{recall:.1%}")
    Console(width=120).print(t)
    misses = [r for r in rows if classify_domain(r["text"]) != r["domain"]]
    for r in misses:
        print(f"  {r['domain']} -> {classify_domain(r['text'])}: {r['text'][:100]!r}")
    print(f"lowest recall {worst:.1%}; {per_prompt_us:.0f} us per prompt")
    return 0 if worst >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
