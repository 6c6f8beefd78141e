"""`loadtest scenario ...` and `loadtest trace ...`: look at, check and compile traffic."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table

from scenarios.corpus import CORPORA, corpus_languages
from scenarios.importers import ImportOptions, import_trace
from scenarios.prompts import builtin_languages
from scenarios.spec import BUILTIN, Tenant, builtin_names, eos_notes, load_scenario
from scenarios.tokens import ESTIMATE, load_tokenizer
from scenarios.trace import (
    META_HASH,
    META_NAME,
    build_trace_file,
    closed_concurrency,
    load_trace_file,
    scenario_hash,
    write_trace,
)

SPARK = " ▁▂▃▄▅▆▇█"


def scenario_list(console: Console) -> int:
    t = Table("name", "requests or duration", "arrival", "tenants", "description", header_style="bold")
    for name in builtin_names():
        s, _ = load_scenario(name)
        size = f"{s.requests:,} requests" if s.requests else f"{s.duration:,.0f} s"
        arrival = s.arrival.process if s.arrival else "per tenant"
        t.add_row(name, size, arrival, ", ".join(s.tenants), s.description)
    console.print(t)
    return 0


def scenario_show(console: Console, name: str) -> int:
    s, raw = load_scenario(name)
    path = BUILTIN / f"{name}.toml" if name in builtin_names() else Path(name)
    console.print(f"# {s.name}  sha256 {scenario_hash(raw)[:16]}  ({path})", highlight=False)
    for name, t in s.tenants.items():   # where each tenant's prompts come from, and under what licence
        console.print(f"# {name}: {prompt_source(t)}", highlight=False, markup=False, soft_wrap=True)
    console.print(raw.decode(), highlight=False, markup=False)
    return 0


def prompt_source(t: Tenant) -> str:
    """Where a tenant's prompts come from, with the licence a shipped corpus carries."""
    if t.corpora:
        return "prompts from " + " and ".join(
            f"{c.name} ({c.what}; {c.licence}; from {c.source}; scenarios/corpora/{c.name}/README.md)"
            for c in (CORPORA[name] for name in t.corpora))
    if t.prompts_file or t.document:
        return f"prompts from your file {t.prompts_file or t.document}"
    languages = f" ({', '.join(t.language_list)})" if t.language_list else ""
    borrowed = [(lang, CORPORA[corpus_languages()[lang]]) for lang in t.language_list or ()
                if lang not in builtin_languages()]
    cut = "".join(f"; {lang} code cut from {c.name}'s solved problems ({c.licence}; scenarios/corpora/{c.name}/"
                  "README.md)" for lang, c in borrowed)
    return (f"prompts written from the project's own {t.domain} text{languages} (scenarios/content/, "
            f"the project's licence{cut})")


def scenario_validate(console: Console, path: str) -> int:
    s, raw = load_scenario(path)
    tomllib.loads(raw.decode())
    size = f"{s.requests:,} requests" if s.requests else f"{s.duration:,.0f} s"
    console.print(f"{path}: valid: {len(s.tenants)} tenant(s), {size}, sha256 {scenario_hash(raw)[:16]}",
                  highlight=False)
    return 0


def trace_build(console: Console, scenario: str, out: str, requests: int | None, seed: int | None,
                duration: float | None, rate_scale: float | None, tokenizer: str | None = None) -> int:
    s, raw = load_scenario(scenario)
    tokens = load_tokenizer(tokenizer) if tokenizer else None
    for note in eos_notes(s):
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    t = time.perf_counter()
    n = build_trace_file(s, Path(out), scenario_hash(raw), requests=requests, seed=seed, duration=duration,
                         rate_scale=rate_scale, tokens=tokens)
    counted = f"prompt lengths counted by {tokens.label}" if tokens is not None else f"prompt lengths an {ESTIMATE}"
    console.print(f"wrote {n:,} requests of {s.name} to {out} in {time.perf_counter() - t:.1f} s ({counted})",
                  highlight=False)
    return 0


