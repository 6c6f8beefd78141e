"""Prompts per domain, built from content the project ships (scenarios/content/).

Every prompt opens with a line unique to its request (a random id inside a domain-typical
instruction), so no two requests share a prefix by accident, then carries a slice of real
domain text (Rust, C++, Python, SQL, English documents) cut at a line boundary, sized to the
requested token count.

The languages a code tenant can name are data: each file of content/code/ is the project's own
code in the language its name says (`rust.rs`: rust), and each code corpus (scenarios/corpus.py)
adds its language. Where content/code/ has no file for a language, its code prompts are cut from
the solved problems of the corpus in it (go from humaneval-go's), so `language = ["go"]` needs
no file of the project's own.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import numpy as np

from scenarios import ScenarioError
from scenarios.corpus import code_text, corpus_languages, language_name
from scenarios.textfile import jsonl_objects, read_utf8

# Byte-level BPE tokenizers of Llama 3 and Qwen 2.5 average about 4 characters of English or code
# per token. This is the one estimate the project uses for prompt length targets; the server's
# `usage` is what results record.
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text`: ceil(characters / CHARS_PER_TOKEN)."""
    return max(1, -(-len(text) // CHARS_PER_TOKEN))


_FILES = {"chat": "prose.txt", "summarize": "prose.txt", "structured": "prose.txt", "sql": "sql.sql"}
CODE = "code"   # content/code/: the project's own code, a file per language, named for it


@cache
def builtin_languages() -> dict[str, str]:
    """The languages of the project's own code text, each with its file in content/code/."""
    folder = resources.files("scenarios") / "content" / CODE
    return {f.name.split(".")[0]: f.name for f in folder.iterdir() if f.is_file()}


@cache
def languages() -> tuple[str, ...]:
    """Every language a code tenant can name: its own code text's, and the code corpora's."""
    return tuple(sorted({*builtin_languages(), *corpus_languages()}))


def language_problem(language: str) -> str | None:
    """Why a code tenant cannot have `language` (one line naming the known ones); None when it can."""
    if language in languages():
        return None
    borrowed = {lang: name for lang, name in corpus_languages().items() if lang not in builtin_languages()}
    whence = (f"; the code prompts in {', '.join(borrowed)} are cut from the corpora "
              f"{', '.join(borrowed.values())}" if borrowed else "")
    return f"no text in language {language!r} (known: {', '.join(languages())}{whence})"


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


def _code(language: str) -> str:
    """The project's own code in `language`, else the solved problems of the corpus in it."""
    if language in builtin_languages():
        return (resources.files("scenarios") / "content" / CODE / builtin_languages()[language]).read_text()
    return code_text(language)


@cache
def _corpus(name: str, code: bool = False) -> tuple[str, np.ndarray]:
    """A content text (a domain's, a language's when `code`, or the path of a user's document)
    repeated to at least 64k characters, and its line-start offsets."""
    if code:
        text = _code(name)
    elif name in _FILES:
        text = (resources.files("scenarios") / "content" / _FILES[name]).read_text()
    else:
        text = read_utf8(name)
    if not text.endswith("\n"):
        text += "\n"
    text = text * max(1, -(-65536 // len(text)) + 1)
    # offsets in characters (UTF-32 has one code unit a character; UTF-8 would count bytes)
    starts = np.flatnonzero(np.frombuffer(text.encode("utf-32-le"), dtype="<u4") == ord("\n")) + 1
    return text, starts[starts < len(text) // 2]


@cache
def _questions() -> tuple[str, ...]:
    text = (resources.files("scenarios") / "content" / "chat.txt").read_text()
    return tuple(line for line in text.splitlines() if line)


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
    """One prompt of about `target_tokens` tokens (CHARS_PER_TOKEN characters each). `uid` makes
    its opening unique; `pick` chooses the instruction and where the body text starts; `source` is
    a summarize tenant's document or a custom tenant's prompts file."""
    if domain == "custom":
        prompts = custom_prompts(source)
        return prompts[pick % len(prompts)]
    head, body, start, tail = prompt_parts(domain, language, uid, pick, source)
    room = max(0, target_tokens * CHARS_PER_TOKEN - len(head) - len(tail))
    return head + body[start:start + room] + tail


def prompt_parts(domain: str, language: str | None, uid: int, pick: int,
                 source: str | None = None) -> tuple[str, str, int, str]:
    """A generated prompt's parts (not a custom tenant's, which are its file's lines): its head
    (its unique opening and its instruction), the content text its body is a stretch of and where
    that stretch starts (a line's start), and its tail. make_prompt cuts the stretch to a length in
    characters, scenarios.tokens to a count of a tokenizer's tokens."""
    tag = f"{uid:010x}"
    if domain == "chat":
        head = f"[session {tag}] {_questions()[pick % len(_questions())]}\n\nWhat I wrote earlier:\n"
        body_name = "chat"
    elif domain == "code":
        lang = language or "python"
        task = _CODE_TASKS[pick % len(_CODE_TASKS)]
        head = f"Ticket {tag}: in this {language_name(lang)} file, {task}.\n```{lang}\n"
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
    text, starts = _corpus(body_name, domain == "code")
    return head, text, int(starts[(pick // 7) % len(starts)]), tail
