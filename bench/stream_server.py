"""A minimal, fast OpenAI-style streaming server for load-generator benchmarks (not the simulator).

    python bench/stream_server.py PORT [--ttft-ms 50 --gap-ms 10]

Every response has 64 SSE events of 4 tokens each with running usage, then a usage chunk and
[DONE]. With no delays the whole body goes out in one write (the load generator is the limit);
paced, the first event goes after --ttft-ms and the rest every --gap-ms. The server keeps its
own TTFT for each X-Request-Id (handler start to the first event's write), served at GET /ttfts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from aiohttp import web

EVENTS = 64
TOKENS_PER_EVENT = 4


def _events() -> list[bytes]:
    out = []
    for i in range(1, EVENTS + 1):
        ev = {"id": "cmpl-bench", "object": "text_completion", "model": "bench",
              "choices": [{"index": 0, "text": " tok" * TOKENS_PER_EVENT, "finish_reason": None}],
              "usage": {"prompt_tokens": 8, "completion_tokens": i * TOKENS_PER_EVENT,
                        "total_tokens": 8 + i * TOKENS_PER_EVENT}}
        out.append(b"data: " + json.dumps(ev, separators=(",", ":")).encode() + b"\n\n")
    final = {"id": "cmpl-bench", "object": "text_completion", "model": "bench", "choices": [],
             "usage": {"prompt_tokens": 8, "completion_tokens": EVENTS * TOKENS_PER_EVENT,
                       "total_tokens": 8 + EVENTS * TOKENS_PER_EVENT}}
    out.append(b"data: " + json.dumps(final, separators=(",", ":")).encode() + b"\n\ndata: [DONE]\n\n")
    return out


def make_app(ttft_s: float, gap_s: float) -> web.Application:
    events = _events()
    whole = b"".join(events)
    ttfts: dict[str, float] = {}

    async def completions(request: web.Request) -> web.StreamResponse:
        start = time.perf_counter()
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        rid = request.headers.get("X-Request-Id", "")
        if ttft_s == 0 and gap_s == 0:
            await resp.write(whole)
            ttfts[rid] = (time.perf_counter() - start) * 1e3
        else:
            await asyncio.sleep(ttft_s - (time.perf_counter() - start))
            await resp.write(events[0])
            ttfts[rid] = (time.perf_counter() - start) * 1e3
            for ev in events[1:]:
                await asyncio.sleep(gap_s)
                await resp.write(ev)
        await resp.write_eof()
        return resp

    async def get_ttfts(request: web.Request) -> web.Response:
        return web.json_response(ttfts)

    async def reset(request: web.Request) -> web.Response:
        ttfts.clear()
        return web.Response()

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/ttfts", get_ttfts)
    app.router.add_post("/reset", reset)
    app.router.add_get("/health", lambda r: web.Response())
    return app


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--ttft-ms", type=float, default=0.0)
    ap.add_argument("--gap-ms", type=float, default=0.0)
    a = ap.parse_args()
    try:
        import uvloop  # optional: a faster event loop makes the server less of a limit

        uvloop.install()
    except ImportError:
        pass
    web.run_app(make_app(a.ttft_ms / 1e3, a.gap_ms / 1e3), host="127.0.0.1", port=a.port, print=None,
                access_log=None)
