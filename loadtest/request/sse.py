"""Turning an OpenAI-style SSE stream into measurements, one line at a time.

Pure: it is fed lines and the times they arrived, so it is tested without a server. The rules of
DESIGN.md "Measuring right under speculation" live here: TTFT at the first chunk that carries
text; tokens per chunk from the running usage (`continuous_usage_stats`), never from counting
events; the total from the final usage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson


class StreamError(Exception):
    """The stream cannot be measured: `kind` is an error kind of records.ERROR_KINDS."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class StreamMeasurement:
    sent: float                                   # monotonic seconds when the request was sent
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    running_usage: bool = True                    # every text chunk carried usage so far
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    done: bool = False
    saw_data: bool = False                        # a `data:` line came (else the body was not SSE)
    first_line: bytes = b""                       # the body's first line, to show when it was not SSE
    spec: dict | None = None                      # the server's metrics.speculative_decoding for this request
    text: list[str] | None = None                 # the answer's pieces, where kept (a conversation's next turn)
    _tokens_so_far: int = 0

    def feed(self, line: bytes, now: float) -> None:
        """One line of the body, as received at monotonic time `now`."""
        if not line.startswith(b"data:"):
            line = line.strip()
            if not line.startswith(b"data:"):
                if not self.saw_data and not self.first_line:
                    self.first_line = line[:120]
                return  # blank separators, comments (":"), event names
        self.saw_data = True
        data = line[5:]  # JSON allows the surrounding whitespace (" ", "\r") orjson then skips
        if len(data) < 16 and data.strip() == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise StreamError("malformed_stream", f"chunk is not JSON: {data.strip()[:120]!r}") from None
        if type(obj) is not dict:
            raise StreamError("malformed_stream", f"chunk is not a JSON object: {data.strip()[:120]!r}")
        if "error" in obj or obj.get("object") == "error":
            err = obj.get("error", obj)
            msg = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            raise StreamError("server_error", f"server error in stream: {msg}"[:500])
        usage = obj.get("usage")
        if "metrics" in obj:          # vLLM 0.29+ with --per-request-spec-decode-metrics: on the final usage chunk
            metrics = obj["metrics"]
            spec = metrics.get("speculative_decoding") if type(metrics) is dict else None
            if type(spec) is dict:
                self.spec = spec
        if usage is not None and type(usage) is dict:
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            completion = usage.get("completion_tokens")
            if completion is not None:
                self.completion_tokens = completion
        else:
            usage = completion = None
        choices = obj.get("choices")
        if not choices:
            return
        choice = choices[0]
        text = choice.get("text")
        if text is None:
            delta = choice.get("delta")
            text = delta.get("content") if delta else None
        reason = choice.get("finish_reason")
        if reason:
            self.finish_reason = reason
        if not text:
            return
        if self.text is not None:
            self.text.append(text)
        self.chunk_times.append(now)
        if completion is not None:
            # Tokens since the previous text chunk; tokens of empty-text chunks (held back by the
            # detokenizer) are attributed to the chunk that finally shows them.
            self.chunk_tokens.append(completion - self._tokens_so_far)
            self._tokens_so_far = completion
        else:
            self.running_usage = False

    @property
    def itl_ms(self) -> list[float]:
        prev, out = self.sent, []
        for t in self.chunk_times:
            out.append((t - prev) * 1e3)
            prev = t
        return out

    @property
    def tokens_per_chunk(self) -> list[int] | None:
        return self.chunk_tokens if self.running_usage and self.chunk_times else None


def _count(value) -> int | None:
    return value if type(value) is int and 0 <= value < 2**31 else None


def spec_counts(spec: dict) -> tuple[int | None, int | None, int | None, list[int] | None]:
    """(spec steps, draft tokens, accepted draft tokens, acceptance histogram) from a response's
    `metrics.speculative_decoding`; a field that is missing or not a count is None (the request
    itself still counts: this is the server's extra view of it, not its answer)."""
    hist = spec.get("acceptance_histogram")
    if type(hist) is not list or not all(_count(h) is not None for h in hist):
        hist = None
    return (_count(spec.get("num_spec_steps")), _count(spec.get("num_draft_tokens")),
            _count(spec.get("num_accepted_draft_tokens")), hist)

