"""The streaming client: one OpenAI-style request in, one RequestRecord out.

Runs under gevent on geventhttpclient connections (Locust's FastHttpUser pool). The body is read
as bytes arrive: every complete line in the response's buffer is taken at once, and the socket is
read only when none is left (Locust's own `iter_lines()` waits for 1,024-byte blocks, which
delayed tokens by ~80 ms when measured here). Each line is stamped with the time the bytes that
completed it were received.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import gevent
from geventhttpclient.client import HTTPClientPool
from geventhttpclient.url import URL

from contract.records import RequestRecord
from loadtest.request.retry import RetryPolicy, parse_retry_after
from loadtest.request.sse import StreamError, StreamMeasurement, spec_counts

RECORD = RetryPolicy()   # the default: a 429 or 503 is recorded as it came


@dataclass(frozen=True)
class EpochClock:
    """Maps the monotonic clock used for every duration to epoch nanoseconds."""

    epoch_ns: int
    mono: float

    @classmethod
    def now(cls) -> EpochClock:
        return cls(time.time_ns(), time.perf_counter())

    def to_ns(self, mono: float) -> int:
        return self.epoch_ns + round((mono - self.mono) * 1e9)


def _drop_connection(resp) -> None:
    """Close a connection whose response was not read to the end (it cannot be reused)."""
    sock, pool = getattr(resp, "_sock", None), getattr(resp, "_pool", None)
    if sock is not None and pool is not None:
        pool.release_socket(sock)
        resp._sock = resp._pool = None


def execute(pool: HTTPClientPool, url: URL, body: bytes, headers: dict[str, str], timeout_s: float,
            rec: RequestRecord, scheduled: float, clock: EpochClock, cut_by_deadline: bool = False,
            retry: RetryPolicy = RECORD, answer: list[str] | None = None) -> None:
    """Send the request now and fill `rec` with what happened. `scheduled` is the monotonic time
    it was due; `cut_by_deadline`: `timeout_s` is what is left of the run's --deadline (a timeout
    is then the client's doing, error kind `deadline`); `retry`: what a 429 or 503 with
    Retry-After makes it do (resent ones keep the first send's time, so the waits count).
    `timeout_s` bounds every attempt and wait together; `answer`, where given, gets the answer's
    text pieces (those of the last attempt). Never raises, except GreenletExit (after recording the
    request as interrupted)."""
    sent = time.perf_counter()
    rec.sent_ns = clock.to_ns(sent)
    rec.lateness_ms = (sent - scheduled) * 1e3
    end = sent + timeout_s
    m = StreamMeasurement(sent, text=answer)
    try:
        while True:
            rec.attempts = (rec.attempts or 0) + 1
            _attempt(pool, url, body, headers, end, timeout_s, rec, m, cut_by_deadline)
            wait = retry.wait_s(rec.http_status or 0, rec.retry_after_s, rec.attempts, end - time.perf_counter()) \
                if rec.status == "error" and rec.error_kind == "http" else None
            if wait is None:
                return
            try:
                gevent.sleep(wait)
            except gevent.GreenletExit:   # the run stopped it while it waited to be sent again
                rec.status, rec.error_kind = "error", "interrupted"
                rec.error = f"the run stopped while the request waited {wait:g} s to be sent again (Retry-After)"
                raise
            rec.status = "not_sent"
            rec.http_status = rec.error_kind = rec.error = None
            if answer is not None:
                answer.clear()
            m = StreamMeasurement(sent, text=answer)
    finally:
        _fill(rec, m, scheduled, clock)


def _attempt(pool: HTTPClientPool, url: URL, body: bytes, headers: dict[str, str], end: float, timeout_s: float,
             rec: RequestRecord, m: StreamMeasurement, cut_by_deadline: bool) -> None:
    """One send of the request, until `end` (the request's `timeout_s` after its first send): its
    outcome in `rec`, its stream in `m`."""
    resp = None
    complete = False
    try:
        with gevent.Timeout(max(0.001, end - time.perf_counter())):
            resp = pool.get_client(url).request("POST", url.request_uri, body=body, headers=headers)
            rec.http_status = resp.status_code
            if resp.status_code != 200:
                rec.retry_after_s = parse_retry_after(resp.get("retry-after"))
                detail = resp.read()[:300].decode(errors="replace")
                complete = True
                rec.status, rec.error_kind = "error", "http"
                rec.error = f"HTTP {resp.status_code}: {detail}"
                return
            content_type = resp.get("content-type") or ""
            if content_type and "text/event-stream" not in content_type:
                raise StreamError("not_sse", f"HTTP 200 with Content-Type {content_type!r}, not an SSE stream: "
                                  f"{resp.read()[:120].decode(errors='replace')!r}")
            read_events(resp, m)
            resp.read()  # the chunked terminator, so the connection goes back to the pool
            complete = True
            rec.status = "ok"
    except gevent.Timeout:
        if cut_by_deadline:
            rec.status, rec.error_kind = "timeout", "deadline"
            rec.error = "in flight when the run's --deadline was reached"
        else:
            rec.status, rec.error_kind, rec.error = "timeout", *_timed_out(resp, m, timeout_s)
    except StreamError as exc:
        rec.status, rec.error_kind, rec.error = "error", exc.kind, str(exc)
    except gevent.GreenletExit:
        rec.status, rec.error_kind = "error", "interrupted"
        rec.error = "the run stopped while the request was in flight"
        raise
    except Exception as exc:  # connection refused or reset, HTTP parse errors
        rec.status, rec.error_kind = "error", "connection"
        rec.error = f"{_broke_where(resp, m)}{type(exc).__name__}: {exc}"[:500]
    finally:
        if resp is not None and not complete:
            _drop_connection(resp)


def _broke_where(resp, m: StreamMeasurement) -> str:
    """How far a request had got when its connection broke: nothing before the headers (refused,
    reset), else after the headers or after its chunks (a reset mid-stream)."""
    if resp is None:
        return ""
    if not m.chunk_times:
        return "the connection broke after the response headers: "
    return f"the connection broke after {len(m.chunk_times)} chunk(s): "


def _timed_out(resp, m: StreamMeasurement, timeout_s: float) -> tuple[str, str]:
    """The timeout's kind and message: how far the request had got when `timeout_s` ran out."""
    if resp is None:
        return "headers", f"no response headers within {timeout_s:g} s"
    if not m.chunk_times:
        return "first_token", f"response headers but no token within {timeout_s:g} s"
    return "stream", f"{len(m.chunk_times)} chunk(s), then no end of the stream within {timeout_s:g} s"


def read_events(resp, m: StreamMeasurement) -> None:
    """Feed `m` every non-blank line of the body until `data: [DONE]`, each stamped with the time
    the bytes that completed it were received. Takes every complete line in the response's buffer
    at once and reads the socket only when none is left, so no line waits for a block to fill
    (Locust's `iter_lines()` waits for 1,024 bytes) and blank SSE separators cost nothing. Reads
    geventhttpclient's response buffer directly (the version is pinned in pyproject.toml)."""
    sock = resp._sock  # None when the whole body came with the headers
    # The request's own gevent.Timeout bounds the whole stream; a socket timeout as well would
    # arm and cancel a timer on every recv (one per SSE event when tokens are paced).
    socket_timeout = sock.gettimeout() if sock is not None else None
    if sock is not None:
        sock.settimeout(None)
    try:
        _read_loop(resp, sock, resp._body_buffer, m, time.perf_counter())
    finally:
        if sock is not None:
            try:
                sock.settimeout(socket_timeout)
            except OSError:  # released (closed) after an error
                pass


def _read_loop(resp, sock, buf: bytearray, m: StreamMeasurement, now: float) -> None:
    while True:
        end = buf.rfind(b"\n")
        if end >= 0:
            lines = bytes(buf[:end]).split(b"\n")
            del buf[:end + 1]
            for line in lines:
                if len(line) > 1:  # skip blank separators ("" or a lone "\r")
                    m.feed(line, now)
                    if m.done:
                        return
        if resp.message_complete or sock is None:
            raise _ended(m, "the stream ended")
        try:
            data = sock.recv(resp.block_size)
            resp.feed(data)
        except BaseException:
            resp.release()
            raise
        now = time.perf_counter()
        if not data:
            raise _ended(m, "the connection closed")


def _ended(m: StreamMeasurement, how: str) -> StreamError:
    """The body ended before `data: [DONE]`: cut short, or not an SSE stream at all."""
    if not m.saw_data:
        return StreamError("not_sse", f"the body is not an SSE stream (no data: line): {m.first_line!r}")
    return StreamError("incomplete_stream", f"{how} before data: [DONE]")


def _fill(rec: RequestRecord, m: StreamMeasurement, scheduled: float, clock: EpochClock) -> None:
    rec.prompt_tokens = m.prompt_tokens
    rec.completion_tokens = m.completion_tokens
    rec.finish_reason = m.finish_reason
    rec.itl_ms = m.itl_ms
    rec.chunk_tokens = m.tokens_per_chunk
    if m.spec is not None:
        rec.spec_steps, rec.spec_draft_tokens, rec.spec_accepted_tokens, rec.spec_acceptance_histogram = \
            spec_counts(m.spec)
    if m.chunk_times:
        first, last = m.chunk_times[0], m.chunk_times[-1]
        rec.first_token_ns, rec.last_token_ns = clock.to_ns(first), clock.to_ns(last)
        rec.ttft_ms = (first - m.sent) * 1e3
        rec.e2e_ms = (last - m.sent) * 1e3
        rec.ttft_sched_ms = (first - scheduled) * 1e3
        rec.e2e_sched_ms = (last - scheduled) * 1e3
    if rec.status == "ok" and not m.chunk_times:
        rec.status, rec.error_kind = "error", "malformed_stream"
        rec.error = "the stream carried no text"
