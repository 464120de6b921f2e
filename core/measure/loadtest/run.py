"""Measure a running OpenAI-compatible server under load (llama-server, vLLM, SGLang, TGI, Ollama,
LM Studio, llama-cpp-python): at each concurrency level or request rate of a ``ServerPlan``,
stream every answer and time its tokens, then compute the level's figures as a prediction does.

One asyncio event loop (aiohttp, on a thread of its own, so a slow reader of the progress never
delays a timestamp) runs the whole measurement; a level is bounded in count (its requests) and
time (``level_seconds``, then each request's own time-outs). The job (``measure_server``) yields
progress and checks its cancel token every 0.1 s; Cancel stops the loop within a second and the
job returns what was measured, marked ``cancelled``. Errors and time-outs are counted per level
with one line each, never dropped and never raised: a broken server makes a table of errors.

The API key is read from the environment variable the plan names when the loop starts, and is
sent only in the Authorization header: it is in no record, no error line and no report."""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

from rooflab.core.errors import MeasurementError
from rooflab.core.jobs import CancelFlag, Progress, run_job
from rooflab.core.measure.loadtest.plan import (
    MAX_IN_FLIGHT,
    RequestRecord,
    ServerLevel,
    ServerMeasurement,
    ServerPlan,
    level_from,
    public_url,
)
from rooflab.core.measure.loadtest.prompts import TOKENIZE_PATHS, PromptMaker, calibrate, request_tag, tokens_in
from rooflab.core.measure.loadtest.stream import StreamError, StreamState, error_message, prometheus_samples
from rooflab.core.predict.serving import Load, draw_requests

POLL = 0.05                    # seconds between looks at the cancel token inside the loop
METRICS_KEPT = 200             # samples kept of a /metrics page
FORCE_FIELDS = ("min_tokens", "ignore_eos")


