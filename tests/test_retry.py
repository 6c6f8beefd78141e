"""What the client does with Retry-After (loadtest/request/retry.py): pure rules, no server."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from loadtest.request.retry import RetryPolicy, parse_retry_after


@pytest.mark.parametrize("value, seconds", [
    ("3", 3.0), (" 0.5 ", 0.5), ("0", 0.0), ("-4", 0.0), (None, None), ("", None), ("soon", None),
    ("nan", None), ("inf", None),
])
def test_retry_after_in_seconds(value, seconds):
    assert parse_retry_after(value) == seconds


def test_retry_after_as_an_http_date():
    now = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC).timestamp()
    later = format_datetime(datetime(2026, 12, 2, 10, 0, 7, tzinfo=UTC), usegmt=True)
    assert parse_retry_after(later, now=now) == pytest.approx(7.0)
    assert parse_retry_after("Wed, 02 Dec 2026 09:59:00 GMT", now=now) == 0.0   # in the past: now


def test_only_an_honoured_429_or_503_with_time_left_is_resent():
    honour = RetryPolicy(honour=True, max_retries=2)
    assert honour.wait_s(429, 1.0, attempts=1, left_s=5.0) == 1.0
    assert honour.wait_s(503, 1.0, attempts=2, left_s=5.0) == 1.0
    assert honour.wait_s(503, 1.0, attempts=3, left_s=5.0) is None     # past --max-retries
    assert honour.wait_s(503, 1.0, attempts=1, left_s=0.9) is None     # the wait would pass the timeout
    assert honour.wait_s(500, 1.0, attempts=1, left_s=5.0) is None     # not a status that says come back
    assert honour.wait_s(429, None, attempts=1, left_s=5.0) is None    # no Retry-After
    assert RetryPolicy().wait_s(429, 1.0, attempts=1, left_s=5.0) is None   # the default records it
