"""The values an option takes, read from their text and held to their bounds: each says in one
line what it expected (`expected a positive number, got '0'`), as a BadValue, which the command
line's grammar turns into argparse's one-line error. No argparse here."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from cluster.fleet import MAX_SPECULATIVE_TOKENS
from common.validation import MAX_SEED, file_state, shown_name
from loadtest.replay.options import LOCUST_PROCESS_BYTES, MAX_INFLIGHT
from scenarios.limits import MAX_SPAN_S, MEMORY_SHARE, machine_memory


class BadValue(ValueError):
    """A value out of its option's bounds: the message is the one line to show."""


def number(text: str, ok, words: str, scale: float = 1.0) -> float:
    """`text` as a float that `ok` accepts (inf and nan never), else argparse's one-line error."""
    try:
        value = float(text.strip().removesuffix("%") if words.startswith("a percentage") else text)
    except ValueError:
        value = float("nan")
    if value != value or value == float("inf") or not ok(value):
        raise BadValue(f"expected {words}, got {text!r}")
    return value * scale


def plain_name(text: str) -> str:
    """A run id: one folder name under --out (common/names.py)."""
    from common.names import name_problem

    problem = name_problem(text)
    if problem:
        raise BadValue(problem)
    return text


MAX_SELECTOR = 253   # a Kubernetes label's value and Ray's resource names are far shorter (DNS-1123: 253)


def node_selector(text: str) -> str:
    """`--ray-worker-nodes`: a Ray resource name, or a node label KEY=VALUE; printable, no spaces,
    neither part empty."""
    key, eq, value = text.partition("=")
    if (not key or (eq and not value) or len(text) > MAX_SELECTOR or not text.isprintable()
            or any(c.isspace() for c in text)):
        raise BadValue(f"expected a Ray resource name or a node label KEY=VALUE, got {shown_name(text)}")
    return text


def _path(text: str, words: str, refuse: str | None) -> str:
    """`text` as a path the OS can look up (not empty, not too long), not naming a `refuse`
    ("file" or "dir", or None: either): else one line saying what was `words`."""
    state = file_state(Path(text)) if text else "empty"
    if state == refuse or state not in ("file", "dir", "missing"):
        why = {"file": "a file is there", "dir": "a folder is there", "empty": "an empty name"}.get(state, state)
        raise BadValue(f"expected {words}, got {shown_name(text)} ({why})")
    return text


def in_path(text: str) -> str:
    """A file or folder to read (whether it is there, and what it holds, the command says)."""
    return _path(text, "a path", None)


def out_file(text: str) -> str:
    """A file to write (not a folder)."""
    return _path(text, "a file name to write", "dir")


def out_dir(text: str) -> str:
    """A folder to write in (made if missing; not a file)."""
    return _path(text, "a folder to write in", "file")


def positive_float(text: str) -> float:
    return number(text, lambda v: v > 0, "a positive number")


def non_negative_float(text: str) -> float:
    return number(text, lambda v: v >= 0, "a number of seconds (0 or more)")


def percent(text: str) -> float:
    """`10` or `10%`: a share of 0.10."""
    return number(text, lambda v: 0 <= v <= 100, "a percentage from 0 to 100", scale=0.01)


def window(text: str) -> tuple[float, float]:
    """`START:END` in seconds, 0 <= START < END."""
    try:
        start, end = (float(x) for x in text.split(":"))
    except ValueError:
        raise BadValue(f"expected START:END in seconds, got {text!r}") from None
    if not 0 <= start < end:
        raise BadValue(f"expected 0 <= START < END, got {text!r}")
    return start, end


def port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise BadValue(f"expected a TCP port (1-65535), got {text!r}")
    return value


def port_or_zero(text: str) -> int:
    """A TCP port, or 0 for a free one."""
    return 0 if text.strip() == "0" else port(text)


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise BadValue(f"expected an integer, 0 or more, got {text!r}")
    return value


