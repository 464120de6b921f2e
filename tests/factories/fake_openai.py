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

and hostile ones, each a way a server rooflab does not control can answer:

    longline    a data line of 2 MiB that never ends
    bigline     one token in a 600 KiB line (past aiohttp's 512 KiB readline), then as ok
    infinity    usage with Infinity (not JSON)
    digits      usage with a 401-digit count
    absurd      usage of 1e300, -5 and 1.7e308 tokens (JSON, but no count)
    echo        every token names the key as its model and as a timings field
    errecho     an error chunk holding escape sequences, CR/LF and the key
    errbody     HTTP 400 whose JSON error message holds escape sequences, CR/LF, the key and 100k characters
    html        HTTP 200 with an HTML page
    redirect    HTTP 302 to an address with a user and password
    drip        a byte every 50 ms, never a whole line
    trickle     an SSE comment line every 100 ms for 30 s, never a token (no stall, no end)
    flood       token chunks without end
    gzip        the stream compressed, though the client asked for none (a 64 MB gzip bomb)
    (other)     HTTP 404: the model does not exist

The tokenizer counts ``per_word`` tokens a word (one; ``/tokenize``, off with
``tokenize=False``); usage is reported unless ``usage=False``; ``api_key`` makes every route
ask for it; ``refuse_force`` answers 400 to ``min_tokens``/``ignore_eos``. ``models``: the ids
/v1/models lists (the modes), ``models_bytes`` a body of that many bytes instead; ``metrics``:
a /metrics page; ``tokenize_body``: the raw body /tokenize answers (a count no tokenizer gives);
``site``: every address answers an HTML page (a web site, not an API).
``bodies`` keeps every completion request (a prompt cut to 64 characters and its length in
words: a test of memory must not hold them)."""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import socket
import threading
from typing import Any

from aiohttp import web

MODES = ("ok", "short", "slow", "http500", "cut", "nofinish", "stall", "malformed", "empty")
HOSTILE = ("longline", "bigline", "infinity", "digits", "absurd", "echo", "errecho", "errbody", "html", "redirect",
           "drip", "trickle", "flood", "gzip")
PAGE = "<!DOCTYPE html><html><head><title>Welcome</title></head><body>\x1b]0;pwned\x07hello</body></html>"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeServer:
    def __init__(self, *, tokenize: bool = True, usage: bool = True, api_key: str | None = None,
                 refuse_force: bool = False, token_seconds: float = 0.001, slow_seconds: float = 0.05,
                 per_word: float = 1.0, models: list[str] | None = None, metrics: str | None = None,
                 site: bool = False, models_bytes: int = 0, tokenize_body: bytes | None = None) -> None:
        self.tokenize, self.usage, self.api_key, self.refuse_force = tokenize, usage, api_key, refuse_force
        self.token_seconds, self.slow_seconds = token_seconds, slow_seconds
        self.per_word, self.models, self.metrics, self.site = per_word, models, metrics, site
        self.models_bytes, self.tokenize_body = models_bytes, tokenize_body
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
        if self.site:
            app.router.add_route("*", "/{tail:.*}", self._page)
        else:
            app.router.add_get("/v1/models", self._models)
            app.router.add_get("/metrics", self._metrics)
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

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def _models(self, request: web.Request) -> web.StreamResponse:
        if self.models_bytes:                 # a body without end, sent as fast as it is taken
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            try:
                await resp.write(b'{"data": [')
                for _ in range(self.models_bytes >> 16):
                    await resp.write(b" " * (1 << 16))
                await resp.write_eof()
            except ConnectionError:           # the client stopped reading at its cap
                pass
            return resp
        ids = self.models if self.models is not None else [*MODES, *HOSTILE]
        return self._refused(request) or web.json_response({"data": [{"id": m} for m in ids]})

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics is None:
            raise web.HTTPNotFound()
        return web.Response(text=self.metrics)

    async def _tokenize(self, request: web.Request) -> web.Response:
        if not self.tokenize:
            raise web.HTTPNotFound()
        if self.tokenize_body is not None:
            return web.Response(body=self.tokenize_body, content_type="application/json")
        body = await request.json()
        words = len(str(body.get("content", "")).split())
        return web.json_response({"tokens": [7] * max(1, round(words * self.per_word))})

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._answer(request)
        except ConnectionError:          # the client went away (a time-out, a cut): nothing to do
            return web.Response(status=499)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        self.headers.append(dict(request.headers))
        model, asked = body.get("model"), int(body.get("max_tokens", 16))
        chat = request.path.endswith("chat/completions")
        text = body["messages"][0]["content"] if chat else body.get("prompt", "")
        prompt_tokens = len(str(text).split()) + (5 if chat else 0)
        self.bodies.append({**body, "prompt": str(text)[:64], "messages": None, "prompt_words": prompt_tokens})
        del text, body["messages" if chat else "prompt"]
        if self.refuse_force and ("min_tokens" in body or "ignore_eos" in body):
            return web.json_response({"error": {"message": "unknown field min_tokens"}}, status=400)
        if model in HOSTILE:
            return await self._hostile(request, model, chat)
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


    async def _hostile(self, request: web.Request, model: str, chat: bool) -> web.StreamResponse:
        key = self.api_key or "no-key"
        if model == "html":
            return web.Response(text=PAGE, content_type="text/html")
        if model == "errbody":
            message = f"\x1b]0;pwned\x07\x1b[2J bad key {key}\r\nX-Injected: yes\x00\x9b" + "z" * 100_000
            return web.json_response({"error": {"message": message}}, status=400)
        if model == "redirect":
            raise web.HTTPFound(f"http://user:{key}@127.0.0.1:{self.port}/v1/completions")
        if model == "gzip":
            return web.Response(body=_bomb(), headers={"Content-Type": "text/event-stream",
                                                       "Content-Encoding": "gzip"})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        token = _event(_chunk(chat, "w ", None))
        done = _event(_chunk(chat, "", "length")) + b"data: [DONE]\n\n"
        if model == "longline":
            await resp.write(b"data: {" + b"x" * (1 << 16))
            for _ in range(32):
                await resp.write(b"x" * (1 << 16))
        elif model == "bigline":
            await resp.write(_event(_chunk(chat, "y" * (600 << 10), None)) + done)
        elif model in ("infinity", "digits", "absurd"):
            usage = {"infinity": b'{"prompt_tokens": 9, "completion_tokens": Infinity}',
                     "digits": b'{"prompt_tokens": 9, "completion_tokens": 1' + b"0" * 400 + b"}",
                     "absurd": b'{"prompt_tokens": -5, "completion_tokens": 1e300, "total_tokens": 1.7e308}'}[model]
            await resp.write(token * 2 + _event(_chunk(chat, "", "length")) + b'data: {"choices": [], "usage": '
                             + usage + b"}\n\ndata: [DONE]\n\n")
        elif model == "echo":
            echo = {**_chunk(chat, "w ", None), "model": key, "timings": {key: 1.0, "predicted_ms": 1e300,
                                                                          "prompt_n": -3, "predicted_n": 3}}
            await resp.write(_event(echo) * 3 + done)
        elif model == "errecho":
            message = f"\x1b]0;pwned\x07\x1b[2J bad key {key}\r\nX-Injected: yes\x00\x9b"
            await resp.write(token + _event({"error": {"message": message}}))
        elif model == "drip":
            for _ in range(2000):
                await resp.write(b"d")
                await asyncio.sleep(0.05)
        elif model == "trickle":
            for _ in range(300):
                await resp.write(b": still here\n\n")
                await asyncio.sleep(0.1)
        elif model == "flood":
            for _ in range(100_000):
                await resp.write(token)
        await resp.write_eof()
        return resp


@functools.cache
def _bomb() -> bytes:
    """64 MB of one SSE line, gzipped to about 64 KB."""
    return gzip.compress(b"data: " + b" " * (64 << 20), compresslevel=9)


def _chunk(chat: bool, text: str, reason: str | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
    if chat:
        choice["delta"] = {"content": text} if text else {}
    else:
        choice["text"] = text
    return {"id": "x", "model": "fake", "choices": [choice]}


def _event(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()
