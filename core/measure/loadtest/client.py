"""One client of a server taken as untrusted (``untrusted``): the address without its
credentials, the key in its header and nowhere else, one streamed request read into its
``RequestRecord`` (every failure its one line), the models the server lists, a bounded JSON
answer and a /metrics page. The measurement's schedule (levels, warm-up, prompt lengths) is
``run``'s.

Redirects are never followed (the key would go with them to wherever the server says); a
3xx, an HTTP error or an HTML page is the request's one line, and an HTML page marks the server
as no OpenAI-compatible one (``foreign``)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.io.textfile import printable
from rooflab.core.measure.loadtest.plan import METRICS_SECONDS, PREFLIGHT_SECONDS, RequestRecord, ServerPlan, public_url
from rooflab.core.measure.loadtest.stream import StreamState, error_message, prometheus_samples
from rooflab.core.measure.loadtest.untrusted import (
    ERROR_BODY,
    MAX_LINE,
    Secrets,
    Stalled,
    StreamError,
    basic_header,
    header_key,
    read_body,
    read_lines,
    read_reported_json,
    split_credentials,
)

METRICS_KEPT = 200             # samples kept of a /metrics page
MODELS_KEPT = 64               # model ids kept of /v1/models
EXTRA_STEPS = 64               # token steps past twice the answer asked before a stream is refused
MAX_TOKEN_TIMES = 1 << 26      # token times one run keeps, all requests together (8 bytes each: 512 MiB)


def client_errors() -> tuple[type[BaseException], ...]:
    """What aiohttp and the address can raise for one request, beside time-outs: its client
    errors, its HTTP parser's (a header line past its limit is no ClientError), a ValueError
    of yarl or of a header, an OSError of the socket or TLS."""
    import aiohttp
    from aiohttp.http_exceptions import HttpProcessingError

    return aiohttp.ClientError, HttpProcessingError, ValueError, OSError


def request_errors() -> tuple[type[BaseException], ...]:
    """``client_errors`` with a stream's own and a time-out: what ends one request quietly."""
    return (StreamError, TimeoutError, *client_errors())


