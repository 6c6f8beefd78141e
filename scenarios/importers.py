"""Real traces, as users have them, turned into traces the replayer takes.

Formats: ShareGPT-style JSON conversations; JSONL (`prompt`, `max_tokens`, optional
`timestamp` in seconds and `tenant`); the Azure LLM inference trace CSV (`TIMESTAMP,
ContextTokens, GeneratedTokens`); the BurstGPT CSV (`Timestamp, Model, Request tokens, Response
tokens, ...`). Where a trace has only lengths, prompts are generated to those lengths; where it
has no times, arrivals are Poisson at `rate`. Every problem is one line naming the file and the
row or line. Nothing is dropped silently: rows that cannot be replayed (a conversation with no
answer, a request that generated nothing) are counted by reason in the result.

ShareGPT conversations are replayed turn by turn: each user turn that has an answer after it is a
request (after any system turns, which are kept as system messages), the length of that answer sets
its `max_tokens`, and a later turn carries the conversation so far; the replay sends it
`think_s` (`--think-time`) after the previous turn's answer, with the answer the server gave in
place of the recorded one (scenarios/trace.py's conversation columns). `first_turn_only` keeps
only the first turn, as `vllm bench serve` reads ShareGPT. A conversation is sampled or windowed
whole, by its first turn's time.

JSONL requests go to the completions API, or the chat API where a line says `"api": "chat"` or
gives `messages` (or `--api chat` says so for the file); a chat line with only a `prompt` sends it
as one user message.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa

from scenarios import ScenarioError
from scenarios.limits import ROW_BYTES, check_memory, check_span
from scenarios.prompts import CHARS_PER_TOKEN, estimate_tokens, make_prompt
from scenarios.spec import MAX_TOKENS
from scenarios.textfile import jsonl_objects, read_utf8
from scenarios.trace import Targets, attach_slos, trace_table

FORMATS = ("sharegpt", "jsonl", "azure", "burstgpt")
APIS = ("completions", "chat")


@dataclass(frozen=True)
class ImportOptions:
    speedup: float = 1.0                        # divide the trace's times by this
    window: tuple[float, float] | None = None   # keep [start, end) seconds of the original timeline
    sample: float | None = None                 # keep N rows (>= 1) or this fraction (< 1), seeded
    rate: float = 1.0                           # Poisson arrivals per second for untimed traces
    seed: int = 0
    think_s: float = 0.0                        # a later turn's wait after the previous answer (no times)
    first_turn_only: bool = False               # ShareGPT: one request per conversation, its first turn
    api: str | None = None                      # JSONL: the API of lines that do not say (None: completions)
    slo: Targets = ()                           # p99 targets attached to the trace, per tenant or for all


@dataclass
class _Rows:
    tenant: list[str]
    prompt: list[str | None]
    messages: list[str | None]
    api: list[str]
    max_tokens: list[int]
    times: list[float] | None                   # seconds, any origin; None: untimed
    ignore_eos: bool
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> rows of the file not replayed
    notes: Counter[str] = field(default_factory=Counter)    # reason -> rows replayed in part
    # per row, a conversation's later turns: (messages JSON, max_tokens), sent one after the other
    later: list[list[tuple[str, int]]] = field(default_factory=list)


@dataclass(frozen=True)
class Imported:
    """An imported trace and what became of the file's rows."""

    table: pa.Table
    read: int                       # requests (rows, lines, conversations) in the file
    dropped: dict[str, int]         # reason -> rows not replayed
    notes: dict[str, int]           # reason -> rows replayed in part

    def describe(self) -> list[str]:
        """One line per reason a row was dropped or shortened, for the console."""
        out = [f"dropped {n:,} of {self.read:,}: {why}" for why, n in self.dropped.items()]
        return out + [f"{n:,} of {self.read:,}: {why}" for why, n in self.notes.items()]


ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "bard": "assistant",
         "bing": "assistant", "assistant": "assistant", "model": "assistant", "system": "system"}


