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
sent only in the Authorization header: it is in no record, no error line and no report.

The server is untrusted: each request goes through ``client.Client`` (bodies and streams read
with a cap, redirects not followed, every error one line, the key redacted), a prompt is built
when its request is sent, and a level ends at its deadline (``ServerPlan.time_bound`` is said
before the first request). A server that answers an HTML page, or a warm-up request with
nothing at all, ends the measurement with one line before the levels."""

from __future__ import annotations

import asyncio
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

from rooflab.core.errors import MeasurementError, RooflabError
from rooflab.core.jobs import CancelFlag, Progress, run_job
from rooflab.core.measure.loadtest.client import Client, client_errors, first_line
from rooflab.core.measure.loadtest.plan import (
    CALIBRATION_SECONDS,
    MAX_IN_FLIGHT,
    PREFLIGHT_SECONDS,
    RequestRecord,
    ServerLevel,
    ServerMeasurement,
    ServerPlan,
    level_from,
    public_url,
)
from rooflab.core.measure.loadtest.prompts import (
    TOKENIZE_PATHS,
    PromptMaker,
    calibrate_prompt_words,
    request_tag,
    tokens_in,
)
from rooflab.core.measure.loadtest.untrusted import Secrets, StreamError, reported_count
from rooflab.core.predict.serving import Load, draw_requests

POLL = 0.05                    # seconds between looks at the cancel token inside the loop
FORCE_FIELDS = ("min_tokens", "ignore_eos")


class _Run:
    """One measurement inside the event loop: the levels, what was sent and what came back."""

    def __init__(self, plan: ServerPlan, put: Callable[[Progress], None], stop: threading.Event,
                 api_key: str | None = None) -> None:
        self.plan, self.put, self.stop = plan, put, stop
        self.client = Client(plan, api_key)
        self.chat = self.client.chat
        self.warnings = self.client.warnings      # one list: the client's notes (the models listed) and the run's
        self.stopping = False
        self.inflight: set[asyncio.Task[RequestRecord]] = set()
        self.levels: list[ServerLevel] = []
        self.current: list[RequestRecord] = []
        self.maker = PromptMaker(method="", per_word=1.0, fixed=0.0)
        self.wake: asyncio.Event | None = None
        self.setup_task: asyncio.Task[None] | None = None
        self.total = sum(plan.serving_plan().count(load) for load in plan.loads)
        self.done = 0
        self.shown = 0.0
        self.run = int.from_bytes(os.urandom(4), "little")
        self.label, self.count = "", 0
        self.tokenize_path = ""
        self.calibration_ends = math.inf

    # --- one request ------------------------------------------------------------------------

    async def spawn(self, index: int, number: int, prompt: int, asked: int, t0: float) -> RequestRecord:
        """Request ``index`` of level ``number``: its prompt is built now, as it is sent, so no
        more prompts are held than requests are in flight."""
        text, counted = self.maker.prompt(request_tag(self.run, number, index), prompt)
        task = asyncio.create_task(self.client.one(index, text, asked, counted, t0))
        del text
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
        t0 = time.perf_counter()
        deadline = t0 + self.plan.level_seconds
        nxt = 0
        if arrivals is None:
            async def client() -> None:
                nonlocal nxt
                while not self.stopping and nxt < n and time.perf_counter() < deadline and not self.client.full:
                    i, nxt = nxt, nxt + 1
                    await self.spawn(i, number, int(prompts[i]), int(answers[i]), t0)

            await asyncio.gather(*(client() for _ in range(min(int(load.level), n))))
        else:
            tasks = []
            cap = min(MAX_IN_FLIGHT, self.plan.in_flight_cap)
            for i in range(n):
                # wait for the arrival, but never past the level's deadline (a rate of 1e-9/s
                # would otherwise wait for its second request for years)
                delay = min(t0 + float(arrivals[i]), deadline) - time.perf_counter()
                if delay > 0 and self.wake is not None:
                    try:
                        await asyncio.wait_for(self.wake.wait(), delay)
                    except TimeoutError:
                        pass
                if self.stopping or time.perf_counter() >= deadline or self.client.full:
                    break
                while len(self.inflight) >= cap and not self.stopping:
                    await asyncio.wait(set(self.inflight), return_when=asyncio.FIRST_COMPLETED)
                tasks.append(asyncio.create_task(self.spawn(i, number, int(prompts[i]), int(answers[i]), t0)))
                nxt = i + 1
            await asyncio.gather(*tasks)
        warnings = []
        if nxt < n and not self.stopping:
            why = self.client.full_line() if self.client.full else f"the level's {self.plan.level_seconds:g} s ran out"
            warnings.append(f"sent {nxt} of {n} requests: {why}")
        short = [r for r in self.current if r.status == "ok" and r.answer_tokens < r.asked_tokens]
        if short:
            mean = sum(r.answer_tokens for r in short) / len(short)
            warnings.append(f"{len(short)} of {len(self.current)} answers came back short (mean {mean:.0f} of "
                            f"{short[0].asked_tokens} tokens): the server stopped at its end of text")
        records = sorted(self.current, key=lambda r: r.index)
        return level_from(load, records, self.plan.bounds, tuple(warnings), await self.client.metrics())

    # --- around the levels ------------------------------------------------------------------

    async def warm_up(self) -> None:
        """The plan's warm-up requests; a server that refuses ``min_tokens``/``ignore_eos`` is
        asked again without them (and answers may then come back short). A warm-up answered
        with an HTML page, or not at all within the time-outs, ends the measurement."""
        for _ in range(self.plan.warmup):
            if self.stopping:
                return
            client = self.client
            record = await client.one(-1, "Hello", 4, 2, time.perf_counter())
            if record.status == "error" and client.force and record.error.startswith("HTTP 4") and not client.foreign:
                client.force = False
                again = await client.one(-1, "Hello", 4, 2, time.perf_counter())
                if again.status == "ok":
                    self.warnings.append(f"the server refused {' and '.join(FORCE_FIELDS)} ({record.error}): "
                                         "answers are not forced to their length")
                    continue
                self.client.force = True
            if self.client.foreign:
                raise MeasurementError(f"{self.client.where}: {self.client.foreign}")
            if record.status == "timeout":       # the whole request's time (--timeout), or a stall's
                option = "--timeout" if record.error.endswith(" in all") else "--stall-timeout"
                raise MeasurementError(f"{self.client.where}: the warm-up request {record.error}; nothing measured "
                                       f"(is the server busy, or {option} too short?)")
            if record.status != "ok":
                self.warnings.append(f"warm-up request failed: {record.error}")

    def _calibration_left(self) -> float:
        return self.calibration_ends - time.perf_counter()

    async def count_tokens(self, text: str) -> int | None:
        if self.stopping or self._calibration_left() <= 0:
            return None
        for path in [self.tokenize_path] if self.tokenize_path else TOKENIZE_PATHS:
            body = {"model": self.plan.model, "content": text, "prompt": text, "input": text, "add_special": True}
            found = tokens_in(await self.client.get_json(path, body, min(PREFLIGHT_SECONDS, self._calibration_left())))
            if found is not None:
                self.tokenize_path = path
                return found
        return None

    async def usage_tokens(self, text: str) -> int | None:
        if self.stopping or self._calibration_left() <= 0:
            return None
        path = "/v1/chat/completions" if self.chat else "/v1/completions"
        answer = await self.client.get_json(path, self.client.body(text, 1, stream=False),
                                     min(self.plan.request_timeout, self._calibration_left()))
        usage = answer.get("usage") if isinstance(answer, dict) else None
        value = reported_count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
        return value if value else None

    async def setup(self) -> None:
        """Reach the server, warm it up and learn how many words make a prompt's tokens."""
        await self.client.preflight()
        self.put(Progress(step="server", message="warming up", fraction=0.0))
        await self.warm_up()
        if self.stopping:
            return
        lengths = {int(p) for load in self.plan.loads for p in draw_requests(self.plan.serving_plan(), load)[0]}
        self.put(Progress(step="server", message="building prompts to their token counts", fraction=0.0))
        self.calibration_ends = time.perf_counter() + CALIBRATION_SECONDS
        self.maker, notes = await calibrate_prompt_words(self.count_tokens, self.usage_tokens, lengths, self.chat)
        if self._calibration_left() <= 0:
            notes.append(f"counting prompt tokens stopped after {CALIBRATION_SECONDS:g} s: lengths not counted by "
                         "then are made by the fitted tokens per word")
        self.warnings += [self.client.clean(note, 600) for note in notes]

    async def watch(self) -> None:
        while not self.stop.is_set():
            await asyncio.sleep(POLL)
        self.stopping = self.client.stopping = True
        if self.wake is not None:
            self.wake.set()
        for task in list(self.inflight):
            task.cancel()
        if self.setup_task is not None:
            self.setup_task.cancel()

    async def main(self) -> ServerMeasurement:
        import aiohttp

        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        bound = self.plan.time_bound()
        self.put(Progress(step="server", fraction=0.0,
                          message=f"measuring {self.client.where}: {len(self.plan.loads)} level"
                                  f"{'s' if len(self.plan.loads) != 1 else ''}, done within {_duration(bound)} "
                                  f"at most ({self.plan.level_seconds:g} s a level, requests of at most "
                                  f"{self.plan.request_timeout:g} s)"))
        self.wake = asyncio.Event()
        watcher = asyncio.create_task(self.watch())
        connector = aiohttp.TCPConnector(limit=MAX_IN_FLIGHT)
        try:
            async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:
                self.client.session = session
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
                    if self.client.full:
                        self.warnings.append(f"{len(self.plan.loads) - number} level(s) not measured: "
                                             f"{self.client.full_line()}")
                        break
                    done = await self.level(number, load)
                    self.levels.append(done)
                    self.put(Progress(step="server", message=f"{load.mode} {load.level:g} done",
                                      fraction=min(1.0, self.done / max(self.total, 1)), sample=done))
        finally:
            watcher.cancel()
        return ServerMeasurement(plan=self.plan, levels=tuple(self.levels), started=started,
                                 prompt_method=self.maker.method, server_models=self.client.models,
                                 warnings=tuple(self.warnings), cancelled=self.stopping)


def _duration(seconds: float) -> str:
    """``seconds`` as "1 h 02 min", "28 min 03 s" or "45 s"."""
    whole = int(math.ceil(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


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
        outside: tuple[type[BaseException], ...] = (StreamError, *client_errors())   # the client or the address
        try:
            outcome["result"] = asyncio.run(_Run(plan, inbox.put, stop, api_key).main())
        except outside as exc:
            if isinstance(exc, RooflabError):
                outcome["error"] = exc
            else:
                line = Secrets([api_key or ""]).clean(first_line(exc))
                outcome["error"] = MeasurementError(f"measuring {public_url(plan.url)} failed: {line}")
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
