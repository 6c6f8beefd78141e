"""Wall-clock timestamps as every manifest and state file writes them."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now(timespec: str = "milliseconds") -> str:
    """Now in UTC, ISO 8601 with a Z: 2026-12-01T12:34:56.789Z."""
    return datetime.now(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
