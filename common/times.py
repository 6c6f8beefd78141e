"""Times as the project writes them: wall-clock timestamps (every manifest and state file) and
latencies (every table, and the web UI's)."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def utc_now(timespec: str = "milliseconds") -> str:
    """Now in UTC, ISO 8601 with a Z: 2026-12-01T12:34:56.789Z."""
    return datetime.now(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def ms_text(v: float | None) -> str:
    """A latency as every table prints it: whole milliseconds from 100 up, one decimal below,
    `-` when there is none."""
    return "-" if v is None or math.isnan(v) else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def span_text(seconds: float) -> str:
    """A duration as a person reads it: `45 s`, `2 min`, `1 h 30 min`, `8 h` (a two-minute soak is
    not `0.03 h`)."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    h, m = s // 3600, s % 3600 // 60
    return f"{h:,} h" + (f" {m} min" if m else "")
