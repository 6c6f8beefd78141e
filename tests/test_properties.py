"""Property-based tests (hypothesis, a fixed seed and a bounded number of examples, so CI is
repeatable) of what reads input from outside: the SSE parser, the scenario loader and the trace
importers. Arbitrary bytes never crash them with anything but their own one-line error; a valid
stream split at any byte boundary parses the same; whatever the loader accepts builds a trace that
keeps the trace contract (scenarios.trace.trace_problem)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

from contract.records import ERROR_KINDS
from loadtest.request.client import _read_loop
from loadtest.request.sse import StreamError, StreamMeasurement
from scenarios import ScenarioError
from scenarios.importers import ImportOptions, import_trace
from scenarios.spec import load_scenario
from scenarios.trace import build_trace, trace_problem

DATA = Path(__file__).with_name("data")
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


# ---- the SSE parser ---------------------------------------------------------------------------
def _event(text: str, tokens: int, finish: str | None = None) -> bytes:
    body = {"choices": [{"index": 0, "text": text, "finish_reason": finish}],
            "usage": {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3}}
    return b"data: " + json.dumps(body).encode()


class _Response:
    """geventhttpclient's response as _read_loop uses it: a body buffer that `feed` fills."""

    block_size = 4096

    def __init__(self) -> None:
        self.message_complete = False
        self._body_buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._body_buffer += data

    def release(self) -> None:
        pass


class _Socket:
    def __init__(self, pieces: list[bytes], resp: _Response) -> None:
        self.pieces, self.resp = list(pieces), resp

    def recv(self, n: int) -> bytes:
        if not self.pieces:
            self.resp.message_complete = True
            return b""
        return self.pieces.pop(0)


def _measure(pieces: list[bytes]) -> tuple:
    resp = _Response()
    m = StreamMeasurement(sent=0.0)
    try:
        _read_loop(resp, _Socket(pieces, resp), resp._body_buffer, m, 0.0)
        ended = None
    except StreamError as exc:
        ended = exc.kind
    return ended, m.chunk_tokens, m.completion_tokens, m.finish_reason, m.done, m.prompt_tokens


@st.composite
def streams(draw) -> bytes:
    texts = draw(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=12))
    eol = draw(st.sampled_from([b"\n\n", b"\r\n\r\n", b"\n"]))
    total, events = 0, []
    for i, text in enumerate(texts):
        total += draw(st.integers(1, 5))
        events.append(_event(text, total, "length" if i == len(texts) - 1 else None))
    if draw(st.booleans()):
        events.insert(0, b": a comment")
    return eol.join([*events, b"data: [DONE]"]) + eol


@seed(20261202)
@SETTINGS
@given(streams(), st.lists(st.integers(0, 10_000), max_size=20))
def test_a_valid_stream_split_at_any_byte_boundaries_parses_the_same(stream: bytes, cuts: list[int]):
    whole = _measure([stream])
    bounds = sorted({c % (len(stream) + 1) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *bounds], [*bounds, len(stream)], strict=True) if b > a]
    assert _measure(pieces) == whole
    assert whole[0] is None and whole[4] is True and whole[3] == "length"


@seed(20261202)
@SETTINGS
@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=8))
def test_arbitrary_bytes_end_as_a_classified_stream_error_or_a_measurement(body: bytes, cuts: list[int]):
    bounds = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True) if b > a]
    ended, *_ = _measure(pieces)   # nothing but a StreamError escapes
    assert ended is None or ended in ERROR_KINDS


@seed(20261202)
@SETTINGS
@given(st.lists(st.binary(max_size=300).map(lambda b: b"data: " + b), max_size=10))
def test_arbitrary_data_lines_never_crash_the_parser(lines: list[bytes]):
    m = StreamMeasurement(sent=0.0)
    for i, line in enumerate(lines):
        try:
            m.feed(line, float(i))
        except StreamError as exc:
            assert exc.kind and str(exc)
            break


