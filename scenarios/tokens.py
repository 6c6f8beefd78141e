"""Prompt lengths in a model's own tokens (`--tokenizer PATH`, the model's tokenizer.json, read by
the `tokenizers` library): a generated prompt is cut to its target count exactly, and the trace's
`prompt_tokens_est` is then each prompt's count, not an estimate (scenarios.prompts.CHARS_PER_TOKEN).
A trace says which it used in its metadata (META_TOKENIZER: `ESTIMATE`, or the file's name and
SHA-256).

What is counted is what the server counts before any chat template: a completions request's
prompt with the tokens the tokenizer adds around a text (`special`: a BOS, where its tokenizer.json
adds one, as vLLM does for completions), a chat request's message contents without them (the
server's count adds its chat template's tokens, which no tokenizer.json holds).

How it stays fast. Counting every prompt whole costs about a second per 2 MB of text on this
project's 2-core machines, and a 50,000-request saas-mix holds about 230 MB. A generated prompt is
a head (unique to its request), a stretch of a content text and a tail (scenarios.prompts). A
tokenizer with a pre-tokenizer (every byte-level BPE: Llama 3, Qwen 2.5, GPT-2) splits a text into
pieces (a word, a run of spaces, punctuation) and tokenizes each piece alone, so inside a stretch
the pieces and their tokens are the content text's own, counted once (`_Text`). Only the two ends
are counted per prompt, piece by piece: the head with the stretch's first pieces, up to where the
pieces agree with the content text's again, and the stretch's last pieces with the tail. One
prompt in CHECK_EVERY is also counted whole by the tokenizer, as a check; where the two differ,
or the tokenizer has no pre-tokenizer (or a normalizer that changes the text), every prompt is
counted whole from then on: exact, and slower.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common.exits import one_line
from common.validation import file_problem, file_state, shown_name
from scenarios import ScenarioError
from scenarios.prompts import CHARS_PER_TOKEN

ESTIMATE = f"estimate: {CHARS_PER_TOKEN} characters a token"
CHECK_EVERY = 256       # one prompt in this many is also counted whole by the tokenizer, as a check
AGREE_PIECES = 2        # a stretch's pieces agree with its content text's after this many boundaries in a row
HEAD_PIECES = 4         # the stretch's first pieces counted with its head, for them to agree in (or 4x)
TAIL_CHARS = 16         # the stretch's last characters (and AGREE_PIECES pieces more) counted with its tail
INNER_TRIES = 16        # cut points tried inside one piece, for the count to land on the target
WHOLE_ROUNDS = 4        # counted whole: the cuts corrected this many times at most


@dataclass(frozen=True)
class _Text:
    """A content text's pieces, counted once: where each starts (and the text's end, last), and the
    tokens before each of those."""

    text: str
    at: list[int]
    before: np.ndarray


@dataclass(frozen=True)
class Cut:
    """Where to cut one prompt: `head` + `body[start:end]` + `tail`, `end` chosen for `target`
    tokens."""

    head: str
    body: str
    start: int
    tail: str
    target: int


class TokenCounter:
    """A tokenizer.json's counts of prompts, and prompts cut to a count."""

    def __init__(self, tokenizer, label: str) -> None:
        self._tok = tokenizer
        self.label = label          # what the trace's metadata says was used
        self.special = (len(tokenizer.encode("a", add_special_tokens=True).ids)
                        - len(tokenizer.encode("a", add_special_tokens=False).ids))
        self.whole = tokenizer.pre_tokenizer is None   # every prompt counted whole (see the module's notes)
        self._piece_tokens: dict[str, int] = {}
        self._texts: dict[str, _Text | None] = {}
        self._counted: dict[str, int] = {}
        self._tails: dict[str, tuple[int, _Text | None]] = {}
        self._seen = 0

    # ---- counting whole ----------------------------------------------------------------------------
    def count(self, texts: list[str]) -> np.ndarray:
        """Each text's tokens (without the special ones), counted whole; a text seen before is not
        counted again (a system prompt, a prompts file's line, a conversation's later question)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._counted))
        if todo:
            for text, enc in zip(todo, self._tok.encode_batch_fast(todo, add_special_tokens=False), strict=True):
                self._counted[text] = len(enc.ids)
        return np.array([self._counted[t] for t in texts], dtype=np.int64)

    def _whole(self, texts: list[str]) -> np.ndarray:
        return np.array([len(e.ids) for e in self._tok.encode_batch_fast(texts, add_special_tokens=False)],
                        dtype=np.int64)

    # ---- counting by pieces ------------------------------------------------------------------------
    def _pieces(self, text: str) -> tuple[list[int], list[int]] | None:
        """Where each piece of `text` starts and its tokens; None where the normalizer changes the
        text (its pieces' places are then not the text's)."""
        norm = self._tok.normalizer
        if norm is not None and norm.normalize_str(text) != text:
            return None
        pieces = self._tok.pre_tokenizer.pre_tokenize_str(text)
        known = self._piece_tokens
        return [a for _, (a, _) in pieces], [known.get(p) or self._piece(p) for p, _ in pieces]

    def _piece(self, piece: str) -> int:
        n = self._piece_tokens[piece] = len(self._tok.model.tokenize(piece))
        return n

    def _text(self, body: str) -> _Text | None:
        """A content text's pieces and the tokens before each, made once."""
        if body not in self._texts:
            found = self._pieces(body)
            self._texts[body] = None if found is None else _Text(
                body, [*found[0], len(body)], np.concatenate([[0], np.cumsum(found[1], dtype=np.int64)]))
        return self._texts[body]

    def _scan(self, text: str) -> int | None:
        found = self._pieces(text)
        return None if found is None else sum(found[1])

    def _joined(self, head: str, src: _Text, start: int) -> tuple[int, int, list[int]] | None:
        """`head` followed by `src`'s text from `start`: the first boundary of the text's pieces after
        `start` from which the joined text's pieces are the text's own (AGREE_PIECES boundaries in a
        row agree), the joined text's tokens before it, and where the joined pieces start (places in
        `src`'s text, `head`'s negative); None where they do not agree within 4 x HEAD_PIECES pieces."""
        at = src.at
        k0 = bisect_left(at, start + 1)
        for pieces in (HEAD_PIECES, 4 * HEAD_PIECES):
            kw = min(len(at) - 1, k0 + pieces)
            found = self._pieces(head + src.text[start:at[kw]])
            if found is None:
                return None
            shift = start - len(head)
            places = [a + shift for a in found[0]]
            seen = set(places)
            for k in range(k0, kw - AGREE_PIECES + 1):
                if all(at[k + i] in seen for i in range(AGREE_PIECES)):
                    return k, sum(n for a, n in zip(places, found[1], strict=True) if a < at[k]), places
        return None

    def _tail(self, tail: str) -> tuple[int, _Text | None]:
        """A tail's tokens alone, and its pieces where it has enough of them to be joined by them."""
        if tail not in self._tails:
            text = self._text(tail)
            long = text is not None and len(text.at) > HEAD_PIECES + AGREE_PIECES + 2
            self._tails[tail] = (int(text.before[-1]) if text is not None else int(self._whole([tail])[0]),
                                 text if long else None)
        return self._tails[tail]

    def _right(self, src: _Text, k: int, end: int, tail: str) -> int | None:
        """The tokens of the content text's pieces from boundary `k` to `end`, then `tail`, as the
        prompt has them: the text's own count up to a boundary TAIL_CHARS (and AGREE_PIECES pieces)
        before the end, whose pieces counted again with the tail agree (a long tail joined by its own
        pieces, as the head is to the body); None where they do not."""
        at = src.at
        r = bisect_right(at, end - TAIL_CHARS) - 1 - AGREE_PIECES
        if r <= k:
            return None
        lead = src.text[at[r]:end]
        _, pieces = self._tail(tail)
        if pieces is None:
            found = self._pieces(lead + tail)
            if found is None:
                return None
            places, n = [a + at[r] for a in found[0]], sum(found[1])
        else:
            joined = self._joined(lead, pieces, 0)
            if joined is None:
                return None
            kt, n, places = joined
            places = [a + end for a in places]
            n += int(pieces.before[-1] - pieces.before[kt])
        seen = set(places)
        if not all(at[r + i] in seen for i in range(1, AGREE_PIECES + 1)):
            return None
        return int(src.before[r] - src.before[k]) + n

    def _at(self, c: Cut, src: _Text, left: tuple[int, int, list[int]] | None, end: int) -> int:
        """The tokens of `c` cut at `end`: by pieces where the ends agree, else the prompt's own pieces
        (a short one), else counted whole."""
        if left is not None:
            right = self._right(src, left[0], end, c.tail)
            if right is not None:
                return left[1] + right
        text = c.head + c.body[c.start:end] + c.tail
        if end - c.start <= 4 * HEAD_PIECES * CHARS_PER_TOKEN + 4 * TAIL_CHARS:
            n = self._scan(text)
            if n is not None:
                return n
        return int(self._whole([text])[0])

    def _cut_one(self, c: Cut) -> tuple[int, int]:
        """Where to end `c`'s body so the prompt has `c.target` tokens (or, where no cut point gives
        exactly that, the nearest under it), and its count there."""
        src = self._text(c.body)
        at, before = src.at, src.before
        left = self._joined(c.head, src, c.start)
        count = lambda end: self._at(c, src, left, end)  # noqa: E731
        tail, _ = self._tail(c.tail)
        # the text's own count says where the target falls; the ends' counts move it a piece or two
        k, known = (left[0], left[1]) if left is not None else (bisect_left(at, c.start + 1), self._scan(c.head) or 0)
        if c.target <= known + tail + AGREE_PIECES:   # the head and the tail alone may be too many
            floor = count(c.start)
            if floor >= c.target:
                return c.start, floor
        j = int(np.searchsorted(before, before[k] + c.target - known - tail, side="right")) - 1
        j = max(bisect_left(at, c.start + 1), min(len(at) - 2, j))
        n = count(at[j])
        while n > c.target and at[j - 1] > c.start:
            j -= 1
            n = count(at[j])
        # the next boundary, where its piece's own tokens do not carry the count past the target
        while n < c.target and j + 1 < len(at) and n + before[j + 1] - before[j] <= c.target + 1:
            nxt = count(at[j + 1])
            if nxt > c.target:
                break
            j, n = j + 1, nxt
        best = (at[j], n)
        if n == c.target:
            return best
        for end in range(at[j] + 1, min(at[j + 1], at[j] + 1 + INNER_TRIES)):   # inside the next piece
            m = count(end)
            if m == c.target:
                return end, m
            if best[1] < m < c.target:
                best = (end, m)
        return best

    # ---- what a trace asks ----------------------------------------------------------------------
    def cut(self, cuts: list[Cut]) -> tuple[list[str], np.ndarray]:
        """The prompts, each cut to its target (tokens without the special ones), and each one's
        count."""
        if self.whole or any(self._text(c.body) is None for c in cuts):
            return self._cut_whole(cuts)
        ends, counts = [], np.empty(len(cuts), dtype=np.int64)
        for i, c in enumerate(cuts):
            end, counts[i] = self._cut_one(c)
            ends.append(end)
        texts = [c.head + c.body[c.start:end] + c.tail for c, end in zip(cuts, ends, strict=True)]
        if not self._checked(texts, counts):
            return self._cut_whole(cuts)
        return texts, counts

    def joined(self, heads: list[str], bodies: list[str]) -> np.ndarray:
        """The tokens of each head followed by its whole body (a corpus item after its request's own
        first line), without the special ones."""
        counts = np.empty(len(heads), dtype=np.int64)
        for i, (head, body) in enumerate(zip(heads, bodies, strict=True)):
            src = None if self.whole else self._text(body)
            if src is None:
                counts[i] = -1
                continue
            left = self._joined(head, src, 0)
            whole = Cut(head, body, 0, "", 0)
            counts[i] = (left[1] + int(src.before[-1] - src.before[left[0]]) if left is not None
                         else self._at(whole, src, None, len(body)))
        texts = [h + b for h, b in zip(heads, bodies, strict=True)]
        missing = np.flatnonzero(counts < 0)
        if len(missing):
            counts[missing] = self._whole([texts[i] for i in missing])
        if not self._checked(texts, counts):
            return self._whole(texts)
        return counts

    def _checked(self, texts: list[str], counts: np.ndarray) -> bool:
        """One prompt in CHECK_EVERY counted whole too: whether every one of those agrees (if not,
        every prompt is counted whole from now on)."""
        picks = [i for i in range(len(texts)) if (self._seen + i) % CHECK_EVERY == 0]
        self._seen += len(texts)
        if picks and not np.array_equal(self._whole([texts[i] for i in picks]), counts[picks]):
            self.whole = True
        return not self.whole

    def _cut_whole(self, cuts: list[Cut]) -> tuple[list[str], np.ndarray]:
        """`cut`, each prompt counted whole: its end moved by the characters a token takes in it, a
        few rounds; the counts are exact, the prompts near their targets."""
        self.whole = True
        ends = [min(len(c.body), c.start + max(0, c.target * CHARS_PER_TOKEN - len(c.head) - len(c.tail)))
                for c in cuts]
        counts = np.zeros(len(cuts), dtype=np.int64)
        todo = list(range(len(cuts)))
        for _ in range(WHOLE_ROUNDS):
            texts = [cuts[i].head + cuts[i].body[cuts[i].start:ends[i]] + cuts[i].tail for i in todo]
            counts[todo] = self._whole(texts)
            todo = [i for i in todo if counts[i] != cuts[i].target]
            for i in todo:
                chars = max(1, ends[i] - cuts[i].start + len(cuts[i].head) + len(cuts[i].tail))
                step = round((cuts[i].target - counts[i]) * chars / max(1, counts[i]))
                ends[i] = min(len(cuts[i].body), max(cuts[i].start, ends[i] + (step or int(np.sign(
                    cuts[i].target - counts[i])))))
            if not todo:
                break
        texts = [c.head + c.body[c.start:e] + c.tail for c, e in zip(cuts, ends, strict=True)]
        return texts, self._whole(texts)


def load_tokenizer(path: str) -> TokenCounter:
    """The tokenizer.json at `path`; a ScenarioError, one line, where it is not one."""
    state = file_state(Path(path))
    if state != "file":
        raise ScenarioError(f"--tokenizer {shown_name(path)} {file_problem(state)}")
    raw = Path(path).read_bytes()
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_str(raw.decode())
    except Exception as exc:   # the library's parse errors are plain Exceptions (and UnicodeDecodeError)
        raise ScenarioError(f"--tokenizer {shown_name(path)}: not a tokenizer.json (the `tokenizers` library's "
                            f"file, as a model's repository has it): {one_line(exc)[:200]}") from None
    return TokenCounter(tokenizer, f"{Path(path).name} sha256 {hashlib.sha256(raw).hexdigest()}")
