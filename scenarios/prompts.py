"""Prompts per domain, built from content the project ships (scenarios/content/).

Every prompt opens with a line unique to its request (a random id inside a domain-typical
instruction), so no two requests share a prefix by accident, then carries a slice of real
domain text (Rust, C++, Python, SQL, English documents) cut at a line boundary, sized to the
requested token count.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import numpy as np

from scenarios import ScenarioError
from scenarios.textfile import jsonl_objects, read_utf8

# Byte-level BPE tokenizers of Llama 3 and Qwen 2.5 average about 4 characters of English or code
# per token. This is the one estimate the project uses for prompt length targets; the server's
# `usage` is what results record.
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text`: ceil(characters / CHARS_PER_TOKEN)."""
    return max(1, -(-len(text) // CHARS_PER_TOKEN))


_FILES = {"chat": "prose.txt", "summarize": "prose.txt", "structured": "prose.txt", "sql": "sql.sql",
          "rust": "rust.rs", "cpp": "cpp.cpp", "python": "python.py"}
LANGUAGE_NAMES = {"rust": "Rust", "cpp": "C++", "python": "Python"}

_CODE_TASKS = (
    "add error handling so that no function panics on malformed input",
    "make the cache generic over its eviction policy",
    "write unit tests for the edge cases of the ring buffer and the tokenizer",
    "remove the lock from the hot path without introducing a data race",
    "explain the lifetime and ownership rules this code relies on, then simplify it",
    "port the percentile helper to work on iterators instead of owned vectors",
    "add a benchmark and optimise the slowest function you find",
    "fix the off-by-one error in the retry loop and document the behaviour",
)
_SQL_QUESTIONS = (
    "which regions grew revenue fastest quarter over quarter this year",
    "the ten customers with the highest lifetime value who have not ordered in 60 days",
    "weekly active customers by device, with the week-over-week change",
    "average basket size per product category, excluding cancelled orders",
    "the median time between signup and first order, per signup month",
    "products whose share of category revenue dropped by more than five points",
)
_SUMMARY_ASKS = (
    "Summarize the document below in five bullet points, quoting the key sentence of each section verbatim.",
    "Summarize the following report for an executive: what was decided, what it costs, and who objected. "
    "Quote the exact words of anyone cited.",
    "Write a summary of this text with a one-line TL;DR, then the key points, each followed by the "
    "supporting sentence copied exactly from the document.",
)
_JSON_ASK = ('Return a JSON object with keys "sentiment" (positive, neutral or negative), "topics" '
             '(a list of strings) and "confidence" (a number from 0 to 1). JSON:')


@cache
def _corpus(name: str) -> tuple[str, np.ndarray]:
    """A content file (a built-in name, or the path of a user's document) repeated to at least 64k
    characters, and its line-start offsets."""
    if name in _FILES:
        text = (resources.files("scenarios") / "content" / _FILES[name]).read_text()
    else:
        text = read_utf8(name)
    if not text.endswith("\n"):
        text += "\n"
    text = text * max(1, -(-65536 // len(text)) + 1)
    starts = np.flatnonzero(np.frombuffer(text.encode(), dtype=np.uint8) == ord("\n")) + 1
    return text, starts[starts < len(text) // 2]


@cache
def _questions() -> tuple[str, ...]:
    text = (resources.files("scenarios") / "content" / "chat.txt").read_text()
    return tuple(line for line in text.splitlines() if line)


def _slice(name: str, start_pick: int, chars: int) -> str:
    text, starts = _corpus(name)
    start = int(starts[start_pick % len(starts)])
    chars = max(0, min(chars, len(text) - start))
    return text[start:start + chars]


@cache
def custom_prompts(path: str) -> tuple[str, ...]:
    """Prompts of a `custom` tenant: JSONL lines with a "prompt" key, or else one prompt per line."""
    lines = [(n, ln) for n, ln in enumerate(read_utf8(path).splitlines(), 1) if ln.strip()]
    if not lines:
        raise ScenarioError(f"{path}: no prompts in the file")
    if not lines[0][1].lstrip().startswith("{"):
        return tuple(ln for _, ln in lines)
    out = []
    for n, obj in jsonl_objects(path):
        if not isinstance(obj.get("prompt"), str):
            raise ScenarioError(f'{path}:{n}: prompt: required string is missing')
        out.append(obj["prompt"])
    return tuple(out)


def make_prompt(domain: str, language: str | None, target_tokens: int, uid: int, pick: int,
                source: str | None = None) -> str:
    """One prompt of about `target_tokens` tokens. `uid` makes its opening unique; `pick` chooses
    the instruction and where the body text starts; `source` is a summarize tenant's document or
    a custom tenant's prompts file."""
    if domain == "custom":
        prompts = custom_prompts(source)
        return prompts[pick % len(prompts)]
    tag = f"{uid:010x}"
    if domain == "chat":
        head = f"[session {tag}] {_questions()[pick % len(_questions())]}\n\nWhat I wrote earlier:\n"
        body_name = "chat"
    elif domain == "code":
        lang = language or "python"
        task = _CODE_TASKS[pick % len(_CODE_TASKS)]
        head = f"Ticket {tag}: in this {LANGUAGE_NAMES[lang]} file, {task}.\n```{lang}\n"
        body_name = lang
    elif domain == "sql":
        head = f"-- request {tag}: {_SQL_QUESTIONS[pick % len(_SQL_QUESTIONS)]}\n"
        body_name = "sql"
    elif domain == "summarize":
        head = f"Document {tag}. {_SUMMARY_ASKS[pick % len(_SUMMARY_ASKS)]}\n\n"
        body_name = source or "summarize"
    elif domain == "structured":
        head = f"Review {tag}:\n"
        body_name = "structured"
    else:
        raise ValueError(f"unknown domain {domain!r}")
    tail = {"code": "```\n", "sql": "-- The query:\nSELECT", "structured": f"\n{_JSON_ASK}"}.get(domain, "")
    room = target_tokens * CHARS_PER_TOKEN - len(head) - len(tail)
    return head + _slice(body_name, pick // 7, room) + tail