# ---- the scenario loader ----------------------------------------------------------------------
BASE = tomllib.loads((DATA / "tiny-mix.toml").read_text())
NUMBERS = st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.just(0),
                    st.text(max_size=4), st.booleans(), st.none())


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return {float("inf"): "inf", float("-inf"): "-inf"}.get(value, "nan" if value != value else repr(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items() if v is not None) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(value)


def _write(data: dict, path: Path) -> None:
    lines, tables = [], []
    for k, v in data.items():
        if isinstance(v, dict) and k in ("arrival", "tenants"):
            tables.append((k, v))
        elif v is not None:
            lines.append(f"{k} = {_toml(v)}")
    for k, v in tables:
        if k == "tenants":
            for name, t in v.items():
                lines.append(f"[tenants.{name}]")
                lines += [f"{a} = {_toml(b)}" for a, b in t.items() if b is not None]   # None: the key left out
        else:
            lines.append(f"[{k}]")
            lines += [f"{a} = {_toml(b)}" for a, b in v.items() if b is not None]
    path.write_text("\n".join(lines) + "\n")


@st.composite
def scenarios(draw) -> dict:
    data = json.loads(json.dumps(BASE))
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(["arrival.rate", "tenants.chat.share", "tenants.rust.share",
                                      "tenants.chat.output_tokens.value", "tenants.rust.prompt_tokens.min",
                                      "tenants.rust.prompt_tokens.max", "tenants.chat.temperature", "seed",
                                      "tenants.chat.slo.ttft_p99_ms", "demo_requests"]))
        *path, leaf = where.split(".")
        node = data
        for p in path:
            node = node.setdefault(p, {})
        node[leaf] = draw(NUMBERS)
    if draw(st.booleans()):
        data["arrival"] = draw(st.sampled_from([{"process": "constant", "rate": 5.0},
                                                {"process": "onoff", "rate": 8.0, "on": 1.0, "off": 2.0},
                                                {"process": "gamma", "rate": 4.0, "cv": 2.0}]))
    return data


@seed(20261202)
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenarios())
def test_any_scenario_the_loader_accepts_builds_a_trace_that_keeps_the_contract(tmp_path, data: dict):
    path = tmp_path / "s.toml"
    _write(data, path)
    try:
        scenario, _ = load_scenario(path)
    except ScenarioError as exc:   # refused: in lines that name the key
        assert str(exc) and all(line.startswith(str(path)) for line in str(exc).splitlines()), str(exc)
        event("refused")
        return
    event("accepted")
    table = build_trace(scenario, requests=40, seed=1)
    assert table.num_rows == 40 and trace_problem(table) is None


@seed(20261202)
@SETTINGS
@given(st.binary(max_size=400))
def test_arbitrary_bytes_as_a_scenario_are_one_clear_error(tmp_path, raw: bytes):
    path = tmp_path / "s.toml"
    path.write_bytes(raw)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    assert str(exc.value)


# ---- the trace importers ----------------------------------------------------------------------
@seed(20261202)
@SETTINGS
@given(st.sampled_from(["jsonl", "sharegpt", "azure", "burstgpt"]), st.one_of(
    st.binary(max_size=600),
    st.lists(st.dictionaries(st.sampled_from(["prompt", "output_tokens", "max_tokens", "timestamp", "tenant",
                                              "conversations", "messages"]),
                             st.one_of(st.text(max_size=20), st.integers(-3, 10**7), st.floats(), st.none(),
                                       st.lists(st.dictionaries(st.sampled_from(["from", "value", "role",
                                                                                 "content"]),
                                                                st.text(max_size=10)), max_size=3))),
             max_size=6).map(lambda rows: "\n".join(json.dumps(r) for r in rows).encode())))
def test_an_importer_given_anything_makes_a_valid_trace_or_says_why(tmp_path, fmt: str, raw: bytes):
    path = tmp_path / f"in.{'csv' if fmt in ('azure', 'burstgpt') else 'jsonl'}"
    path.write_bytes(raw)
    try:
        imported = import_trace(path, fmt, ImportOptions())
    except ScenarioError as exc:
        assert str(exc)
        event("refused")
        return
    event("imported")
    assert imported.table.num_rows > 0 and trace_problem(imported.table) is None