def trace_import(console: Console, file: str, fmt: str, out: str, opts: ImportOptions) -> int:
    path = Path(file)
    imported = import_trace(path, fmt, opts)
    write_trace(imported.table, Path(out), f"import:{fmt}:{path.name}", scenario_hash(path.read_bytes()))
    for line in imported.describe():
        console.print(f"{file}: {line}", highlight=False, soft_wrap=True)
    console.print(f"wrote {imported.table.num_rows:,} requests imported from {file} ({fmt}) to {out}",
                  highlight=False)
    return 0


def format_rate(per_s: float) -> str:
    """A rate in the unit that shows it with three significant figures: 12.5/s, 1.80/min, 3.00/h."""
    if not np.isfinite(per_s):
        return "-"
    scale, unit = next(((k, u) for k, u in ((1.0, "/s"), (60.0, "/min")) if per_s * k >= 1), (3600.0, "/h"))
    value = per_s * scale
    return f"{value:,.3g}{unit}" if value < 1000 else f"{value:,.0f}{unit}"


def format_span(seconds: float) -> str:
    """A duration as 45.2 s, 12.0 min or 4.00 h."""
    if seconds < 120:
        return f"{seconds:,.1f} s"
    return f"{seconds / 60:,.1f} min" if seconds < 7200 else f"{seconds / 3600:,.2f} h"


def sparkline(values: np.ndarray) -> str:
    top = values.max() if len(values) and values.max() > 0 else 1
    return "".join(SPARK[round(v / top * (len(SPARK) - 1))] for v in values)


def conversations_text(table) -> str:
    """", 26 conversations of 2-5 turns (80 requests)" for a trace with conversations, else ""."""
    turns = table["turn"].drop_null()
    if not len(turns):
        return ""
    per = pc.value_counts(table["conversation"].drop_null()).field("counts").to_numpy()
    span = f"{per.min()}" if per.min() == per.max() else f"{per.min()}-{per.max()}"
    return (f", {len(per):,} conversation{'s' * (len(per) != 1)} of {span} turns ({len(turns):,} requests, each "
            "turn sent after the answer before it)")


def trace_show(console: Console, file: str) -> int:
    table, _ = load_trace_file(Path(file))
    meta = table.schema.metadata or {}
    offsets = table["offset_s"].to_numpy()
    span = float(offsets[-1] - offsets[0]) if len(offsets) > 1 else 0.0
    gaps = np.diff(offsets)
    cv = float(gaps.std() / gaps.mean()) if len(gaps) > 1 and gaps.mean() > 0 else float("nan")
    closed = closed_concurrency(table)
    console.print(f"{file}: {table.num_rows:,} requests over {format_span(span)} "
                  f"({format_rate(table.num_rows / span if span else float('nan'))}), inter-arrival CV {cv:.2f}"
                  + (f", closed loop at concurrency {closed}" if closed else "")
                  + conversations_text(table)
                  + f"; scenario {meta.get(META_NAME, b'?').decode()} {meta.get(META_HASH, b'?').decode()[:16]}",
                  highlight=False, soft_wrap=True)   # one line, whatever the terminal's width (grep finds it)
    t = Table("tenant", "requests", "share", "prompt p50/p99 (est)", "output p50/p99", "api", header_style="bold")
    for tenant in sorted(set(table["tenant"].to_pylist())):
        sub = table.filter(pc.equal(table["tenant"], tenant))
        p = np.percentile(sub["prompt_tokens_est"].to_numpy(), [50, 99])
        o = np.percentile(sub["max_tokens"].to_numpy(), [50, 99])
        t.add_row(tenant, f"{sub.num_rows:,}", f"{sub.num_rows / table.num_rows:.1%}", f"{p[0]:.0f} / {p[1]:.0f}",
                  f"{o[0]:.0f} / {o[1]:.0f}", ",".join(sorted(set(sub["api"].to_pylist()))))
    console.print(t)
    if span > 0:
        bins = min(60, max(1, table.num_rows // 5))
        counts, edges = np.histogram(offsets, bins=bins)
        width = edges[1] - edges[0]
        console.print(f"requests over time ({format_span(width)} per bar, peak {format_rate(counts.max() / width)}):",
                      highlight=False)
        console.print(sparkline(counts), highlight=False)
    return 0
