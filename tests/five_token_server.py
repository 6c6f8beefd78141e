"""A deliberately simple OpenAI-style streaming server for measurement tests: every chunk carries
exactly 5 tokens, the first after TTFT_S, the next every GAP_S, with running usage. Its chat API
answers the same way, each answer's words naming the request (`a<n>`), and with `--log FILE` writes
each chat request's messages to FILE as a JSON line (what a conversation's turns carried).

    python -m tests.five_token_server PORT [--no-running-usage] [--log FILE]
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

TOKENS_PER_CHUNK = 5
TTFT_S = 0.100
GAP_S = 0.050


def make_app(running_usage: bool, log: str | None = None) -> web.Application:
    served = [0]

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        served[0] += 1
        word = f"a{served[0]}"
        if log:
            with open(log, "a") as f:
                f.write(json.dumps({"messages": body["messages"], "word": word}) + "\n")
        return await stream(request, body, lambda text: {"delta": {"content": text.replace("tok", word)}})

    async def completions(request: web.Request) -> web.StreamResponse:
        return await stream(request, await request.json(), lambda text: {"text": text})

    async def stream(request: web.Request, body: dict, piece) -> web.StreamResponse:
        chunks = body["max_tokens"] // TOKENS_PER_CHUNK
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await asyncio.sleep(TTFT_S)
        for i in range(1, chunks + 1):
            event = {"choices": [{"index": 0, **piece(" tok" * TOKENS_PER_CHUNK),
                                  "finish_reason": "length" if i == chunks else None}]}
            if running_usage:
                event["usage"] = {"prompt_tokens": 7, "completion_tokens": i * TOKENS_PER_CHUNK}
            await resp.write(f"data: {json.dumps(event)}\n\n".encode())
            if i < chunks:
                await asyncio.sleep(GAP_S)
        final = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": chunks * TOKENS_PER_CHUNK}}
        await resp.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/health", lambda r: web.Response())
    return app


if __name__ == "__main__":
    log = sys.argv[sys.argv.index("--log") + 1] if "--log" in sys.argv else None
    web.run_app(make_app("--no-running-usage" not in sys.argv, log), host="127.0.0.1", port=int(sys.argv[1]),
                print=None)
