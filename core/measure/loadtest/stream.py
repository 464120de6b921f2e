"""Reading one streamed answer of an OpenAI-compatible server (server-sent events): which lines
carry a token, how many tokens the answer had, and what is wrong with a stream that is wrong.

A stream is ``data: {json}`` lines separated by blank lines and closed by ``data: [DONE]``.
Each chunk's ``choices[0]`` carries the text (``text`` on /v1/completions, ``delta.content``
on /v1/chat/completions) and, on the last one, a ``finish_reason``. A chunk with a choice and
no finish reason is one token step, even with empty text (llama.cpp holds back the bytes of a
character not yet complete); a chat chunk that only names the role is not. The final chunks may
add ``usage`` (``stream_options.include_usage``) and llama-server's ``timings``; the token
count is ``usage.completion_tokens`` when the server gives it, else the token steps seen.

Other SSE fields (``event:``, ``id:``, ``retry:``) and comments (``:``) are skipped, as the
SSE specification says; a ``data:`` line that is not JSON, or a chunk with an ``error``, ends
the answer as an error with one line saying so."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

SNIPPET = 80                 # characters of a bad line quoted in an error
KEEP_TIMINGS = 32            # numbers kept of a server's own per-request fields


class StreamError(Exception):
    """The stream broke the protocol; the message is the one line a user reads."""


def _snippet(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= SNIPPET else text[:SNIPPET] + "...")


@dataclass
class StreamState:
    """What one answer's stream said so far. ``token_times``: when each token step arrived
    (seconds on the caller's clock); ``finished``: a finish reason or ``[DONE]`` was seen."""

    chat: bool
    token_times: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    done: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    models: set[str] = field(default_factory=set)

    @property
    def finished(self) -> bool:
        return self.done or self.finish_reason is not None

    @property
    def answer_tokens(self) -> int:
        """Tokens of the answer: the server's count when it gave one, else the token steps."""
        reported = self.usage.get("completion_tokens")
        return reported if reported is not None else len(self.token_times)

    @property
    def counted_by(self) -> str:
        return "usage" if "completion_tokens" in self.usage else "stream"

    def feed(self, raw: bytes | str, now: float) -> None:
        """Take one line of the stream (with or without its newline), received at ``now``.
        Raises ``StreamError`` for a line that breaks the protocol."""
        line = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if not line or line.startswith(":"):
            return
        name, _, value = line.partition(":")
        if name != "data":
            return                                  # event:, id:, retry:, or a field SSE ignores
        payload = value[1:] if value.startswith(" ") else value
        if payload.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise StreamError(f"malformed event after {len(self.token_times)} tokens: {_snippet(line)} "
                              "is not JSON") from None
        if not isinstance(chunk, dict):
            raise StreamError(f"malformed event after {len(self.token_times)} tokens: {_snippet(line)}")
        self._chunk(chunk, now)

    def _chunk(self, chunk: dict[str, Any], now: float) -> None:
        if "error" in chunk:
            raise StreamError(f"the server reported an error after {len(self.token_times)} tokens: "
                              f"{error_message(chunk)}")
        if isinstance(chunk.get("model"), str):
            self.models.add(chunk["model"])
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = {k: int(v) for k, v in usage.items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)}
        timings = chunk.get("timings")
        if isinstance(timings, dict):
            self.timings = {str(k): float(v) for k, v in list(timings.items())[:KEEP_TIMINGS]
                            if isinstance(v, (int, float)) and not isinstance(v, bool)}
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return                                   # a usage-only chunk
        choice = choices[0]
        if not isinstance(choice, dict):
            raise StreamError(f"malformed event after {len(self.token_times)} tokens: choices[0] is not an object")
        reason = choice.get("finish_reason")
        if self._is_token(choice, reason):
            self.token_times.append(now)
        if isinstance(reason, str) and reason:
            self.finish_reason = reason

    def _is_token(self, choice: dict[str, Any], reason: Any) -> bool:
        if self.chat:
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                return False
            content = delta.get("content")
            if not isinstance(content, str):
                return False
            return bool(content) or ("role" not in delta and not reason)
        text = choice.get("text")
        return isinstance(text, str) and (bool(text) or not reason)


def error_message(body: Any, limit: int = 160) -> str:
    """The one line a server's error body says: ``error.message`` (OpenAI, vLLM, llama-server),
    ``detail`` (FastAPI) or ``message``, else the start of the text."""
    if isinstance(body, (bytes, str)):
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        try:
            body = json.loads(text)
        except ValueError:
            line = " ".join(text.split())
            return line[:limit] + ("..." if len(line) > limit else "") if line else "(empty body)"
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:limit]
        for key in ("error", "detail", "message"):
            if isinstance(body.get(key), str) and body[key]:
                return str(body[key])[:limit]
        if isinstance(body.get("detail"), list):
            return json.dumps(body["detail"])[:limit]
    return json.dumps(body)[:limit]


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*(?:\{.*\})?)\s+(\S+)(?:\s+-?\d+)?$")


def prometheus_samples(text: str, limit: int = 200) -> dict[str, float]:
    """The first ``limit`` finite samples of a Prometheus text page (``name{labels} value
    [timestamp]``); comments and lines that are not a sample are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        found = _SAMPLE.match(line.strip())
        if found is None:
            continue
        try:
            number = float(found.group(2))
        except ValueError:
            continue
        if math.isfinite(number):
            out[found.group(1)[:200]] = number
        if len(out) >= limit:
            break
    return out
