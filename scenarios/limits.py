"""What a trace will cost, estimated from its scenario before anything is drawn: how long its
arrivals last and how much memory building it takes. `check_trace_cost` refuses, in one line
naming the value and the limit, a trace that would outlast MAX_SPAN_S or not fit in this
machine's memory (`--requests 99999999999999` once died in numpy allocating 7.28 TiB, and
`--rate-scale 1e-9` made a trace of 42 years whose report then exhausted the memory)."""

from __future__ import annotations

import math
import os
import resource
import shutil
from pathlib import Path

import numpy as np

from scenarios import ScenarioError
from scenarios.arrivals import mean_rate
from scenarios.corpus import mean_chars
from scenarios.lengths import sample_lengths
from scenarios.prompts import CHARS_PER_TOKEN
from scenarios.spec import Closed, Scenario

MAX_SPAN_S = 30 * 24 * 3600.0   # a month of arrivals: the longest soak anyone schedules; past it, a typo
ROW_BYTES = 100                 # a trace row besides its prompt text (measured: 4,886 B a saas-mix row, 4,781 of text)
PEAK_OVER_TABLE = 3.0           # building a trace peaks at about 3x its table (measured: 556 MB for 192 MB,
#                                 40,000 saas-mix requests, on this 2-core 24 GiB machine)
MEMORY_SHARE = 0.5              # a trace may take at most half of the machine's memory: the replay needs the rest
SAMPLE = 2000                   # lengths drawn per tenant to estimate its mean prompt
RECORD_BYTES = 900              # a request's record on disk (measured: 1.71 MB for the 2,000 records of a
#                                 400-request saas-mix run over five modes, 854 B each, on 2026-12-05)


def machine_memory() -> int:
    """Bytes of memory this process may use: the physical memory, or less where the cgroup's limit
    or the address space left under this process's RLIMIT_AS (`ulimit -v`) is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        total = min(total, int(text)) if text.isdigit() else total
    except OSError:
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        total = min(total, max(0, soft - mapped_bytes()))
    return total


def mapped_bytes() -> int:
    """Bytes of address space this process has mapped (VmSize; 0 where /proc cannot say)."""
    try:
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmSize:"))) * 1024
    except (OSError, StopIteration, ValueError):
        return 0


def arrival_rate(sc: Scenario) -> float | None:
    """Requests per second the scenario's arrivals offer on average (rate_scale applied); None
    for a closed loop, whose pace the server sets."""
    if isinstance(sc.arrival, Closed):
        return None
    rates = [mean_rate(sc.arrival)] if sc.arrival is not None else []
    rates += [mean_rate(t.arrival) for t in sc.tenants.values() if t.arrival is not None]
    return sum(rates) * sc.rate_scale


def expected_requests(sc: Scenario) -> float:
    """The requests the trace will hold: its count, or its rate over its duration."""
    if sc.requests is not None:
        return float(sc.requests) if sc.requests < 10**300 else math.inf   # past a float: forever
    rate = arrival_rate(sc) or 0.0
    return rate * (sc.duration or 0.0)


def expected_span_s(sc: Scenario) -> float | None:
    """How long the arrivals last, on average; None for a closed loop."""
    if sc.duration is not None:
        return sc.duration
    rate = arrival_rate(sc)
    return None if rate is None else expected_requests(sc) / rate if rate > 0 else math.inf


def bytes_per_request(sc: Scenario) -> float:
    """A trace row's bytes in memory: its prompt text (the tenants' mean prompt, weighted by their
    share of the requests) and the rest of the row."""
    rng = np.random.default_rng(0)
    shares = {n: t.share if t.share is not None else 1.0 for n, t in sc.tenants.items()}
    total = sum(shares.values())
    text = 0.0
    for name, t in sc.tenants.items():
        if t.prompt_tokens is not None:
            text += shares[name] / total * float(np.mean(sample_lengths(t.prompt_tokens, SAMPLE, rng))) \
                * CHARS_PER_TOKEN
        elif t.corpora:   # corpora's items, drawn evenly (pydoc-topics' average 6,000 characters)
            text += shares[name] / total * mean_chars(t.corpora)
    return ROW_BYTES + text


def check_trace_cost(sc: Scenario, memory: int | None = None) -> None:
    """Refuse (ScenarioError, one line) a trace that would outlast MAX_SPAN_S or need more than
    MEMORY_SHARE of the machine's memory to build."""
    n = expected_requests(sc)
    span = expected_span_s(sc)
    what = (f"duration {sc.duration:g} s" if sc.requests is None else f"--requests {sc.requests:,}"
            if sc.requests < 10**18 else f"--requests of {len(str(sc.requests))} digits")
    if span is not None:
        rate = arrival_rate(sc) or 0.0
        check_span(span, f"{sc.name}: {what} at {rate:.3g} requests/s (rate_scale {sc.rate_scale:g})")
    check_memory(n, bytes_per_request(sc), f"{sc.name}: {what}", memory)


def check_memory(requests: float, row_bytes: float, what: str, memory: int | None = None) -> None:
    """Refuse (ScenarioError, one line starting with `what`) a trace of `requests` rows of
    `row_bytes` each whose build would need more than MEMORY_SHARE of the machine's memory."""
    memory = machine_memory() if memory is None else memory
    need = requests * row_bytes * PEAK_OVER_TABLE
    if need > memory * MEMORY_SHARE:
        most = int(memory * MEMORY_SHARE / (row_bytes * PEAK_OVER_TABLE))
        raise ScenarioError(f"{what} needs about {_bytes(need)} of memory to build its trace; at most {most:,} "
                            f"requests of that size fit in {MEMORY_SHARE:.0%} of the {_bytes(memory)} this process may "
                            "use")


def disk_problem(records: int, folder: Path) -> str | None:
    """Why `records` request records (RECORD_BYTES each) will not fit on the disk that holds
    `folder` (or the nearest folder above it that exists); None when they fit."""
    need = records * RECORD_BYTES
    place = Path(folder).absolute()
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        if os.statvfs(place).f_flag & os.ST_RDONLY:   # no room to judge: the write's own error says why
            return None
        free = shutil.disk_usage(place).free
    except OSError:   # said by the write that fails, if any
        return None
    if need <= free:
        return None
    return (f"its {records:,} request records need about {_bytes(need)} on disk; {_bytes(free)} is free at {place}: "
            "fewer requests, levels or modes, or another --out")


def check_span(span_s: float, what: str, fix: str = "fewer requests or a higher rate (--rate-scale)") -> None:
    """Refuse (ScenarioError, one line starting with `what`, ending with how to `fix` it) arrivals
    that last past MAX_SPAN_S."""
    if not span_s <= MAX_SPAN_S:
        raise ScenarioError(f"{what} would last {_duration(span_s)}, past the {_duration(MAX_SPAN_S)} a trace may "
                            f"span: {fix}")


def _duration(s: float) -> str:
    if not math.isfinite(s):
        return "forever"
    for unit, size in (("years", 365 * 86400.0), ("days", 86400.0), ("hours", 3600.0)):
        if s >= size:
            return f"{s / size:,.1f} {unit}"
    return f"{s:,.0f} s"


def _bytes(b: float) -> str:
    for unit in ("EiB", "PiB", "TiB", "GiB", "MiB"):
        size = 1024.0 ** ("MGTPE".index(unit[0]) + 2)
        if b >= size:
            return f"{b / size:,.1f} {unit}"
    return f"{b / 1024:,.0f} KiB"