def _sharegpt(path: Path, first_turn_only: bool) -> _Rows:
    try:
        data = orjson.loads(read_utf8(path))
    except orjson.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise ScenarioError(f"{path}: expected a JSON list of conversations")
    rows = _Rows([], [], [], [], [], None, ignore_eos=False)
    for i, conv in enumerate(data):
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise ScenarioError(f"{path}: conversation {i}: missing 'conversations' list of turns")
        roles = [ROLES.get(str(t.get("from", "")).lower()) for t in turns]
        first = next((k for k, r in enumerate(roles) if r != "system"), None)
        if first is None:
            rows.dropped["no user turn"] += 1
            continue
        if roles[first] != "user":
            rows.dropped[f"the conversation starts with a {turns[first].get('from')!r} turn, not a user turn"] += 1
            continue
        text = turns[first].get("value")
        if not isinstance(text, str) or not text.strip():
            rows.dropped["the first user turn is empty"] += 1
            continue
        if first + 1 >= len(turns) or roles[first + 1] != "assistant":
            rows.dropped["the first user turn has no answer after it"] += 1
            continue
        history = [{"role": "system", "content": str(t.get("value", ""))} for t in turns[:first]]
        pairs = _exchanges(turns, roles, first)
        if first_turn_only and len(pairs) > 1:
            rows.notes["multi-turn: only the first user turn and its answer are replayed (--first-turn-only)"] += 1
            pairs = pairs[:1]
        elif 2 * len(pairs) < len(turns) - first:
            rows.notes[f"multi-turn: replayed up to turn {len(pairs)}, the last user turn with an answer after "
                       "it in order"] += 1
        later: list[tuple[str, int]] = []
        so_far = list(history)
        for k, (ask, answer) in enumerate(pairs):
            so_far.append({"role": "user", "content": ask})
            if k:
                later.append((orjson.dumps(so_far).decode(), max(1, estimate_tokens(answer))))
            so_far.append({"role": "assistant", "content": answer})
        rows.tenant.append("sharegpt")
        rows.messages.append(orjson.dumps([*history, {"role": "user", "content": text}]).decode())
        rows.prompt.append(None)
        rows.api.append("chat")
        rows.max_tokens.append(max(1, estimate_tokens(pairs[0][1])))
        rows.later.append(later)
    return rows


def _exchanges(turns: list[dict], roles: list[str | None], first: int) -> list[tuple[str, str]]:
    """The conversation's (user turn, its answer) pairs from `first` on, in order, up to the first
    that breaks the pattern (a turn that is neither, two of one kind in a row, an empty user turn)."""
    pairs = []
    for k in range(first, len(turns) - 1, 2):
        ask, answer = turns[k].get("value"), turns[k + 1].get("value")
        if roles[k] != "user" or roles[k + 1] != "assistant" or not isinstance(ask, str) or not ask.strip():
            break
        pairs.append((ask, str(answer or "")))
    return pairs


SHOWN_KINDS = 3   # a file's problems said at once: its first line of each kind, for this many kinds


def problems_text(path: Path, problems: list[tuple[int, str]]) -> str:
    """Every problem of a file in at most SHOWN_KINDS lines: the first line of each kind (what
    comes before the first colon: the field, or the line's JSON), with how many more lines have it,
    then how many more of other kinds."""
    kinds: dict[str, list[tuple[int, str]]] = {}
    for n, problem in problems:
        kinds.setdefault(problem.split(":", 1)[0], []).append((n, problem))
    out = []
    for same in list(kinds.values())[:SHOWN_KINDS]:
        n, problem = same[0]
        more = f" (and {len(same) - 1:,} more line(s) like it)" if len(same) > 1 else ""
        out.append(f"{path}:{n}: {problem}{more}")
    rest = sum(len(same) for same in list(kinds.values())[SHOWN_KINDS:])
    if rest:
        out.append(f"{path}: and {rest:,} more line(s) with {len(kinds) - SHOWN_KINDS} other kind(s) of problem")
    return "\n".join(out)


def _jsonl(path: Path, default_api: str | None) -> _Rows:
    """Every line checked before any is refused, so one import says every kind of problem."""
    rows = _Rows([], [], [], [], [], [], ignore_eos=False)
    timed = True
    problems: list[tuple[int, str]] = []
    for n, obj in jsonl_objects(path, lambda n, problem: problems.append((n, problem))):
        mt, ts, msgs = obj.get("max_tokens"), obj.get("timestamp"), obj.get("messages")
        api = obj.get("api", "chat" if msgs is not None else default_api or "completions")
        found = len(problems)
        if api not in APIS:
            problems.append((n, f"api: expected one of {', '.join(APIS)}, got {api!r}"))
        elif msgs is not None:
            if api != "chat":
                problems.append((n, "messages: only for the chat API (the line says api 'completions')"))
            elif not _messages_ok(msgs):
                problems.append((n, "messages: expected a list of {\"role\": ..., \"content\": \"...\"} objects "
                                    "ending with a user message"))
        elif not isinstance(obj.get("prompt"), str):
            problems.append((n, "prompt: required string is missing (or give messages, for the chat API)"))
        if not isinstance(mt, int) or isinstance(mt, bool) or not 1 <= mt <= MAX_TOKENS:
            problems.append((n, f"max_tokens: expected an integer from 1 to {MAX_TOKENS:,} (the trace stores int32), "
                                f"got {mt!r}"))
        if ts is not None and (not isinstance(ts, int | float) or isinstance(ts, bool) or not math.isfinite(ts)):
            problems.append((n, f"timestamp: expected seconds as a finite number, got {ts!r}"))
        if len(problems) > found:
            continue
        timed = timed and ts is not None
        rows.tenant.append(str(obj.get("tenant", "jsonl")))
        if api == "chat":
            rows.messages.append(orjson.dumps(msgs if msgs is not None else
                                              [{"role": "user", "content": obj["prompt"]}]).decode())
            rows.prompt.append(None)
        else:
            rows.prompt.append(obj["prompt"])
            rows.messages.append(None)
        rows.api.append(api)
        rows.max_tokens.append(mt)
        rows.times.append(float(ts) if ts is not None else 0.0)
        rows.later.append([])
    if problems:
        raise ScenarioError(problems_text(path, sorted(problems)))
    if not timed:
        rows.times = None
    return rows


