"""Measuring a stream: TTFT at the first text chunk, tokens per chunk from the running usage."""

from __future__ import annotations

import json

import pytest

from loadtest.request.sse import StreamError, StreamMeasurement


def _line(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n"


def _chunk(text: str, done_tokens: int | None, finish=None) -> bytes:
    obj = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    if done_tokens is not None:
        obj["usage"] = {"prompt_tokens": 10, "completion_tokens": done_tokens, "total_tokens": 10 + done_tokens}
    return _line(obj)


def test_five_tokens_per_chunk_are_measured_per_chunk():
    m = StreamMeasurement(sent=100.0)
    t = 100.0
    m.feed(_line({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
                  "usage": {"prompt_tokens": 10, "completion_tokens": 0}}), 100.01)  # role only: no TTFT
    for i in range(1, 5):
        t += 0.05
        m.feed(_chunk(" a b c d e", 5 * i, "length" if i == 4 else None), t)
        m.feed(b"\n", t)
    m.feed(_line({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 20}}), t)
    m.feed(b"data: [DONE]\n", t)
    assert m.done and m.completion_tokens == 20 and m.finish_reason == "length"
    assert m.tokens_per_chunk == [5, 5, 5, 5]
    assert m.itl_ms == pytest.approx([50.0] * 4)  # itl_ms[0] is the TTFT
    ttft, e2e = m.itl_ms[0], sum(m.itl_ms)
    assert (e2e - ttft) / (m.completion_tokens - 1) == pytest.approx(150 / 19)


def test_without_running_usage_chunk_tokens_stay_empty():
    m = StreamMeasurement(sent=0.0)
    m.feed(_chunk(" x y", None), 0.1)
    m.feed(_chunk(" z", None), 0.2)
    m.feed(_line({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}), 0.2)
    assert m.tokens_per_chunk is None and m.completion_tokens == 3 and len(m.itl_ms) == 2


def test_tokens_of_empty_text_chunks_go_to_the_next_text_chunk():
    m = StreamMeasurement(sent=0.0)
    m.feed(_chunk(" a", 1), 0.1)
    m.feed(_chunk("", 3), 0.2)      # detokenizer held back two tokens
    m.feed(_chunk(" bcd", 4), 0.3)
    assert m.tokens_per_chunk == [1, 3]


def test_malformed_and_error_chunks_raise_with_their_kind():
    with pytest.raises(StreamError) as e:
        StreamMeasurement(sent=0).feed(b"data: {not json\n", 0.1)
    assert e.value.kind == "malformed_stream"
    with pytest.raises(StreamError) as e:
        StreamMeasurement(sent=0).feed(_line({"error": {"message": "engine died", "code": 500}}), 0.1)
    assert e.value.kind == "server_error" and "engine died" in str(e.value)
