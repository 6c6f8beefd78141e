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