def _messages_ok(msgs: object) -> bool:
    return (isinstance(msgs, list) and bool(msgs) and all(
        isinstance(m, dict) and m.get("role") in ("system", "user", "assistant") and isinstance(m.get("content"), str)
        for m in msgs) and msgs[-1]["role"] == "user")


def _csv_rows(path: Path, required: list[str]) -> list[dict[str, str]]:
    with io.StringIO(read_utf8(path), newline="") as f:
        reader = csv.DictReader(f)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in required if c not in header]
        if missing:
            raise ScenarioError(f"{path}: missing column {missing[0]!r} (columns: {', '.join(header)})")
        return [{k.strip(): (v or "").strip() for k, v in row.items() if k} for row in reader]


def _float(path: Path, row: int, col: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(f"{path}: row {row}: {col}: expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ScenarioError(f"{path}: row {row}: {col}: expected a finite number, got {text!r}")
    return value


def _int(path: Path, row: int, col: str, text: str) -> int:
    """A token count: from 0 to MAX_TOKENS (the trace stores int32)."""
    value = _float(path, row, col, text)
    if not 0 <= value <= MAX_TOKENS:
        raise ScenarioError(f"{path}: row {row}: {col}: expected a count from 0 to {MAX_TOKENS:,} (the trace stores "
                            f"int32), got {text!r}")
    return int(value)


def _lengths_only(path: Path, rows_in, tenant_of, time_of, prompt_col: str, output_col: str) -> _Rows:
    rows = _Rows([], [], [], [], [], [], ignore_eos=True)
    for i, r in enumerate(rows_in, 2):
        out = _int(path, i, output_col, r[output_col])
        if out < 1:  # a failed request in the source: nothing was generated, nothing to replay
            rows.dropped[f"{output_col} is 0 (the request generated nothing in the source)"] += 1
            continue
        rows.tenant.append(tenant_of(r))
        rows.prompt.append(f"{_int(path, i, prompt_col, r[prompt_col])}")  # a length, made a prompt below
        rows.messages.append(None)
        rows.api.append("completions")
        rows.max_tokens.append(out)
        rows.times.append(time_of(i, r))
        rows.later.append([])
    return rows


def _azure(path: Path) -> _Rows:
    def when(i: int, r: dict) -> float:
        text = r["TIMESTAMP"]
        head, _, frac = text.partition(".")
        try:
            base = datetime.fromisoformat(head)
        except ValueError:
            raise ScenarioError(
                f"{path}: row {i}: TIMESTAMP: expected 'YYYY-MM-DD HH:MM:SS[.f]', got {text!r}") from None
        return base.timestamp() + (float(f"0.{frac}") if frac else 0.0)

    rows = _csv_rows(path, ["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    return _lengths_only(path, rows, lambda r: "azure", when, "ContextTokens", "GeneratedTokens")


def _burstgpt(path: Path) -> _Rows:
    rows = _csv_rows(path, ["Timestamp", "Request tokens", "Response tokens"])
    return _lengths_only(path, rows, lambda r: r.get("Model") or "burstgpt",
                         lambda i, r: _float(path, i, "Timestamp", r["Timestamp"]), "Request tokens", "Response tokens")


def import_trace(path: Path, fmt: str, opts: ImportOptions = ImportOptions()) -> Imported:
    if fmt not in FORMATS:
        raise ScenarioError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if not path.is_file():
        raise ScenarioError(f"trace file {str(path)!r} does not exist")
    if opts.api is not None and fmt != "jsonl":
        raise ScenarioError(f"--api: only for a jsonl file (a {fmt} trace says its own API)")
    if opts.first_turn_only and fmt != "sharegpt":
        raise ScenarioError(f"--first-turn-only: only for a sharegpt file (a {fmt} trace has no turns)")
    read_rows = {"sharegpt": lambda p: _sharegpt(p, opts.first_turn_only), "jsonl": lambda p: _jsonl(p, opts.api),
                 "azure": _azure, "burstgpt": _burstgpt}[fmt]
    rows = read_rows(path)
    n = len(rows.max_tokens)
    read = n + sum(rows.dropped.values())
    if n == 0:
        why = "; ".join(f"{k}: {v}" for k, v in rows.dropped.items())
        raise ScenarioError(f"{path}: no requests found" + (f" (of {read} rows, {why})" if why else ""))
    rng = np.random.default_rng(opts.seed)
    if rows.times is None:
        gaps = rng.exponential(1.0 / opts.rate, size=n)
        gaps[0] = 0.0
        times = np.cumsum(gaps)
    else:
        times = np.asarray(rows.times, dtype=np.float64)
        times -= times.min()
    keep = np.ones(n, dtype=bool)
    if opts.window is not None:
        keep &= (times >= opts.window[0]) & (times < opts.window[1])
        if (~keep).sum():
            rows.dropped[f"outside --window {opts.window[0]:g}:{opts.window[1]:g}"] += int((~keep).sum())
    idx = np.flatnonzero(keep)
    if opts.sample is not None and len(idx):
        k = int(opts.sample) if opts.sample >= 1 else max(1, round(opts.sample * len(idx)))
        if k < len(idx):
            rows.dropped[f"not in the --sample of {k:,}"] += len(idx) - k
        idx = np.sort(rng.choice(idx, size=min(k, len(idx)), replace=False))
    if len(idx) == 0:
        raise ScenarioError(f"{path}: no requests left after --window/--sample")
    idx = idx[np.argsort(times[idx], kind="stable")]
    offsets = (times[idx] - times[idx].min()) / opts.speedup
    check_span(float(offsets[-1]), f"{path}: its {len(idx):,} requests (timestamps from {times[idx].min():g} to "
               f"{times[idx].max():g} s, --speedup {opts.speedup:g})", "a --window of it, or a higher --speedup")

    if rows.ignore_eos:   # lengths only: the prompts are made here, as long as the source says
        check_memory(len(idx), ROW_BYTES + CHARS_PER_TOKEN * float(np.mean([int(rows.prompt[i]) for i in idx])),
                     f"{path}: its {len(idx):,} requests' prompt lengths")
    uids = rng.integers(0, 2**40, size=len(idx)).tolist()
    out: dict[str, list] = {k: [] for k in ("unit", "offset_s", "prompt", "messages", "max_tokens", "conversation",
                                            "turn", "think_s")}
    width = max(6, len(str(len(idx) - 1)))
    for j, i in enumerate(idx.tolist()):
        p = rows.prompt[i]
        if rows.ignore_eos:  # lengths only: generate a prompt of that many tokens
            p = make_prompt("chat", None, int(p), uids[j], uids[j] >> 8)
        conv = f"c{j:0{width}d}" if rows.later[i] else None
        turns = [(p, rows.messages[i], rows.max_tokens[i]), *[(None, m, t) for m, t in rows.later[i]]]
        for k, (prompt, messages, max_tokens) in enumerate(turns):
            out["unit"].append(i)
            out["offset_s"].append(float(offsets[j]) + k * opts.think_s)
            out["prompt"].append(prompt)
            out["messages"].append(messages)
            out["max_tokens"].append(max_tokens)
            out["conversation"].append(conv)
            out["turn"].append(k if conv else None)
            out["think_s"].append(opts.think_s if k else None)
    order = np.argsort(np.asarray(out["offset_s"]), kind="stable")   # a later turn after what comes before it
    out = {k: [v[o] for o in order.tolist()] for k, v in out.items()}
    m = len(order)
    check_span(out["offset_s"][-1], f"{path}: its {m:,} requests with --think-time {opts.think_s:g}",
               "a --window of it, a higher --speedup or a shorter --think-time")
    est = [estimate_tokens(p if p is not None else " ".join(x["content"] for x in orjson.loads(ms)))
           for p, ms in zip(out["prompt"], out["messages"], strict=True)]
    width = max(6, len(str(m - 1)))
    units = out["unit"]
    table = trace_table({
        "request_id": [f"r{j:0{width}d}" for j in range(m)],
        "tenant": [rows.tenant[i] for i in units],
        "domain": ["chat"] * m,
        "language": [None] * m,
        "offset_s": out["offset_s"],
        "api": [rows.api[i] for i in units],
        "prompt": out["prompt"],
        "messages": out["messages"],
        "max_tokens": np.asarray(out["max_tokens"], dtype=np.int32),
        "temperature": np.zeros(m, dtype=np.float32),
        "ignore_eos": np.full(m, rows.ignore_eos),
        "prompt_tokens_est": np.asarray(est, dtype=np.int32),
        "prompt_source": [f"import:{fmt}:{path.name}"] * m,
        "conversation": out["conversation"],
        "turn": pa.array(out["turn"], pa.int32()),
        "think_s": pa.array(out["think_s"], pa.float64()),
    })
    table = attach_slos(table, opts.slo, "--slo")
    return Imported(table, read, dict(rows.dropped), dict(rows.notes))