class _Run:
    """One measurement inside the event loop: the session, what to send, what came back."""

    def __init__(self, plan: ServerPlan, put: Callable[[Progress], None], stop: threading.Event,
                 api_key: str | None = None) -> None:
        self.plan, self.put, self.stop = plan, put, stop
        self.chat = plan.endpoint == "chat"
        self.url = plan.url + ("/v1/chat/completions" if self.chat else "/v1/completions")
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        self.secret = api_key or (os.environ.get(plan.api_key_env, "") if plan.api_key_env else "")
        if plan.api_key_env and not self.secret:
            raise MeasurementError(f"the environment variable {plan.api_key_env} is not set (it should hold "
                                   "the API key)")
        if self.secret:
            self.headers["Authorization"] = f"Bearer {self.secret}"
        self.force = plan.force_length
        self.stopping = False
        self.inflight: set[asyncio.Task[RequestRecord]] = set()
        self.levels: list[ServerLevel] = []
        self.current: list[RequestRecord] = []
        self.warnings: list[str] = []
        self.models: tuple[str, ...] = ()
        self.maker = PromptMaker(method="", per_word=1.0, fixed=0.0)
        self.session: Any = None
        self.wake: asyncio.Event | None = None
        self.setup_task: asyncio.Task[None] | None = None
        self.total = sum(plan.serving_plan().count(load) for load in plan.loads)
        self.done = 0
        self.shown = 0.0
        self.run = int.from_bytes(os.urandom(4), "little")
        self.label, self.count = "", 0
        self.tokenize_path = ""

    # --- one request ------------------------------------------------------------------------

    def _clean(self, text: str) -> str:
        return text.replace(self.secret, "***") if self.secret else text

    def body(self, text: str, answer: int, stream: bool = True) -> dict[str, Any]:
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

    async def one(self, index: int, body: dict[str, Any], prompt_tokens: int, t0: float) -> RequestRecord:
        """Send one request and read its stream to the end; every failure becomes the record's
        status and one line."""
        import aiohttp

        state = StreamState(chat=self.chat)
        status, error = "ok", ""
        sent = time.perf_counter() - t0
        timeout = aiohttp.ClientTimeout(total=self.plan.request_timeout, sock_read=self.plan.stall_timeout)
        try:
            async with self.session.post(self.url, json=body, headers=self.headers, timeout=timeout) as resp:
                if resp.status >= 400:
                    raise StreamError(f"HTTP {resp.status}: {error_message(await resp.content.read(4096))}")
                async for line in resp.content:
                    state.feed(line, time.perf_counter() - t0)
                    if state.done:
                        break
            if not state.finished:
                raise StreamError(f"stream cut after {len(state.token_times)} tokens: it ended without a "
                                  "finish reason or [DONE]")
            if not state.token_times:
                raise StreamError(f"the answer ended ({state.finish_reason or '[DONE]'}) without a token")
        except StreamError as exc:
            status, error = "error", str(exc)
        except asyncio.CancelledError:
            status, error = "cancelled", "cancelled"
        except TimeoutError:
            elapsed = time.perf_counter() - t0 - sent
            status = "timeout"
            error = (f"timed out: over {self.plan.request_timeout:g} s in all" if elapsed >= self.plan.request_timeout
                     else f"timed out: no data for {self.plan.stall_timeout:g} s after {len(state.token_times)} "
                          "tokens")
        except aiohttp.ClientPayloadError as exc:
            status, error = "error", f"stream cut after {len(state.token_times)} tokens: {_first_line(exc)}"
        except aiohttp.ClientError as exc:
            status, error = "error", f"connection failed after {len(state.token_times)} tokens: {_first_line(exc)}"
        except ValueError as exc:                  # a line longer than aiohttp reads at once
            status, error = "error", f"malformed stream after {len(state.token_times)} tokens: {_first_line(exc)}"
        end = state.token_times[-1] if status == "ok" else time.perf_counter() - t0
        server = {f"usage_{k}": float(v) for k, v in state.usage.items()} | state.timings
        reported = state.usage.get("prompt_tokens")
        return RequestRecord(index=index, sent=sent, end=end, token_times=tuple(state.token_times),
                             prompt_tokens=int(reported) if reported else prompt_tokens,
                             asked_tokens=int(body["max_tokens"]), answer_tokens=state.answer_tokens,
                             counted_by=state.counted_by, status=status, error=self._clean(error), server=server)

    async def spawn(self, index: int, body: dict[str, Any], prompt_tokens: int, t0: float) -> RequestRecord:
        task = asyncio.create_task(self.one(index, body, prompt_tokens, t0))
        self.inflight.add(task)
        try:
            record = await task
        finally:
            self.inflight.discard(task)
        self.current.append(record)
        self.done += 1
        now = time.perf_counter()
        if now - self.shown > 0.1:
            self.shown = now
            self.put(Progress(step="server", message=f"{self.label}: {len(self.current)} of {self.count} answered",
                              fraction=min(1.0, self.done / max(self.total, 1))))
        return record

    # --- one level --------------------------------------------------------------------------

    async def level(self, number: int, load: Load) -> ServerLevel:
        prompts, answers, arrivals = draw_requests(self.plan.serving_plan(), load)
        n = int(prompts.size)
        self.current, self.count = [], n
        self.label = f"concurrency {load.level:g}" if arrivals is None else f"{load.level:g} requests/s"
        made = [self.maker.prompt(request_tag(self.run, number, i), int(p)) for i, p in enumerate(prompts)]
        bodies = [self.body(text, int(a)) for (text, _), a in zip(made, answers, strict=True)]
        t0 = time.perf_counter()
        deadline = t0 + self.plan.level_seconds
        nxt = 0
        if arrivals is None:
            async def client() -> None:
                nonlocal nxt
                while not self.stopping and nxt < n and time.perf_counter() < deadline:
                    i, nxt = nxt, nxt + 1
                    await self.spawn(i, bodies[i], made[i][1], t0)

            await asyncio.gather(*(client() for _ in range(min(int(load.level), n))))
        else:
            tasks = []
            for i in range(n):
                delay = t0 + float(arrivals[i]) - time.perf_counter()
                if delay > 0 and self.wake is not None:
                    try:
                        await asyncio.wait_for(self.wake.wait(), delay)
                    except TimeoutError:
                        pass
                if self.stopping or time.perf_counter() >= deadline:
                    break
                while len(self.inflight) >= MAX_IN_FLIGHT and not self.stopping:
                    await asyncio.wait(set(self.inflight), return_when=asyncio.FIRST_COMPLETED)
                tasks.append(asyncio.create_task(self.spawn(i, bodies[i], made[i][1], t0)))
                nxt = i + 1
            await asyncio.gather(*tasks)
        warnings = []
        if nxt < n and not self.stopping:
            warnings.append(f"sent {nxt} of {n} requests: the level's {self.plan.level_seconds:g} s ran out")
        short = [r for r in self.current if r.status == "ok" and r.answer_tokens < r.asked_tokens]
        if short:
            mean = sum(r.answer_tokens for r in short) / len(short)
            warnings.append(f"{len(short)} of {len(self.current)} answers came back short (mean {mean:.0f} of "
                            f"{short[0].asked_tokens} tokens): the server stopped at its end of text")
        records = sorted(self.current, key=lambda r: r.index)
        return level_from(load, records, self.plan.bounds, tuple(warnings), await self.metrics())

    # --- around the levels ------------------------------------------------------------------

    async def get_json(self, path: str, body: dict[str, Any] | None = None, seconds: float = 10.0) -> Any:
        """The JSON a GET (or a POST of ``body``) answers, None on any failure."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=seconds)
        try:
            call = self.session.post(self.plan.url + path, json=body, headers=self.headers, timeout=timeout) \
                if body is not None else self.session.get(self.plan.url + path, headers=self.headers, timeout=timeout)
            async with call as resp:
                return await resp.json(content_type=None) if resp.status < 400 else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    async def preflight(self) -> None:
        """Reach the server (one clear error when it cannot be reached) and read its models."""
        import aiohttp

        try:
            async with self.session.get(self.plan.url + "/v1/models", headers=self.headers,
                                        timeout=aiohttp.ClientTimeout(total=10)) as resp:
                if resp.status in (401, 403):
                    raise MeasurementError(f"{public_url(self.plan.url)} refuses the request (HTTP {resp.status}): "
                                           "give its API key with --api-key-env")
                listed = await resp.json(content_type=None) if resp.status < 400 else None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise MeasurementError(f"cannot reach {public_url(self.plan.url)}: {self._clean(_first_line(exc))}") \
                from None
        except ValueError:
            listed = None
        data = listed.get("data") if isinstance(listed, dict) else None
        self.models = tuple(str(m.get("id")) for m in data if isinstance(m, dict))[:64] if isinstance(data, list) \
            else ()
        if self.models and self.plan.model not in self.models:
            self.warnings.append(f"the server lists {', '.join(self.models[:5])}, not {self.plan.model!r}")

    async def warm_up(self) -> None:
        """The plan's warm-up requests; a server that refuses ``min_tokens``/``ignore_eos`` is
        asked again without them (and answers may then come back short)."""
        for _ in range(self.plan.warmup):
            if self.stopping:
                return
            record = await self.one(-1, self.body("Hello", 4), 2, time.perf_counter())
            if record.status == "error" and self.force and record.error.startswith("HTTP 4"):
                self.force = False
                again = await self.one(-1, self.body("Hello", 4), 2, time.perf_counter())
                if again.status == "ok":
                    self.warnings.append(f"the server refused {' and '.join(FORCE_FIELDS)} ({record.error}): "
                                         "answers are not forced to their length")
                    continue
                self.force = True
            if record.status != "ok":
                self.warnings.append(f"warm-up request failed: {record.error}")

    async def count_tokens(self, text: str) -> int | None:
        if self.stopping:
            return None
        for path in [self.tokenize_path] if self.tokenize_path else TOKENIZE_PATHS:
            body = {"model": self.plan.model, "content": text, "prompt": text, "input": text, "add_special": True}
            found = tokens_in(await self.get_json(path, body))
            if found is not None:
                self.tokenize_path = path
                return found
        return None

    async def usage_tokens(self, text: str) -> int | None:
        if self.stopping:
            return None
        path = "/v1/chat/completions" if self.chat else "/v1/completions"
        answer = await self.get_json(path, self.body(text, 1, stream=False), self.plan.request_timeout)
        usage = answer.get("usage") if isinstance(answer, dict) else None
        value = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return int(value) if isinstance(value, int) and value > 0 else None

    async def metrics(self) -> dict[str, float]:
        """Numeric samples of the server's Prometheus /metrics page (vLLM, llama-server with
        --metrics), the first ``METRICS_KEPT``; empty where there is none."""
        import aiohttp

        try:
            async with self.session.get(self.plan.url + "/metrics", headers=self.headers,
                                        timeout=aiohttp.ClientTimeout(total=3)) as resp:
                if resp.status >= 400:
                    return {}
                text = (await resp.content.read(1 << 20)).decode("utf-8", errors="replace")
        except (aiohttp.ClientError, TimeoutError):
            return {}
        return prometheus_samples(text, METRICS_KEPT)

    async def setup(self) -> None:
        """Reach the server, warm it up and learn how many words make a prompt's tokens."""
        await self.preflight()
        self.put(Progress(step="server", message="warming up", fraction=0.0))
        await self.warm_up()
        if self.stopping:
            return
        lengths = {int(p) for load in self.plan.loads for p in draw_requests(self.plan.serving_plan(), load)[0]}
        self.put(Progress(step="server", message="building prompts to their token counts", fraction=0.0))
        self.maker, notes = await calibrate(self.count_tokens, self.usage_tokens, lengths, self.chat)
        self.warnings += notes

    async def watch(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(POLL)
        self.stopping = True
        if self.wake is not None:
            self.wake.set()
        for task in list(self.inflight):
            task.cancel()
        if self.setup_task is not None:
            self.setup_task.cancel()

    async def main(self) -> ServerMeasurement:
        import aiohttp

        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.wake = asyncio.Event()
        watcher = asyncio.create_task(self.watch())
        connector = aiohttp.TCPConnector(limit=MAX_IN_FLIGHT)
        try:
            async with aiohttp.ClientSession(connector=connector) as session:
                self.session = session
                self.setup_task = asyncio.create_task(self.setup())
                try:
                    await self.setup_task
                except asyncio.CancelledError:
                    if not self.stopping:
                        raise
                self.setup_task = None
                for number, load in enumerate(self.plan.loads):
                    if self.stopping:
                        break
                    done = await self.level(number, load)
                    self.levels.append(done)
                    self.put(Progress(step="server", message=f"{load.mode} {load.level:g} done",
                                      fraction=min(1.0, self.done / max(self.total, 1)), sample=done))
        finally:
            watcher.cancel()
        return ServerMeasurement(plan=self.plan, levels=tuple(self.levels), started=started,
                                 prompt_method=self.maker.method, server_models=self.models,
                                 warnings=tuple(self.warnings), cancelled=self.stopping)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def measure_server(plan: ServerPlan, cancel: CancelFlag = None, *,
                   api_key: str | None = None) -> Generator[Progress, None, ServerMeasurement]:
    """The measurement as a job: yields progress (a finished level as its ``sample``), returns
    the ``ServerMeasurement``; with ``cancel`` set it stops within a second and returns what
    was measured (``cancelled``). ``api_key``: the key itself (the window's password field),
    sent in place of the plan's variable's. Raises MeasurementError when aiohttp is missing,
    the key's variable is unset or the server cannot be reached at all."""
    try:
        import aiohttp  # noqa: F401
    except ImportError as exc:
        raise MeasurementError("measuring a server needs aiohttp (pip install aiohttp)") from exc
    inbox: queue.Queue[Progress] = queue.Queue()
    stop = threading.Event()
    outcome: dict[str, Any] = {}

    def loop() -> None:
        try:
            outcome["result"] = asyncio.run(_Run(plan, inbox.put, stop, api_key).main())
        except BaseException as exc:      # handed to the job's thread, raised there
            outcome["error"] = exc

    thread = threading.Thread(target=loop, name="rooflab-server-measure", daemon=True)
    thread.start()
    try:
        while thread.is_alive() or not inbox.empty():
            if cancel is not None and cancel.is_set():
                stop.set()
            try:
                yield inbox.get(timeout=0.1)
            except queue.Empty:
                continue
    finally:
        stop.set()
        thread.join(timeout=10)
    if "error" in outcome:
        raise outcome["error"]
    result: ServerMeasurement = outcome["result"]
    return result


def measure_server_blocking(plan: ServerPlan, cancel: CancelFlag = None,
                            on_progress: Callable[[Progress], None] | None = None) -> ServerMeasurement:
    """``measure_server`` run to its end in this thread."""
    return run_job(measure_server(plan, cancel), on_progress)
