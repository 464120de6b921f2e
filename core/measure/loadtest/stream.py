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
the answer as an error with one line saying so.

Nothing a chunk says is trusted: JSON is read by the bounded reader (no NaN, Infinity or
400-digit numbers), counts and timings are kept only in range (``untrusted.reported_count``,
``figure``) and only under the names rooflab knows (a server's own names could hold anything,
the API key included), and text is passed on to be made printable and redacted."""

from __future__ import annotations

import json
import math
import re
from array import array
from dataclasses import dataclass, field
from typing import Any

from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.io.textfile import printable
from rooflab.core.measure.loadtest.untrusted import StreamError, figure, reported_count

SNIPPET = 80                 # characters of a bad line quoted in an error (more when it holds the key)
USAGE = ("prompt_tokens", "completion_tokens", "total_tokens")
#: llama-server's per-request timings (``timings``), the only ones kept
TIMINGS = ("cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
           "predicted_ms", "predicted_per_token_ms", "predicted_per_second", "draft_n", "draft_n_accepted")

__all__ = ["StreamError", "StreamState", "error_message", "prometheus_samples"]


def _snippet(text: str) -> str:
    # the line is cut after the key is redacted (``Secrets.clean``): cut here, a key's first
    # characters could be left standing; a long line is cut there, with the rest of the message
    text = text.strip()
    return repr(text if len(text) <= 4 * SNIPPET else text[:4 * SNIPPET] + "...")


@dataclass
class StreamState:
    """What one answer's stream said so far. ``token_times``: when each token step arrived
    (seconds on the caller's clock); ``finished``: a finish reason or ``[DONE]`` was seen."""

    chat: bool
    token_times: array[float] = field(default_factory=lambda: array("d"))    # 8 bytes a token, not a list's 32
    finish_reason: str | None = None
    done: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

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
            chunk = parse_json(payload)
        except JsonError as exc:
            if "not valid JSON" in str(exc):
                raise StreamError(f"malformed event after {len(self.token_times)} tokens: {_snippet(line)} "
                                  "is not JSON") from None
            raise StreamError(f"malformed event after {len(self.token_times)} tokens: it {exc}: "
                              f"{_snippet(line)}") from None
        if not isinstance(chunk, dict):
            raise StreamError(f"malformed event after {len(self.token_times)} tokens: {_snippet(line)}")
        self._chunk(chunk, now)

    def _chunk(self, chunk: dict[str, Any], now: float) -> None:
        if "error" in chunk:
            raise StreamError(f"the server reported an error after {len(self.token_times)} tokens: "
                              f"{error_message(chunk)}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = {k: n for k in USAGE if (n := reported_count(usage.get(k))) is not None}
        timings = chunk.get("timings")
        if isinstance(timings, dict):
            self.timings = {k: x for k in TIMINGS if (x := figure(timings.get(k))) is not None}
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


def error_message(body: Any, limit: int = 4096) -> str:
    """The one line a server's error body says: ``error.message`` (OpenAI, vLLM, llama-server),
    ``detail`` (FastAPI) or ``message``, else the start of the text; printable, at most
    ``limit`` characters (the caller redacts the key and cuts the line it shows)."""
    if isinstance(body, (bytes, str)):
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        try:
            body = parse_json(text)
        except JsonError:
            return printable(" ".join(text.split()), limit) or "(empty body)"
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return printable(err["message"], limit)
        for key in ("error", "detail", "message"):
            if isinstance(body.get(key), str) and body[key]:
                return printable(body[key], limit)
        if isinstance(body.get("detail"), list):
            return printable(json.dumps(body["detail"])[:limit], limit)
    return printable(json.dumps(body)[:limit], limit)


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
            out[printable(found.group(1), 4096)] = number   # cut where the key is redacted
        if len(out) >= limit:
            break
    return out