def seed(text: str) -> int:
    """A random seed: an integer from 0 to MAX_SEED."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise BadValue(f"expected a seed, an integer from 0 to {MAX_SEED:,}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadValue(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise BadValue(f"expected a positive integer, got {text!r}")
    return value


def at_most(parse, top: float, shown: str = ""):
    """`parse`, then at most `top` (a BadValue naming the bound, as `shown` says it, past it)."""
    def read(text: str):
        value = parse(text)
        if value > top:
            raise BadValue(f"expected at most {shown or f'{top:,}'}, got {text!r}")
        return value
    return read


def seconds(parse):
    """`parse` (a number of seconds), then at most MAX_SPAN_S: a wait or a limit longer than any
    trace may span is a typo (1e300 s once reached the replay's timers)."""
    return at_most(parse, MAX_SPAN_S, f"{MAX_SPAN_S:,.0f} s ({MAX_SPAN_S / 86400:g} days, the longest a trace may "
                                      "span)")


def worker_count(text: str) -> int | None:
    """Locust worker processes: `auto` (None: sized from the trace), or as many as fit in
    MEMORY_SHARE of the memory this process may use."""
    if text == "auto":
        return None
    value = positive_int(text)
    memory = machine_memory()
    most = max(1, int(memory * MEMORY_SHARE // LOCUST_PROCESS_BYTES))
    if value > most:
        raise BadValue(f"expected at most {most:,}, got {text!r}: a Locust process takes about "
                       f"{LOCUST_PROCESS_BYTES >> 20} MiB, and {most:,} fill {MEMORY_SHARE:.0%} of the "
                       f"{memory / 2**30:.1f} GiB this process may use")
    return value


def _increasing(text: str, parse, words: str, what: str = "levels") -> list:
    """A comma-separated list of `parse`d values, each above the one before."""
    values = [parse(part.strip()) for part in text.split(",") if part.strip()]
    if not values:
        raise BadValue(f"expected {words} separated by commas, got {text!r}")
    if any(b <= a for a, b in pairwise(values)):
        raise BadValue(f"the {what} must increase, got {text!r}")
    return values


def positive_floats(text: str) -> list[float]:
    """A comma-separated list of positive numbers, increasing: 0.5,1,2,4."""
    return _increasing(text, positive_float, "numbers")


def speculative_tokens(text: str) -> list[int]:
    """`--num-speculative-tokens 2,3,5`: increasing whole numbers of draft tokens per step."""
    ks = _increasing(text, positive_int, "whole numbers of speculative tokens, e.g. 2,3,5", "numbers")
    if ks[-1] > MAX_SPECULATIVE_TOKENS:
        raise BadValue(f"expected at most {MAX_SPECULATIVE_TOKENS} speculative tokens a step, got {ks[-1]}")
    return ks


def concurrency_levels(text: str) -> list[int]:
    """Closed-loop levels: positive integers, increasing, each at most MAX_INFLIGHT (a level keeps
    that many requests in flight, and the client holds at most that many)."""
    return _increasing(text, at_most(positive_int, MAX_INFLIGHT, f"{MAX_INFLIGHT:,} requests in flight (what one "
                                     "client holds, as --max-inflight)"), "integers")


def slo_targets(text: str) -> dict[str, float]:
    """ttft_p99_ms=500,tpot_p99_ms=40,e2e_p99_ms=20000: targets for every tenant (at least one)."""
    known = ("ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms")
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in known:
            raise BadValue(f"expected KEY=MS with KEY one of {', '.join(known)}, got {part!r}")
        out[key.strip()] = positive_float(value.strip())
    if not out:
        raise BadValue(f"expected at least one target, e.g. tpot_p99_ms=40, got {text!r}")
    return out


def tenant_slo_targets(text: str) -> tuple[str | None, dict[str, float]]:
    """[TENANT:]KEY=MS,...: p99 targets for one tenant, or (no TENANT) for every tenant."""
    head, sep, rest = text.partition(":")
    if sep and "=" not in head:
        tenant = head.strip()
        if not tenant:
            raise BadValue(f"expected TENANT:KEY=MS,... with a tenant name before the colon, got {text!r}")
        return tenant, slo_targets(rest)
    return None, slo_targets(text)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(text: str) -> float:
    """A positive duration in seconds: 90, 90s, 5m, 8h, 1.5h, 1d."""
    t = text.strip().lower()
    scale = _UNITS.get(t[-1:], None)
    body = t[:-1] if scale is not None else t
    try:
        value = float(body) * (scale or 1.0)
    except ValueError:
        raise BadValue(f"expected a duration such as 90s, 5m or 8h, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise BadValue(f"expected a positive duration such as 90s, 5m or 8h, got {text!r}")
    return value


def odd_count(text: str) -> int:
    """A positive odd integer: probes that decide a rate by majority (1, 3, 5, ...)."""
    value = positive_int(text)
    if value % 2 == 0:
        raise BadValue(f"expected an odd number, so a majority decides each rate, got {text!r}")
    return value


def precision_percent(text: str) -> float:
    """A search's precision: a percentage from 0.1 to under 100, as a share."""
    return number(text, lambda v: 0.1 <= v < 100, "a percentage from 0.1 to under 100", scale=0.01)
