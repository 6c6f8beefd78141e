"""Compile a scenario into a trace: one row per request, deterministic per (scenario, seed, size)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.exits import one_line
from common.validation import file_problem, file_state, shown_name
from scenarios import ScenarioError
from scenarios.arrivals import send_times
from scenarios.corpus import items_of
from scenarios.lengths import sample_lengths
from scenarios.limits import MAX_SPAN_S, check_span, check_trace_cost
from scenarios.prompts import CHARS_PER_TOKEN, estimate_tokens, make_prompt, prompt_parts
from scenarios.spec import Closed, Scenario
from scenarios.tokens import ESTIMATE, Cut, TokenCounter

TRACE_SCHEMA = pa.schema([
    pa.field("request_id", pa.string(), nullable=False),
    pa.field("tenant", pa.string(), nullable=False),
    pa.field("domain", pa.string(), nullable=False),
    pa.field("language", pa.string()),
    pa.field("offset_s", pa.float64(), nullable=False),   # scheduled send time from the start
    pa.field("api", pa.string(), nullable=False),         # "completions" or "chat"
    pa.field("prompt", pa.string()),                      # for api = completions
    pa.field("messages", pa.string()),                    # JSON list, for api = chat
    pa.field("max_tokens", pa.int32(), nullable=False),
    pa.field("temperature", pa.float32(), nullable=False),
    pa.field("ignore_eos", pa.bool_(), nullable=False),
    pa.field("prompt_tokens_est", pa.int32(), nullable=False),
    pa.field("slo_ttft_p99_ms", pa.float64()),
    pa.field("slo_tpot_p99_ms", pa.float64()),
    pa.field("slo_e2e_p99_ms", pa.float64()),
    # where the prompt came from: a corpus the project ships (scenarios/corpus.py), "builtin" (the
    # project's own text), "file:NAME" (a tenant's document or prompts file) or an importer's format;
    # and what it is (the corpus item's category; else the domain, or a code prompt's language).
    # Traces written before these columns read them as null (load_trace_file).
    pa.field("prompt_source", pa.string()),
    pa.field("category", pa.string()),
    # a conversation's turns (null for a request on its own): its id, the turn's place in it from 0,
    # and for a later turn the seconds between the previous turn's answer and this turn (a person
    # reading and typing). A later turn's `messages` hold the conversation so far as its source had
    # it; the replay sends it after the previous turn's answer, with that answer in place of the
    # source's (loadtest/replay/conversations.py). Its offset_s is the earliest it can be sent: the
    # previous turn's offset plus its think time.
    pa.field("conversation", pa.string()),
    pa.field("turn", pa.int32()),
    pa.field("think_s", pa.float64()),
])
OPTIONAL_COLUMNS = ("prompt_source", "category", "conversation", "turn", "think_s")
SHOWN_PROBLEMS = 3   # a trace's problems said in one pass: the first row of each kind, this many kinds
META_HASH = b"loadtest.scenario_sha256"
META_NAME = b"loadtest.scenario"
META_CLOSED = b"loadtest.closed_concurrency"  # present when the trace is replayed closed-loop
# how prompt_tokens_est was counted: scenarios.tokens.ESTIMATE, or a tokenizer.json's name and SHA-256
META_TOKENIZER = b"loadtest.tokenizer"


# SLO targets given on a command line: ((a tenant, or None for every tenant, {"ttft_p99_ms": ms, ...}), ...)
Targets = tuple[tuple[str | None, dict[str, float]], ...]


def attach_slos(table: pa.Table, targets: Targets, flag: str) -> pa.Table:
    """The trace with these p99 targets in its SLO columns (a later entry wins over an earlier one,
    and over the trace's own), for its tenants or the one each names; a tenant the trace does not
    have is one ScenarioError line naming those it has."""
    tenants, meta = table["tenant"], table.schema.metadata
    known = sorted(pc.unique(tenants).to_pylist())
    for tenant, slo in targets:
        if tenant is not None and tenant not in known:
            raise ScenarioError(f"{flag} {tenant}:...: the trace has no tenant {tenant!r} (it has: {', '.join(known)})")
        mask = pc.equal(tenants, tenant) if tenant is not None else pa.array([True] * table.num_rows)
        for key, ms in slo.items():
            col = f"slo_{key}"
            i = table.schema.get_field_index(col)
            value = pc.if_else(mask, pa.scalar(ms, pa.float64()), table[col])
            table = table.set_column(i, table.schema.field(i), value)
    return table.replace_schema_metadata(meta)


def trace_table(columns: dict, metadata: dict | None = None) -> pa.Table:
    """A trace (TRACE_SCHEMA) from its columns; a nullable column left out is null throughout."""
    n = len(columns["request_id"])
    full = {f.name: columns[f.name] if f.name in columns or not f.nullable else pa.nulls(n, f.type)
            for f in TRACE_SCHEMA}
    table = pa.table(full, schema=TRACE_SCHEMA)
    return table.replace_schema_metadata(metadata) if metadata else table


def scenario_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _arrivals(sc: Scenario, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Send times and tenant index of every request, sorted by time."""
    names = list(sc.tenants)
    seeds = rng.integers(0, 2**63, size=len(names) + 1)
    count, duration = sc.requests, sc.duration
    if isinstance(sc.arrival, Closed):
        times, who = np.zeros(count), np.full(count, -1)
    else:
        parts = []
        if sc.arrival is not None:
            t = send_times(sc.arrival, int(seeds[0]), sc.rate_scale, count, duration)
            parts.append((t, np.full(len(t), -1)))
        for i, name in enumerate(names):
            own = sc.tenants[name].arrival
            if own is not None:
                t = send_times(own, int(seeds[i + 1]), sc.rate_scale, count, duration)
                parts.append((t, np.full(len(t), i)))
        times = np.concatenate([p[0] for p in parts])
        who = np.concatenate([p[1] for p in parts])
        order = np.argsort(times, kind="stable")
        times, who = times[order], who[order]
        if count is not None:
            times, who = times[:count], who[:count]
    shared = [i for i, n in enumerate(names) if sc.tenants[n].share is not None]
    pool = who == -1
    if shared:
        shares = np.array([sc.tenants[names[i]].share for i in shared])
        who[pool] = np.asarray(shared)[rng.choice(len(shared), size=int(pool.sum()), p=shares / shares.sum())]
    return times, who


@dataclass(frozen=True)
class _Plan:
    """Everything random about a trace, as numpy arrays (about 60 bytes a request); the prompts
    are materialised from it batch by batch."""

    scenario: Scenario
    offsets: np.ndarray
    which: np.ndarray          # tenant index per request
    prompt_target: np.ndarray
    max_tokens: np.ndarray
    language: np.ndarray       # object: language name or None
    uids: np.ndarray
    picks: np.ndarray
    turn: np.ndarray | None = None      # a conversation's turn (-1: a request on its own); None: none has turns
    answers_before: np.ndarray | None = None   # the planned answers' tokens before a later turn (its history)

    @property
    def size(self) -> int:
        return len(self.offsets)


def _plan(scenario: Scenario, requests: int | None, seed: int | None, rate_scale: float | None,
          duration: float | None) -> _Plan:
    sc = scenario.with_overrides(requests=requests, duration=duration, seed=seed, rate_scale=rate_scale)
    check_trace_cost(sc)   # before anything is drawn: a trace that outlasts a month or the memory is refused
    rng = np.random.default_rng(sc.seed)
    try:
        offsets, which = _arrivals(sc, rng)
    except ValueError as exc:
        raise ScenarioError(f"{sc.name}: arrival: {exc}") from None
    n = len(offsets)
    prompt_target = np.zeros(n, dtype=np.int64)
    max_tokens = np.empty(n, dtype=np.int64)
    language = np.full(n, None, dtype=object)
    for i, name in enumerate(sc.tenants):
        t = sc.tenants[name]
        idx = np.flatnonzero(which == i)
        if t.prompt_tokens is not None:
            prompt_target[idx] = sample_lengths(t.prompt_tokens, len(idx), rng)
        max_tokens[idx] = sample_lengths(t.output_tokens, len(idx), rng)
        if t.language_list:
            language[idx] = rng.choice(t.language_list, size=len(idx))
    uids = rng.integers(0, 2**40, size=n)
    picks = rng.integers(0, 2**31, size=n)
    plan = _Plan(sc, offsets, which, prompt_target, max_tokens, language, uids, picks)
    talks = [i for i, name in enumerate(sc.tenants) if sc.tenants[name].conversation]
    return _with_turns(plan, talks, rng, sc.requests) if talks else plan


def _with_turns(plan: _Plan, talks: list[int], rng: np.random.Generator, count: int | None) -> _Plan:
    """The plan with each conversation's later turns as rows of their own (their tenant's lengths
    drawn for each), at the earliest each can be sent (the turn before's offset plus the think
    time: the replay sends it after the answer), all in send order; the first `count` rows of that."""
    sc = plan.scenario
    tenants = [sc.tenants[name] for name in sc.tenants]
    turns = np.ones(plan.size, dtype=np.int64)
    for i in talks:
        corpus = items_of(tenants[i].corpora)
        idx = np.flatnonzero(plan.which == i)
        turns[idx] = [1 + len(corpus[p % len(corpus)].turns) for p in plan.picks[idx].tolist()]
    src = np.repeat(np.arange(plan.size), turns)
    turn = np.arange(len(src)) - np.repeat(np.cumsum(turns) - turns, turns)
    think = np.array([t.think_s for t in tenants])[plan.which[src]]
    offsets = plan.offsets[src] + turn * think
    max_tokens = plan.max_tokens[src].copy()
    later = np.flatnonzero(turn > 0)
    for i in talks:   # a later turn's answer has its own length, drawn from its tenant's
        mine = later[plan.which[src[later]] == i]
        max_tokens[mine] = sample_lengths(tenants[i].output_tokens, len(mine), rng)
    answers_before = np.zeros(len(src), dtype=np.int64)
    for k in range(1, int(turns.max())):   # turn k's history: turn k-1's history and its answer
        at = np.flatnonzero(turn == k)
        answers_before[at] = answers_before[at - 1] + max_tokens[at - 1]
    turn[np.repeat(turns == 1, turns)] = -1
    order = np.argsort(offsets, kind="stable")[:count]
    src = src[order]
    return _Plan(sc, offsets[order], plan.which[src], plan.prompt_target[src], max_tokens[order],
                 plan.language[src], plan.uids[src], plan.picks[src], turn[order], answers_before[order])


def _materialize(plan: _Plan, lo: int, hi: int, tokens: TokenCounter | None = None) -> pa.Table:
    """Rows [lo, hi) of the trace; with `tokens`, the prompts cut to their target in its tokens and
    prompt_tokens_est their count (scenarios.tokens), else estimated from their characters."""
    sc, n = plan.scenario, plan.size
    names = list(sc.tenants)
    tenants = [sc.tenants[name] for name in names]
    which = plan.which[lo:hi]
    k = hi - lo
    prompts: list[str | None] = [None] * k
    messages: list[str | None] = [None] * k
    categories: list[str | None] = [None] * k
    item_sources: list[str | None] = [None] * k   # a corpus tenant's: each item's own corpus
    sources: list[str] = ["builtin"] * len(tenants)
    system_tokens = np.zeros(k, dtype=np.int64)
    user_chars = np.zeros(k, dtype=np.int64)
    user_tokens = np.zeros(k, dtype=np.int64)   # with `tokens`: the user's text's (and a BOS a completion gets)
    for i, t in enumerate(tenants):  # per tenant, so its settings are looked up once
        idx = np.flatnonzero(which == i).tolist()
        if not idx:
            continue
        rows = [lo + j for j in idx]
        source = t.document or t.prompts_file
        if t.corpora:   # corpora: each request one of their items, with the item's category and corpus
            corpus = items_of(t.corpora)
            chosen = [corpus[pick % len(corpus)] for pick in plan.picks[rows].tolist()]
            # a line of its own first, as every built-in prompt has, so no two requests share a prefix
            # by accident (a server's prefix cache would serve a repeated item's prefill)
            heads = [f"Request {uid:010x}.\n" for uid in plan.uids[rows].tolist()]
            texts = [head + item.text for head, item in zip(heads, chosen, strict=True)]
            if tokens is not None:
                user_tokens[idx] = tokens.joined(heads, [item.text for item in chosen])
            for j, item in zip(idx, chosen, strict=True):
                categories[j], item_sources[j] = item.category, item.corpus
        else:
            drawn = list(zip(plan.language[rows].tolist(), plan.prompt_target[rows].tolist(), plan.uids[rows].tolist(),
                             plan.picks[rows].tolist(), strict=True))
            if tokens is not None and t.domain != "custom":   # cut to the target less what the tokenizer adds
                less = tokens.special if t.api == "completions" else 0
                texts, user_tokens[idx] = tokens.cut([Cut(*prompt_parts(t.domain, lang, uid, pick, source),
                                                          target - less) for lang, target, uid, pick in drawn])
            else:
                texts = [make_prompt(t.domain, lang, target, uid, pick, source) for lang, target, uid, pick in drawn]
                if tokens is not None:
                    user_tokens[idx] = tokens.count(texts)
            for j, lang in zip(idx, plan.language[rows].tolist(), strict=True):
                categories[j] = lang or t.domain
            if source is not None:
                sources[i] = f"file:{Path(source).name}"
        user_chars[idx] = [len(text) for text in texts]
        if t.api == "chat":
            head = [{"role": "system", "content": t.system}] if t.system else []
            for pos, (j, text) in enumerate(zip(idx, texts, strict=True)):
                talk = [{"role": "user", "content": text}]
                nth = int(plan.turn[lo + j]) if plan.turn is not None else -1
                if nth > 0:   # a later turn: the turns before it, each answer left for the replay to fill in
                    for later in chosen[pos].turns[:nth]:
                        talk += [{"role": "assistant", "content": ""}, {"role": "user", "content": later}]
                    user_chars[j] = sum(len(m["content"]) for m in talk)
                    if tokens is not None:
                        user_tokens[j] += int(tokens.count(list(chosen[pos].turns[:nth])).sum())
                messages[j] = orjson.dumps([*head, *talk]).decode()
            if t.system:
                system_tokens[idx] = estimate_tokens(t.system) if tokens is None else int(tokens.count([t.system])[0])
        else:
            for j, text in zip(idx, texts, strict=True):
                prompts[j] = text
            if tokens is not None:   # what the server's count of a completion's prompt adds: a BOS, where it has one
                user_tokens[idx] += tokens.special

    def per_tenant(values: list) -> pa.Array:
        return pa.array(values).take(pa.array(which))

    # estimate_tokens() on whole columns: ceil(characters / CHARS_PER_TOKEN), at least 1; or the tokenizer's count
    est = (np.maximum(1, -(-user_chars // CHARS_PER_TOKEN)) if tokens is None else user_tokens) + system_tokens
    if plan.answers_before is not None:   # a later turn's history holds the answers planned before it
        est += plan.answers_before[lo:hi]
    turn = plan.turn[lo:hi] if plan.turn is not None else np.full(k, -1)
    talking = turn >= 0
    width = max(6, len(str(n - 1)))
    cols = {
        "request_id": [f"r{i:0{width}d}" for i in range(lo, hi)],
        "tenant": pa.array(names).take(pa.array(which)),
        "domain": per_tenant([t.domain for t in tenants]),
        "language": plan.language[lo:hi].tolist(),
        "offset_s": plan.offsets[lo:hi],
        "api": per_tenant([t.api for t in tenants]),
        "prompt": pa.array(prompts, pa.string()),
        "messages": pa.array(messages, pa.string()),
        "max_tokens": plan.max_tokens[lo:hi].astype(np.int32),
        "temperature": per_tenant([t.temperature for t in tenants]).cast(pa.float32()),
        "ignore_eos": per_tenant([t.ignore_eos for t in tenants]),
        "prompt_tokens_est": est.astype(np.int32),
        "slo_ttft_p99_ms": per_tenant([t.slo.ttft_p99_ms for t in tenants]).cast(pa.float64()),
        "slo_tpot_p99_ms": per_tenant([t.slo.tpot_p99_ms for t in tenants]).cast(pa.float64()),
        "slo_e2e_p99_ms": per_tenant([t.slo.e2e_p99_ms for t in tenants]).cast(pa.float64()),
        "prompt_source": pc.coalesce(pa.array(item_sources, pa.string()), per_tenant(sources)),
        "category": pa.array(categories, pa.string()),
        "conversation": pa.array([f"c{u:010x}" if talk else None for u, talk in
                                  zip(plan.uids[lo:hi].tolist(), talking.tolist(), strict=True)], pa.string()),
        "turn": pa.array(np.where(talking, turn, 0), pa.int32(), mask=~talking),
        "think_s": pa.array(per_tenant([t.think_s for t in tenants]).to_numpy(zero_copy_only=False),
                            pa.float64(), mask=~(turn > 0)),
    }
    table = trace_table(cols)
    return table.replace_schema_metadata(counted_by(tokens) | (
        {META_CLOSED: str(sc.arrival.concurrency).encode()} if isinstance(sc.arrival, Closed) else {}))


def counted_by(tokens: TokenCounter | None) -> dict[bytes, bytes]:
    """The metadata that says how a trace's prompt_tokens_est was counted."""
    return {META_TOKENIZER: (tokens.label if tokens is not None else ESTIMATE).encode()}


def build_trace(scenario: Scenario, requests: int | None = None, seed: int | None = None,
                rate_scale: float | None = None, duration: float | None = None,
                tokens: TokenCounter | None = None) -> pa.Table:
    """The scenario's requests as a table (TRACE_SCHEMA): the same arguments give the same table;
    with `tokens` (a tokenizer.json, scenarios.tokens), its prompts cut to their lengths in its tokens."""
    plan = _plan(scenario, requests, seed, rate_scale, duration)
    return _materialize(plan, 0, plan.size, tokens)


def build_trace_file(scenario: Scenario, path: Path, scenario_sha256: str, requests: int | None = None,
                     seed: int | None = None, rate_scale: float | None = None, duration: float | None = None,
                     batch_rows: int = 65536, tokens: TokenCounter | None = None) -> int:
    """Write the same trace as `build_trace` straight to Parquet, one row group per batch, so a
    trace of millions of requests never sits in memory whole. Returns the row count."""
    plan = _plan(scenario, requests, seed, rate_scale, duration)
    meta = {META_NAME: plan.scenario.name.encode(), META_HASH: scenario_sha256.encode(), **counted_by(tokens)}
    if isinstance(plan.scenario.arrival, Closed):
        meta[META_CLOSED] = str(plan.scenario.arrival.concurrency).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with pq.ParquetWriter(tmp, TRACE_SCHEMA.with_metadata(meta), compression="zstd") as writer:
        for lo in range(0, plan.size, batch_rows):
            writer.write_table(_materialize(plan, lo, min(plan.size, lo + batch_rows), tokens)
                               .replace_schema_metadata(meta))
    tmp.replace(path)
    return plan.size


def write_trace(table: pa.Table, path: Path, scenario_name: str, scenario_sha256: str) -> None:
    meta = {**(table.schema.metadata or {}), META_NAME: scenario_name.encode(), META_HASH: scenario_sha256.encode()}
    table = table.replace_schema_metadata(meta)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def load_trace_file(path: Path) -> tuple[pa.Table, dict[str, str]]:
    """A trace file to replay, checked against TRACE_SCHEMA; one-line ScenarioError otherwise."""
    state = file_state(path)
    if state != "file":
        raise ScenarioError(f"trace file {shown_name(str(path))} {file_problem(state)}")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ScenarioError(f"{path}: not a Parquet trace: {one_line(exc)}") from None
    for field in TRACE_SCHEMA:
        if field.name in OPTIONAL_COLUMNS and field.name not in table.column_names:   # a trace from before them
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
        elif field.name not in table.column_names:
            raise ScenarioError(f"{path}: column {field.name!r} is missing (see `loadtest trace build`)")
    meta = table.schema.metadata or {}
    try:
        table = table.select(TRACE_SCHEMA.names).cast(TRACE_SCHEMA).replace_schema_metadata(meta)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ScenarioError(f"{path}: columns do not match the trace schema: {one_line(exc)}") from None
    if table.num_rows == 0:
        raise ScenarioError(f"{path}: the trace has no requests")
    problem = trace_problem(table)
    if problem:
        raise ScenarioError(f"{path}: {problem}")
    return table, {k: meta[v].decode() for k, v in (("name", META_NAME), ("sha256", META_HASH)) if v in meta}


def trace_problem(table: pa.Table) -> str | None:
    """What breaks the trace contract in `table` (TRACE_SCHEMA's columns), in one line: per kind
    of problem the first row that has it and how many more do, the first SHOWN_PROBLEMS kinds;
    None when nothing does. Offsets are finite, from 0 and in order; ids unique; each
    request has the body its api needs and asks for at least one token; no offset is past
    MAX_SPAN_S."""
    ids = table["request_id"]
    offsets = table["offset_s"].to_numpy(zero_copy_only=False).astype(np.float64)

    def row(mask: np.ndarray, why: str) -> str | None:
        bad = np.flatnonzero(mask)
        more = f" (and {len(bad) - 1:,} more rows)" if len(bad) > 1 else ""
        return f"row {bad[0]} (request {ids[int(bad[0])].as_py()!r}): {why}{more}" if len(bad) else None

    checks = [
        (~np.isfinite(offsets), "offset_s is not a finite number"),
        (offsets < 0, "offset_s is negative (a trace starts at 0)"),
        (offsets > MAX_SPAN_S, f"offset_s is past the {MAX_SPAN_S / 86400:g} days a trace may span"),
        (np.r_[False, np.diff(offsets) < 0], "offset_s is earlier than the row before (a trace is in send order)"),
        (~pc.is_in(table["api"], pa.array(["completions", "chat"])).to_numpy(zero_copy_only=False),
         "api is neither 'completions' nor 'chat'"),
        (pc.and_(pc.equal(table["api"], "completions"), pc.is_null(table["prompt"])).to_numpy(zero_copy_only=False),
         "a completions request without a prompt"),
        (pc.and_(pc.equal(table["api"], "chat"), pc.is_null(table["messages"])).to_numpy(zero_copy_only=False),
         "a chat request without messages"),
        (table["max_tokens"].to_numpy(zero_copy_only=False) < 1, "max_tokens is below 1"),
    ]
    found = [p for mask, why in checks if (p := row(np.asarray(mask, dtype=bool), why))]
    if "conversation" in table.column_names and table["conversation"].null_count < table.num_rows:
        found += [p for mask, why in conversation_problems(table) if (p := row(mask, why))]
    if pc.count_distinct(ids).as_py() != table.num_rows:
        counts = pc.value_counts(ids)
        twice = next(v["values"] for v in counts.to_pylist() if v["counts"] > 1)
        found.append(f"request_id {twice!r} appears more than once")
    if not found:
        return None
    rest = f"; and {len(found) - SHOWN_PROBLEMS} more kinds of problem" if len(found) > SHOWN_PROBLEMS else ""
    return "; ".join(found[:SHOWN_PROBLEMS]) + rest


def conversation_problems(table: pa.Table) -> list[tuple[np.ndarray, str]]:
    """The rows that break a conversation's contract, by kind: a turn without its conversation (or
    the other way), a later turn not on the chat API or without a think time, a turn whose turn
    before it is not earlier in the trace (each conversation's turns are 0, 1, 2, ... in send order)."""
    conv = table["conversation"].to_pylist()
    turn = table["turn"].to_pylist()
    think = table["think_s"].to_numpy(zero_copy_only=False).astype(np.float64)
    api = table["api"].to_pylist()
    n = len(conv)
    half = np.array([(c is None) != (t is None) for c, t in zip(conv, turn, strict=True)], dtype=bool)
    later = np.array([t is not None and t > 0 for t in turn], dtype=bool)
    not_chat = later & np.array([a != "chat" for a in api], dtype=bool)
    no_think = later & ~(np.isfinite(think) & (think >= 0))
    order = np.zeros(n, dtype=bool)
    seen: dict[str, int] = {}
    for i, (c, t) in enumerate(zip(conv, turn, strict=True)):
        if c is None or t is None:
            continue
        if t != seen.get(c, -1) + 1:
            order[i] = True
        else:
            seen[c] = t
    return [(half, "conversation and turn go together (one is empty)"),
            (not_chat, "a later turn of a conversation must use the chat API"),
            (no_think, "think_s of a later turn is not a number of seconds >= 0"),
            (order, "a conversation's turns are not 0, 1, 2, ... in send order")]


def scale_rate(table: pa.Table, factor: float) -> pa.Table:
    """The same requests arriving `factor` times as fast (every offset divided by it), as
    `--rate-scale` does for a trace file. A closed-loop trace has no rate to scale."""
    if closed_concurrency(table):
        raise ScenarioError("--rate-scale: this trace is closed loop (a fixed concurrency, no arrival rate); "
                            "rebuild it from an open-loop scenario to scale its rate")
    i = table.schema.get_field_index("offset_s")
    scaled = pa.array(table["offset_s"].to_numpy() / factor, type=pa.float64())
    if len(scaled):
        check_span(scaled[-1].as_py(), f"{table.num_rows:,} requests at --rate-scale {factor:g}")
    return table.set_column(i, table.schema.field(i), scaled).replace_schema_metadata(table.schema.metadata)


def closed_concurrency(table_or_schema) -> int | None:
    meta = (table_or_schema.schema if hasattr(table_or_schema, "schema") else table_or_schema).metadata or {}
    return int(meta[META_CLOSED]) if META_CLOSED in meta else None
