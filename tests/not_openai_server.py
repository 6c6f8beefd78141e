"""Servers that answer /v1/models as vLLM does but are not OpenAI-compatible where it counts, one
behaviour per port, for the bad-input matrix:

    python -m tests.not_openai_server html=PORT empty=PORT json=PORT redirect=PORT models_html=PORT

- html: completions answer 200 with an HTML page; empty: 200 with an empty body; json: a
  non-streaming JSON reply to a streaming request; redirect: 302 to another address;
  models_html: /v1/models itself is an HTML page (a web server, not an inference server).
"""

from __future__ import annotations

import asyncio
import sys

from aiohttp import web

PAGE = "<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>"
MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 8192}]}
REPLY = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": "hello", "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def make_app(kind: str) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        if kind == "models_html":
            return web.Response(text=PAGE, content_type="text/html")
        return web.json_response(MODELS)

    async def generate(request: web.Request) -> web.StreamResponse:
        await request.read()
        if kind == "html":
            return web.Response(text=PAGE, content_type="text/html")
        if kind == "empty":
            return web.Response(body=b"", content_type="text/event-stream")
        if kind == "json":
            return web.json_response(REPLY)
        raise web.HTTPFound("http://127.0.0.1:9/elsewhere")

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", lambda r: web.Response())
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/chat/completions", generate)
    return app


async def main(pairs: list[str]) -> None:
    for pair in pairs:
        kind, port = pair.split("=")
        runner = web.AppRunner(make_app(kind))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", int(port)).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
