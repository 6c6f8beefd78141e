"""The simulator's HTTP server: vLLM's OpenAI-compatible API over the engine.

SSE framing follows vLLM's: `data: {json}\\n\\n` events; for chat a first chunk carrying only
the assistant role; one chunk per engine step carrying all tokens that step produced; with
`stream_options.include_usage` a final chunk with empty `choices` and the true usage (and with
`continuous_usage_stats` usage in every chunk); then `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import orjson
from aiohttp import web

from cluster.sim import perf_model, profiles
from cluster.sim.acceptance import classify_domain
from cluster.sim.engine import Engine, Sequence
from cluster.sim.faults import HTTP_ERROR_TYPES, FaultPlan, Faults, RequestFaults
from cluster.sim.metrics import ServerMetrics

# Text the simulator streams: common English words, one token each (a leading space, as BPE
# tokenizers produce). Only lengths matter; the words make the stream readable.
_WORDS = (
    "the of and to in is that for it as with was on be by this are from at or an have not which "
    "but they one you all were can there their has more when will would what if each about how "
    "so these time other some could them only into then two may first also new like over such"
).split()
VOCAB = tuple(f" {w}" for w in _WORDS)
# Tokens per character of English text for byte-level BPE tokenizers (Llama 3, Qwen 2.5): about
# 4 characters per token; the simulator has no tokenizer, so it estimates prompt length this way.
CHARS_PER_TOKEN = 4
# Chat templates add a few tokens per message (role header and end-of-turn markers in Llama 3's).
CHAT_TOKENS_PER_MESSAGE = 4
CHAT_TOKENS_PER_PROMPT = 3


def estimate_tokens(text: str) -> int:
    return max(1, (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)


def natural_length(text: str) -> int:
    """Where the model would emit EOS, a pure function of the prompt, so every mode generates the
    same number of tokens for the same request (as greedy decoding would): 32 to 1055 tokens."""
    digest = hashlib.blake2b(text.encode(), digest_size=4).digest()
    return 32 + int.from_bytes(digest, "little") % 1024


@dataclass(frozen=True)
class ServerConfig:
    model: str
    served_model_names: tuple[str, ...]
    max_model_len: int
    api_key: str | None = None
    faults: Faults = field(default_factory=Faults)
    seed: int = 0


class RequestError(Exception):
    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError",
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.param = status, kind, param


def error_response(exc: RequestError) -> web.Response:
    body = {"object": "error", "message": str(exc), "type": exc.kind, "param": exc.param, "code": exc.status}
    return web.Response(status=exc.status, body=orjson.dumps(body), content_type="application/json")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class SimServer:
    def __init__(self, cfg: ServerConfig, engine: Engine) -> None:
        self.cfg = cfg
        self.engine = engine
        self.metrics = ServerMetrics(cfg.served_model_names[0], engine)
        self.created = int(time.time())
        self._ids = itertools.count()
        self.started = time.monotonic()
        self.faults = FaultPlan(cfg.faults, cfg.seed)

    # ---- app --------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth], client_max_size=64 * 1024**2)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.prometheus)
        app.router.add_get("/sim/info", self.info)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self.engine.start()
        if self.cfg.faults.crash_at is not None:
            asyncio.get_running_loop().call_later(self.cfg.faults.crash_at, _crash, "crash-at")

    async def _on_cleanup(self, app: web.Application) -> None:
        await self.engine.stop()

    @web.middleware
    async def _auth(self, request: web.Request, handler):
        if self.cfg.api_key and request.path.startswith("/v1"):
            if request.headers.get("Authorization") != f"Bearer {self.cfg.api_key}":
                return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    # ---- simple routes ------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        slow = self.cfg.faults.slow_start
        if slow is not None and time.monotonic() - self.started < slow:
            return web.Response(status=503, text="starting (fault slow-start)")
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        data = [
            {"id": name, "object": "model", "created": self.created, "owned_by": "vllm",
             "root": self.cfg.model, "parent": None, "max_model_len": self.cfg.max_model_len}
            for name in self.cfg.served_model_names
        ]
        return web.json_response({"object": "list", "data": data}, dumps=lambda o: orjson.dumps(o).decode())

    async def prometheus(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), content_type="text/plain", charset="utf-8")

    async def info(self, request: web.Request) -> web.Response:
        dep = self.engine.dep
        body = {
            "model": self.cfg.model,
            "hardware": asdict(dep.hardware),
            "model_profile": {**asdict(dep.model), "weight_bytes": dep.model.weight_bytes,
                              "kv_bytes_per_token": dep.model.kv_bytes_per_token},
            "tensor_parallel_size": dep.tp,
            "speculative_config": asdict(dep.spec) if dep.spec else None,
            "draft_profile": asdict(dep.draft) if dep.draft else None,
            "memory": {
                "target_weight_bytes_per_gpu": dep.model.weight_bytes / dep.tp,
                "proposer_weight_bytes": perf_model.proposer_weight_bytes(dep),
                "kv_capacity_tokens": self.engine.kv_capacity,
                "gpu_memory_utilization": dep.gpu_memory_utilization,
            },
            "performance_model": {
                "mem_efficiency": profiles.MEM_EFFICIENCY,
                "compute_efficiency": profiles.COMPUTE_EFFICIENCY,
                "step_overhead_s": profiles.STEP_OVERHEAD_S,
                "allreduce_s": profiles.ALLREDUCE_S,
                "draft_step_overhead_s": profiles.DRAFT_STEP_OVERHEAD_S,
                "max_num_batched_tokens": profiles.MAX_NUM_BATCHED_TOKENS,
                "single_stream_step_s": perf_model.step_s(dep, 1, 1024),
            },
            "step_lateness_ms": _percentiles(self.engine.stats.step_lateness_s),
            "max_num_seqs": self.engine.max_num_seqs,
            "time_scale": self.engine.time_scale,
            "steps": self.engine.stats.steps,
        }
        return web.json_response(body, dumps=lambda o: orjson.dumps(o).decode())

    # ---- generation -----------------------------------------------------------------------
    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError as exc:
            raise RequestError(f"Invalid JSON in request body: {exc}") from None
        if not isinstance(body, dict):
            raise RequestError("Request body must be a JSON object")
        model = body.get("model")
        if model is not None and model not in self.cfg.served_model_names:
            raise RequestError(f"The model `{model}` does not exist.", 404, "NotFoundError", "model")
        if body.get("n", 1) != 1:
            raise RequestError("n > 1 is not supported by the simulator", param="n")
        return body

    def _sequence(self, body: dict[str, Any], text: str, prompt_tokens: int) -> Sequence:
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        room = self.cfg.max_model_len - prompt_tokens
        if max_tokens is None:
            max_tokens = room
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise RequestError(f"max_tokens must be at least 1, got {max_tokens}.", param="max_tokens")
        if prompt_tokens + max_tokens > self.cfg.max_model_len:
            raise RequestError(
                f"This model's maximum context length is {self.cfg.max_model_len} tokens. However, you "
                f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or completion.",
                param="max_tokens",
            )
        target = max_tokens if body.get("ignore_eos") else min(max_tokens, natural_length(text))
        temperature = body.get("temperature")
        return Sequence(
            request_id=str(next(self._ids)),
            prompt_tokens=prompt_tokens,
            target_tokens=target,
            domain=classify_domain(text),
            temperature=1.0 if temperature is None else float(temperature),
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await self._body(request)
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                prompt = prompt[0]
            if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
                text, n_prompt = " ".join(map(str, prompt[:64])), len(prompt)
            elif isinstance(prompt, str) and prompt:
                text, n_prompt = prompt, estimate_tokens(prompt)
            else:
                raise RequestError("prompt must be a non-empty string or list of token ids", param="prompt")
            seq = self._sequence(body, text, n_prompt)
        except RequestError as exc:
            return error_response(exc)
        return await self._generate(request, body, seq, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await self._body(request)
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise RequestError("messages must be a non-empty list", param="messages")
            text = "\n".join(_text_of(m.get("content")) for m in messages if isinstance(m, dict))
            n_prompt = (sum(estimate_tokens(_text_of(m.get("content"))) for m in messages if isinstance(m, dict))
                        + CHAT_TOKENS_PER_MESSAGE * len(messages) + CHAT_TOKENS_PER_PROMPT)
            seq = self._sequence(body, text, n_prompt)
        except RequestError as exc:
            return error_response(exc)
        return await self._generate(request, body, seq, chat=True)

    def _finish_reason(self, seq: Sequence, body: dict[str, Any]) -> str:
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        return "length" if max_tokens is not None and seq.generated >= max_tokens else "stop"

    async def _generate(self, request: web.Request, body: dict[str, Any], seq: Sequence,
                        chat: bool) -> web.StreamResponse:
        faults = self.faults.next_request()
        if faults.http_error:
            return error_response(RequestError(f"injected fault: HTTP {faults.http_error}", faults.http_error,
                                               HTTP_ERROR_TYPES[faults.http_error]))
        self.engine.add(seq)
        try:
            if body.get("stream"):
                return await self._stream(request, body, seq, chat, faults)
            if faults.crash_after_chunks is not None:
                _crash("crash-after")
            return await self._complete(body, seq, chat)
        finally:
            if not seq.finished:
                self.engine.abort(seq)

    def _words(self, start: int, n: int) -> str:
        v = VOCAB
        return "".join(v[(start + i) % len(v)] for i in range(n))

    async def _complete(self, body: dict[str, Any], seq: Sequence, chat: bool) -> web.Response:
        last = None
        while await seq.outbox.get() != 0:
            now = time.monotonic()
            if last is None:
                self.metrics.ttft.observe(now - seq.arrival)
            else:
                self.metrics.itl.observe(now - last)
            last = now
        reason = self._finish_reason(seq, body)
        self.metrics.finished(seq, reason, time.monotonic())
        text = self._words(0, seq.generated)
        usage = {"prompt_tokens": seq.prompt_tokens, "total_tokens": seq.prompt_tokens + seq.generated,
                 "completion_tokens": seq.generated}
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "logprobs": None, "finish_reason": reason, "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason, "stop_reason": None}
            obj = "text_completion"
        out = {"id": rid, "object": obj, "created": int(time.time()), "model": body.get("model") or
               self.cfg.served_model_names[0], "choices": [choice], "usage": usage}
        return web.Response(body=orjson.dumps(out), content_type="application/json")

    async def _stream(self, request: web.Request, body: dict[str, Any], seq: Sequence,
                      chat: bool, faults: RequestFaults) -> web.StreamResponse:
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        continuous = include_usage and bool(opts.get("continuous_usage_stats"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()), "model": body.get("model") or self.cfg.served_model_names[0]}

        def event(choice: dict[str, Any] | None, tokens: int) -> bytes:
            chunk = {**head, "choices": [choice] if choice is not None else []}
            if continuous or choice is None:
                chunk["usage"] = {"prompt_tokens": seq.prompt_tokens, "total_tokens": seq.prompt_tokens + tokens,
                                  "completion_tokens": tokens}
            return b"data: " + orjson.dumps(chunk) + b"\n\n"

        if chat:
            await resp.write(event({"index": 0, "delta": {"role": "assistant", "content": ""},
                                    "logprobs": None, "finish_reason": None}, 0))
        last = seq.arrival
        emitted = chunks = 0
        while (n := await seq.outbox.get()) != 0:
            now = time.monotonic()
            if emitted == 0:
                self.metrics.ttft.observe(now - seq.arrival)
            else:
                self.metrics.itl.observe(now - last)
            last = now
            text = self._words(emitted, n)
            emitted += n
            reason = self._finish_reason(seq, body) if emitted >= seq.target_tokens else None
            if chat:
                choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": reason}
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason,
                          "stop_reason": None}
            await resp.write(event(choice, emitted))
            chunks += 1
            if chunks == faults.malformed_at_chunk:
                await resp.write(b'data: {"id": "' + rid.encode() + b'", "choices": [{"text": \n\n')
            if chunks == faults.stall_at_chunk:
                await asyncio.sleep(self.cfg.faults.stall[1])
            if chunks == faults.drop_at_chunk:
                request.transport.abort()  # the client sees the connection reset mid-stream
                return resp
            if chunks == faults.crash_after_chunks:
                _crash("crash-after")
        self.metrics.finished(seq, self._finish_reason(seq, body), time.monotonic())
        if include_usage:
            await resp.write(event(None, emitted))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _percentiles(values) -> dict[str, float | int]:
    """p50/p99/max in ms of the last steps' start lateness (how late the engine began each step)."""
    if not values:
        return {"steps": 0}
    arr = np.fromiter(values, dtype=np.float64) * 1e3
    return {"steps": len(arr), "p50": float(np.percentile(arr, 50)), "p99": float(np.percentile(arr, 99)),
            "max": float(arr.max())}


def _crash(fault: str) -> None:
    logging.getLogger(__name__).error("injected fault %s: exiting now", fault)
    logging.shutdown()
    os._exit(1)


async def serve(server: SimServer, host: str, port: int) -> None:
    """Run until cancelled (SIGINT/SIGTERM)."""
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
