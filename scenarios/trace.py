"""Compile a scenario into a trace: one row per request, deterministic per (scenario, seed, count)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from scenarios.prompts import estimate_tokens, make_prompt
from scenarios.spec import (
    Arrival,
    Constant,
    Distribution,
    Empirical,
    Fixed,
    Gamma,
    LogNormal,
    Normal,
    Poisson,
    Scenario,
    Uniform,
)

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
])
META_HASH = b"loadtest.scenario_sha256"
META_NAME = b"loadtest.scenario"


def scenario_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def sample_lengths(dist: Distribution, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` token counts from a length distribution, clipped to its bounds."""
    if isinstance(dist, Fixed):
        return np.full(n, dist.value, dtype=np.int64)
    if isinstance(dist, Uniform):
        values = rng.integers(dist.min, dist.max + 1, size=n)
    elif isinstance(dist, Normal):
        values = np.rint(rng.normal(dist.mean, dist.std, size=n))
    elif isinstance(dist, LogNormal):
        mu = np.log(dist.mean) - dist.sigma**2 / 2  # so that E[X] = mean
        values = np.rint(rng.lognormal(mu, dist.sigma, size=n))
    elif isinstance(dist, Empirical):
        values = rng.choice(np.asarray(dist.values), size=n)
    else:  # pragma: no cover - the union is closed
        raise TypeError(dist)
    return np.clip(values, dist.min, dist.max).astype(np.int64)


def sample_offsets(arrival: Arrival, n: int, rate_scale: float, rng: np.random.Generator) -> np.ndarray:
    """Send times in seconds from the start (first at 0), non-decreasing."""
    rate = arrival.rate * rate_scale
    if isinstance(arrival, Poisson):
        gaps = rng.exponential(1.0 / rate, size=n)
    elif isinstance(arrival, Constant):
        gaps = np.full(n, 1.0 / rate)
    elif isinstance(arrival, Gamma):
        shape = 1.0 / arrival.cv**2  # CV of a gamma is 1/sqrt(shape)
        gaps = rng.gamma(shape, 1.0 / (rate * shape), size=n)
    else:  # pragma: no cover
        raise TypeError(arrival)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def build_trace(scenario: Scenario, requests: int | None = None, seed: int | None = None,
                rate_scale: float | None = None) -> pa.Table:
    n = requests or scenario.requests
    rng = np.random.default_rng(scenario.seed if seed is None else seed)
    offsets = sample_offsets(scenario.arrival, n, rate_scale or scenario.rate_scale, rng)
    names = list(scenario.tenants)
    shares = np.array([scenario.tenants[t].share for t in names])
    which = rng.choice(len(names), size=n, p=shares / shares.sum())
    prompt_target = np.empty(n, dtype=np.int64)
    max_tokens = np.empty(n, dtype=np.int64)
    language = np.empty(n, dtype=object)
    for i, name in enumerate(names):
        t = scenario.tenants[name]
        idx = np.flatnonzero(which == i)
        prompt_target[idx] = sample_lengths(t.prompt_tokens, len(idx), rng)
        max_tokens[idx] = sample_lengths(t.output_tokens, len(idx), rng)
        language[idx] = rng.choice(t.language, size=len(idx)) if t.language else None
    uids = rng.integers(0, 2**40, size=n)
    picks = rng.integers(0, 2**31, size=n)

    tenants = [scenario.tenants[names[w]] for w in which]
    prompts: list[str | None] = []
    messages: list[str | None] = []
    est = np.empty(n, dtype=np.int64)
    for j, t in enumerate(tenants):
        text = make_prompt(t.domain, language[j], int(prompt_target[j]), int(uids[j]), int(picks[j]))
        if t.api == "chat":
            msgs = ([{"role": "system", "content": t.system}] if t.system else []) + [{"role": "user", "content": text}]
            messages.append(orjson.dumps(msgs).decode())
            prompts.append(None)
            est[j] = sum(estimate_tokens(m["content"]) for m in msgs)
        else:
            prompts.append(text)
            messages.append(None)
            est[j] = estimate_tokens(text)
    width = max(6, len(str(n - 1)))
    cols = {
        "request_id": [f"r{i:0{width}d}" for i in range(n)],
        "tenant": [names[w] for w in which],
        "domain": [t.domain for t in tenants],
        "language": language.tolist(),
        "offset_s": offsets,
        "api": [t.api for t in tenants],
        "prompt": prompts,
        "messages": messages,
        "max_tokens": max_tokens.astype(np.int32),
        "temperature": np.array([t.temperature for t in tenants], dtype=np.float32),
        "ignore_eos": np.array([t.ignore_eos for t in tenants], dtype=bool),
        "prompt_tokens_est": est.astype(np.int32),
        "slo_ttft_p99_ms": [t.slo.ttft_p99_ms for t in tenants],
        "slo_tpot_p99_ms": [t.slo.tpot_p99_ms for t in tenants],
        "slo_e2e_p99_ms": [t.slo.e2e_p99_ms for t in tenants],
    }
    return pa.table(cols, schema=TRACE_SCHEMA)


def write_trace(table: pa.Table, path: Path, scenario_name: str, scenario_sha256: str) -> None:
    meta = {META_NAME: scenario_name.encode(), META_HASH: scenario_sha256.encode()}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def read_trace(path: Path) -> pa.Table:
    return pq.read_table(path)
