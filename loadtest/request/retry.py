"""What the client does with a 429 or 503 that says when to come back (`Retry-After`, RFC 9110
section 10.2.3: delay-seconds or an HTTP-date): record it (the default: a load test reports the
server's refusals, it does not hide them), or honour it, waiting and resending up to a limit."""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

RETRY_STATUSES = (429, 503)   # the statuses RFC 9110 gives Retry-After for (with 3xx redirects)
POLICIES = ("record", "honour")
MAX_RETRIES = 3               # --max-retries' default: a few waits, not an endless loop


@dataclass(frozen=True)
class RetryPolicy:
    honour: bool = False
    max_retries: int = MAX_RETRIES

    def wait_s(self, status: int, retry_after: float | None, attempts: int, left_s: float) -> float | None:
        """Seconds to wait before sending again, or None to record this answer as the outcome:
        honoured only for a 429 or 503 with Retry-After, within the retries, and when the wait
        leaves time before the request's timeout."""
        if not self.honour or status not in RETRY_STATUSES or retry_after is None:
            return None
        if attempts > self.max_retries or retry_after >= left_s:
            return None
        return retry_after


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` in seconds from now (0 for a date in the past); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:   # RFC 9110's HTTP-date is always GMT
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if seconds == seconds and seconds != float("inf") else None
