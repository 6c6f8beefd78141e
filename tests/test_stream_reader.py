"""The SSE reader against a raw TCP server that sends exactly the bytes a test scripts: lines
split across reads, CRLF endings, a body that arrives with the headers, a stream that ends
without `data: [DONE]`, and a connection closed mid-line. Each must end as one correct record."""

from __future__ import annotations

import socket
import threading
import time

from geventhttpclient.client import HTTPClientPool
from geventhttpclient.url import URL

from contract.records import RequestRecord
from loadtest.request.client import EpochClock, execute

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(text: str, tokens: int, eol: bytes = b"\n") -> bytes:
    body = (b'{"choices":[{"index":0,"text":"%s","finish_reason":null}],'
            b'"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}}') % (
                text.encode(), tokens, tokens + 3)
    return b"data: " + body + eol + eol


DONE = b"data: [DONE]\n\n"


def serve(script: list[bytes | float], close_early: bool = False) -> str:
    """A one-connection server: reads the request, then sends each bytes item of `script` as its
    own write, sleeping for each float item."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def run() -> None:
        conn, _ = listener.accept()
        with conn, listener:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.recv(65536)
            for item in script:
                if isinstance(item, float):
                    time.sleep(item)
                else:
                    conn.sendall(item)
            if not close_early:
                time.sleep(0.2)

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


def replay_one(base: str) -> RequestRecord:
    rec = RequestRecord(run_id="r", mode="m", worker="w0", tenant="t", request_id="q1", scheduled_ns=0,
                        offset_s=0.0, status="not_sent")
    pool = HTTPClientPool(concurrency=1, network_timeout=5, connection_timeout=5)
    url = URL(f"{base}/v1/completions")
    clock = EpochClock.now()
    try:
        execute(pool, url, b"{}", {"Content-Type": "application/json"}, 5.0, rec, time.perf_counter(), clock)
    finally:
        pool.close()
    return rec


def test_lines_split_across_reads_and_crlf_are_timed_when_complete():
    first, second = event("Hello", 2, b"\r\n"), event(" world", 5, b"\r\n")
    rec = replay_one(serve([HEAD, chunk(first), 0.05, chunk(second[:20]), 0.1, chunk(second[20:] + DONE), END]))
    assert rec.status == "ok", rec.error
    assert rec.completion_tokens == 5 and rec.chunk_tokens == [2, 3]
    # the second chunk counts from when its last byte arrived, not when its first did
    assert rec.itl_ms[1] >= 140, rec.itl_ms


def test_a_body_that_arrives_with_the_headers():
    rec = replay_one(serve([HEAD + chunk(event("a", 1) + event("b", 2) + DONE) + END]))
    assert rec.status == "ok" and rec.completion_tokens == 2 and rec.chunk_tokens == [1, 1]


def test_a_stream_without_done_is_incomplete():
    rec = replay_one(serve([HEAD, chunk(event("a", 1)), END]))
    assert (rec.status, rec.error_kind) == ("error", "incomplete_stream")
    assert rec.completion_tokens == 1 and rec.ttft_ms is not None  # what did arrive is kept


def test_a_connection_closed_mid_line_is_an_error_not_a_hang():
    rec = replay_one(serve([HEAD, chunk(event("a", 1)), chunk(b'data: {"choi')], close_early=True))
    assert rec.status == "error" and rec.error_kind in ("incomplete_stream", "connection"), rec.error


def test_a_request_stopped_while_it_waits_out_retry_after_is_interrupted():
    """Killed (the run's stop) during an honoured Retry-After wait: recorded as interrupted, not
    as the 429 it was waiting out (that would count as the server's error in the gate)."""
    import gevent

    from loadtest.request.retry import RetryPolicy

    refused = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nContent-Length: 4\r\n\r\nslow"
    base = serve([refused])
    rec = RequestRecord(run_id="r", mode="m", worker="w0", tenant="t", request_id="q1", scheduled_ns=0,
                        offset_s=0.0, status="not_sent")
    pool = HTTPClientPool(concurrency=1, network_timeout=5, connection_timeout=5)
    try:
        g = gevent.spawn(execute, pool, URL(f"{base}/v1/completions"), b"{}", {}, 60.0, rec, time.perf_counter(),
                         EpochClock.now(), retry=RetryPolicy(honour=True))
        gevent.sleep(0.5)
        assert not g.dead and rec.http_status == 429   # waiting its 30 s
        g.kill()
    finally:
        pool.close()
    assert (rec.status, rec.error_kind) == ("error", "interrupted"), rec.error
    assert rec.error == "the run stopped while the request waited 30 s to be sent again (Retry-After)"
    assert rec.attempts == 1 and rec.e2e_ms is None