class Client:
    """Requests to ``plan``'s server inside the event loop (``session``: its aiohttp session)."""

    def __init__(self, plan: ServerPlan, api_key: str | None = None) -> None:
        self.plan = plan
        self.chat = plan.endpoint == "chat"
        self.root, login = split_credentials(plan.url)
        self.url = self.root + ("/v1/chat/completions" if self.chat else "/v1/completions")
        self.where = public_url(plan.url)
        # identity, and the session does not inflate: the caps hold on the bytes a server sends, not on
        # what a compressed body would inflate to (a 64 KiB gzip chunk can be 64 MB)
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                        "Accept-Encoding": "identity"}
        secret = api_key or (os.environ.get(plan.api_key_env, "") if plan.api_key_env else "")
        if plan.api_key_env and not secret:
            raise MeasurementError(f"the environment variable {plan.api_key_env} is not set (it should hold "
                                   "the API key)")
        if secret and login is not None:
            raise MeasurementError("the server address holds a user and password and an API key is given: "
                                   "give one of them")
        if secret:
            self.headers["Authorization"] = "Bearer " + header_key(secret, plan.api_key_env or "the key field")
        elif login is not None:
            self.headers["Authorization"] = basic_header(*login)
        # the key, the password (not the user name: a word like "admin" is no secret) and the
        # header's token (a Basic one is the two in base64)
        password = login[1] if login is not None else ""
        self.secrets = Secrets([secret, password, self.headers.get("Authorization", "").partition(" ")[2]])
        self.foreign = ""
        self.force = plan.force_length
        self.stopping = False
        self.session: Any = None
        self.models: tuple[str, ...] = ()
        self.warnings: list[str] = []
        self.recorded = 0                   # token times the run holds (``full`` past ``MAX_TOKEN_TIMES``)

    @property
    def full(self) -> bool:
        """The run holds the most token times it keeps: no more requests are sent (a server
        streaming as fast as it can for long answers would otherwise fill the memory)."""
        return self.recorded > MAX_TOKEN_TIMES

    def full_line(self) -> str:
        return f"the run holds {MAX_TOKEN_TIMES:,} token times ({MAX_TOKEN_TIMES * 8 >> 20:,} MiB), the most it keeps"

    def clean(self, text: Any, limit: int = 240) -> str:
        """Server text as one line that may be shown and kept (``Secrets.clean``)."""
        return self.secrets.clean(text, limit)

    def body(self, text: str, answer: int, stream: bool = True) -> dict[str, Any]:
        """A completion request's fields: the extra ones first, rooflab's over them."""
        body: dict[str, Any] = {"min_tokens": answer, "ignore_eos": True} if self.force else {}
        body |= dict(self.plan.extra_body)
        body |= {"model": self.plan.model, "max_tokens": answer, "stream": stream}
        if self.chat:
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    async def one(self, index: int, text: str, asked: int, prompt_tokens: int, t0: float) -> RequestRecord:
        """Send one request (``text`` as its prompt, ``asked`` tokens of answer) and read its
        stream to the end; every failure becomes the record's status and one line."""
        import aiohttp

        state = StreamState(chat=self.chat)
        status, error = "ok", ""
        sent = time.perf_counter() - t0
        timeout = aiohttp.ClientTimeout(total=self.plan.request_timeout)
        steps = 2 * asked + EXTRA_STEPS

        def on_line(line: bytes) -> bool:
            if self.stopping:                # a cancel that reached the task while a read returned
                raise asyncio.CancelledError
            before = len(state.token_times)
            state.feed(line, time.perf_counter() - t0)
            if len(state.token_times) > before:
                self.recorded += 1
                if self.full:
                    raise StreamError(f"{self.full_line()}: no more token is timed")
            if len(state.token_times) > steps:
                raise StreamError(f"the server sent over {steps:,} token steps for an answer of {asked:,} tokens")
            return state.done

        try:
            data = io.BytesIO(json.dumps(self.body(text, asked), allow_nan=False).encode())
            async with self.session.post(self.url, data=data, headers=self.headers, timeout=timeout,
                                         allow_redirects=False) as resp:
                if resp.status >= 300 or "html" in resp.headers.get("Content-Type", "").lower():
                    raise await self.refused(resp)
                if compressed(resp):
                    raise StreamError(f"the server sent its answer compressed ({compressed(resp)}) though asked "
                                      "for none")
                await read_lines(resp.content, on_line, stall=self.plan.stall_timeout,
                                 max_bytes=steps * MAX_LINE)
            if not state.finished:
                raise StreamError(f"stream cut after {len(state.token_times)} tokens: it ended without a "
                                  "finish reason or [DONE]")
            if not state.token_times:
                raise StreamError(f"the answer ended ({state.finish_reason or '[DONE]'}) without a token")
        except StreamError as exc:
            status, error = "error", str(exc)
            if exc.foreign:
                self.foreign = self.foreign or str(exc)
        except asyncio.CancelledError:
            status, error = "cancelled", "cancelled"
        except Stalled:
            status, error = "timeout", (f"timed out: no data for {self.plan.stall_timeout:g} s after "
                                        f"{len(state.token_times)} tokens")
        except TimeoutError:
            status, error = "timeout", f"timed out: over {self.plan.request_timeout:g} s in all"
        except aiohttp.ClientPayloadError as exc:
            status, error = "error", f"stream cut after {len(state.token_times)} tokens: {first_line(exc)}"
        except client_errors() as exc:
            status, error = "error", f"connection failed after {len(state.token_times)} tokens: {first_line(exc)}"
        end = state.token_times[-1] if status == "ok" else time.perf_counter() - t0
        if state.usage.get("completion_tokens", 0) > asked:      # no server answers past max_tokens
            del state.usage["completion_tokens"]
        server = {f"usage_{k}": float(v) for k, v in state.usage.items()} | state.timings
        reported = state.usage.get("prompt_tokens")
        return RequestRecord(index=index, sent=sent, end=end, token_times=state.token_times,
                             prompt_tokens=reported if reported else prompt_tokens,
                             asked_tokens=asked, answer_tokens=state.answer_tokens,
                             counted_by=state.counted_by, status=status, error=self.clean(error), server=server)

    async def refused(self, resp: Any) -> StreamError:
        """The error of an answer that is no stream: a redirect (not followed: the key would go
        with it), an HTTP error with its body's message, or an HTML page (``foreign``)."""
        kind = resp.headers.get("Content-Type", "")
        if 300 <= resp.status < 400:
            try:
                where = public_url(str(resp.headers.get("Location", "")))
            except ValueError:
                where = "an address that is not a URL"
            return StreamError(f"HTTP {resp.status}: the server redirects to {where or 'nowhere'}; give that "
                               "address (redirects are not followed)")
        if "html" in kind.lower():
            return StreamError(f"HTTP {resp.status} with an HTML page ({kind.split(';')[0].strip()}), not an "
                               "OpenAI-compatible answer: is this the API's address?", foreign=True)
        return StreamError(f"HTTP {resp.status}: {error_message(await read_body(resp.content, ERROR_BODY, cut=True))}")

    async def get_json(self, path: str, body: dict[str, Any] | None = None, seconds: float = 10.0) -> Any:
        """The JSON a GET (or a POST of ``body``) answers (bounded: ``untrusted.read_reported_json``),
        None on any failure."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=seconds)
        try:
            if body is not None:
                call = self.session.post(self.root + path, data=io.BytesIO(json.dumps(body, allow_nan=False).encode()),
                                         headers=self.headers, timeout=timeout, allow_redirects=False)
            else:
                call = self.session.get(self.root + path, headers=self.headers, timeout=timeout,
                                        allow_redirects=False)
            async with call as resp:
                return await read_reported_json(resp.content) if resp.status < 300 else None
        except request_errors():
            return None

    async def preflight(self) -> None:
        """Reach the server (one clear error when it cannot be reached, redirects elsewhere or
        answers with something that is not an OpenAI-compatible server's) and read its models."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=min(PREFLIGHT_SECONDS, self.plan.request_timeout))
        try:
            async with self.session.get(self.root + "/v1/models", headers=self.headers, timeout=timeout,
                                        allow_redirects=False) as resp:
                if resp.status in (401, 403):
                    raise MeasurementError(f"{self.where} refuses the request (HTTP {resp.status}): "
                                           "give its API key with --api-key-env")
                if 300 <= resp.status < 400 or "html" in resp.headers.get("Content-Type", "").lower():
                    raise MeasurementError(f"{self.where}/v1/models: {self.clean(await self.refused(resp))}")
                if compressed(resp):
                    raise MeasurementError(f"{self.where}/v1/models: the server sent its answer compressed "
                                           f"({self.clean(compressed(resp), 40)}) though asked for none")
                listed = await read_reported_json(resp.content) if resp.status < 300 else None
                if resp.status < 300 and listed is None:
                    raise MeasurementError(f"{self.where}/v1/models answers with something that is not JSON: "
                                           "not an OpenAI-compatible server (is this the API's address?)")
        except StreamError as exc:
            raise MeasurementError(f"{self.where}/v1/models: {self.clean(exc)}") from None
        except TimeoutError:
            raise MeasurementError(f"cannot reach {self.where}: /v1/models gave no whole answer within "
                                   f"{timeout.total:g} s") from None
        except client_errors() as exc:
            raise MeasurementError(f"cannot reach {self.where}: {self.clean(first_line(exc))}") from None
        data = listed.get("data") if isinstance(listed, dict) else None
        ids = (m.get("id") for m in data[:MODELS_KEPT] if isinstance(m, dict)) if isinstance(data, list) else ()
        self.models = tuple(self.clean(i, 200) for i in ids if isinstance(i, str))
        if self.models and self.plan.model not in self.models:
            self.warnings.append(self.clean(f"the server lists {', '.join(self.models[:5])}, not "
                                             f"{self.plan.model!r}", 600))

    async def metrics(self) -> dict[str, float]:
        """Numeric samples of the server's Prometheus /metrics page (vLLM, llama-server with
        --metrics), the first ``METRICS_KEPT``, names printable and without the key; empty
        where there is none."""
        import aiohttp

        try:
            async with self.session.get(self.root + "/metrics", headers=self.headers, allow_redirects=False,
                                        timeout=aiohttp.ClientTimeout(total=METRICS_SECONDS)) as resp:
                if resp.status >= 300:
                    return {}
                text = (await read_body(resp.content, 1 << 20, cut=True)).decode("utf-8", errors="replace")
        except request_errors():
            return {}
        return {self.clean(k, 200): v for k, v in prometheus_samples(text, METRICS_KEPT).items()}


def compressed(resp: Any) -> str:
    """The Content-Encoding of an answer that is not plain (rooflab asks for ``identity``)."""
    encoding = str(resp.headers.get("Content-Encoding", "")).strip()
    return "" if encoding.lower() in ("", "identity") else printable(encoding, 40)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (cleaned and cut by the caller), or its type. An
    answer aiohttp could not parse (a ClientResponseError: not HTTP, a header past its limit) is
    its parser's words on one line, not their repr with the status and address around them."""
    message = getattr(exc, "message", None)
    if isinstance(message, str) and isinstance(getattr(exc, "status", None), int) and message.strip():
        return " ".join(x.strip() for x in message.splitlines() if x.strip().strip("^"))[:4096]
    text = str(exc).strip().splitlines()
    return text[0][:4096] if text else type(exc).__name__
