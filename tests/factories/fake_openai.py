"""A local OpenAI-compatible server that fails in chosen ways, for measuring against without a
model: aiohttp's web server on 127.0.0.1 in a thread of its own.

The model name picks the behaviour of /v1/completions and /v1/chat/completions:

    ok          every token, usage at the end, [DONE]
    short       half the tokens asked (as if it ignored min_tokens)
    slow        like ok, ``slow_seconds`` between tokens
    http500     HTTP 500 with an OpenAI error body
    cut         3 tokens, then the connection is dropped
    nofinish    2 tokens, then the stream ends cleanly without a finish reason or [DONE]
    stall       2 tokens, then silence
    malformed   1 token, then a data line that is not JSON
    empty       a finish reason and [DONE] without a token
    (other)     HTTP 404: the model does not exist

The tokenizer counts one token per word (``/tokenize``, off with ``tokenize=False``); usage is
reported unless ``usage=False``; ``api_key`` makes every route ask for it; ``refuse_force``
answers 400 to ``min_tokens``/``ignore_eos``. ``bodies`` keeps every completion request."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any

from aiohttp import web

MODES = ("ok", "short", "slow", "http500", "cut", "nofinish", "stall", "malformed", "empty")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeServer:
    def __init__(self, *, tokenize: bool = True, usage: bool = True, api_key: str | None = None,
                 refuse_force: bool = False, token_seconds: float = 0.001, slow_seconds: float = 0.05) -> None:
        self.tokenize, self.usage, self.api_key, self.refuse_force = tokenize, usage, api_key, refuse_force
        self.token_seconds, self.slow_seconds = token_seconds, slow_seconds
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> FakeServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_post("/v1/completions", self._complete)
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        self._loop.run_until_complete(self._runner.setup())
        self._loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
        self._ready.set()
        self._loop.run_forever()

    def _refused(self, request: web.Request) -> web.Response | None:
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "invalid API key"}}, status=401)
        return None

    async def _models(self, request: web.Request) -> web.Response:
        return self._refused(request) or web.json_response({"data": [{"id": m} for m in MODES]})

    async def _tokenize(self, request: web.Request) -> web.Response:
        if not self.tokenize:
            raise web.HTTPNotFound()
        body = await request.json()
        return web.json_response({"tokens": [7] * len(str(body.get("content", "")).split())})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._answer(request)
        except ConnectionResetError:          # the client went away (a time-out, a cut): nothing to do
            return web.Response(status=499)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        model, asked = body.get("model"), int(body.get("max_tokens", 16))
        chat = request.path.endswith("chat/completions")
        text = body["messages"][0]["content"] if chat else body.get("prompt", "")
        prompt_tokens = len(str(text).split()) + (5 if chat else 0)
        if self.refuse_force and ("min_tokens" in body or "ignore_eos" in body):
            return web.json_response({"error": {"message": "unknown field min_tokens"}}, status=400)
        if model not in MODES:
            return web.json_response({"error": {"message": f"model {model!r} not found"}}, status=404)
        if model == "http500":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if not body.get("stream"):
            return web.json_response({"choices": [{"text": "x", "finish_reason": "length"}],
                                      **({"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": asked}}
                                         if self.usage else {})})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        tokens = {"short": asked // 2, "cut": 3, "nofinish": 2, "stall": 2, "malformed": 1,
                  "empty": 0}.get(model, asked)
        pause = self.slow_seconds if model == "slow" else self.token_seconds
        for i in range(tokens):
            await asyncio.sleep(pause)
            await resp.write(_event(_chunk(chat, f"w{i} ", None)))
        if model == "cut":
            assert request.transport is not None
            request.transport.abort()
            return resp
        if model == "nofinish":
            await resp.write_eof()
            return resp
        if model == "stall":
            await asyncio.sleep(30)
        if model == "malformed":
            await resp.write(b"data: {not json\n\n")
            await asyncio.sleep(0.05)
        await resp.write(_event(_chunk(chat, "", "length")))
        if self.usage:
            await resp.write(_event({"choices": [], "usage": {"prompt_tokens": prompt_tokens,
                                                              "completion_tokens": tokens}}))
        await resp.write(b": a comment the client skips\n\ndata: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _chunk(chat: bool, text: str, reason: str | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
    if chat:
        choice["delta"] = {"content": text} if text else {}
    else:
        choice["text"] = text
    return {"id": "x", "model": "fake", "choices": [choice]}


def _event(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()
