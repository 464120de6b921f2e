"""What a server sends, taken as untrusted: bodies read with a byte cap, a stream split into lines
with a cap on a line and on the whole answer (never read whole, never one aiohttp ``readline``,
whose 512 KiB limit raises an error that is no ValueError), numbers checked for range before
they are used or kept, text made printable and cleared of the API key before it is shown or
kept, and the key itself checked before it goes into a header.

A server is a program rooflab does not control: a body of 10 GB, an ``Infinity`` token count, a
model id holding an escape sequence or the key it was sent, a line without end, a byte a second
are all things one can send, and each must end as one line of a measurement, never as a
traceback, an unbounded allocation or a key on the terminal."""

from __future__ import annotations

import asyncio
import base64
import json
import math
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from rooflab.core.errors import MeasurementError
from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.io.textfile import printable

MAX_LINE = 1 << 20             # bytes of one event line (a chunk is hundreds; logprobs a few KiB)
MAX_BODY = 4 << 20             # bytes of a JSON answer (/v1/models, /tokenize, a one-token request)
ERROR_BODY = 4096              # bytes of an error body read for its message
MAX_COUNT = 1 << 30            # a token count a server reports, at most (any larger is not believed)
MAX_FIGURE = 1e12              # a timing a server reports (ms, tokens/s), at most
LINE_CHARS = 240               # characters of server text in one shown line
MAX_KEY = 8192                 # characters of an API key


class StreamError(Exception):
    """The server broke the protocol; the message is the one line a user reads (made safe by
    ``Secrets.clean`` before it is shown or kept). ``foreign``: the answer is not an
    OpenAI-compatible server's at all (an HTML page)."""

    def __init__(self, message: str, *, foreign: bool = False) -> None:
        super().__init__(message)
        self.foreign = foreign


class Stalled(Exception):
    """No complete line arrived for the stall time (a server that drips a byte at a time)."""


def reported_count(value: Any) -> int | None:
    """A count a server reports (tokens), when it is a whole number in [0, ``MAX_COUNT``]: not
    a bool, not NaN or Infinity, not negative, not 10^300."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
        return None
    return int(value) if 0 <= value <= MAX_COUNT else None


def figure(value: Any) -> float | None:
    """A figure a server reports (milliseconds, tokens/s), when finite and in [0, ``MAX_FIGURE``]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int) and abs(value) > MAX_FIGURE:
        return None                                  # float() of a 400-digit integer overflows
    number = float(value)
    return number if math.isfinite(number) and 0.0 <= number <= MAX_FIGURE else None


def header_key(secret: str, where: str) -> str:
    """``secret`` as it may go into an Authorization header: printable ASCII without spaces (a
    CR/LF would inject a header), at most ``MAX_KEY`` characters. MeasurementError naming
    ``where`` (never the key) otherwise."""
    if len(secret) > MAX_KEY:
        raise MeasurementError(f"the API key in {where} is over {MAX_KEY:,} characters")
    if not all(0x20 < ord(c) < 0x7F for c in secret):
        raise MeasurementError(f"the API key in {where} holds a line break, space, control or non-ASCII "
                               "character: a header cannot carry it")
    return secret


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """(``url`` without user and password, the (user, password) it held or None)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, (unquote(parts.username or ""), unquote(parts.password or ""))


def basic_header(user: str, password: str) -> str:
    """The Basic Authorization header of a user and password given in the address."""
    if ":" in user:
        raise MeasurementError("the user name in the server address holds a ':'")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


class Secrets:
    """The strings that must never be shown or kept (the key, a password, the header made of
    them), in each spelling text may carry them: as sent, JSON-escaped, repr-escaped."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        spellings = set()
        for secret in secrets:
            if secret:
                spellings |= {secret, json.dumps(secret)[1:-1], repr(secret)[1:-1]}
        self.spellings = sorted(spellings, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self.spellings:
            text = text.replace(secret, "***")
        return text

    def clean(self, text: Any, limit: int = LINE_CHARS) -> str:
        """``text`` as one line that may be shown and kept: the key replaced by ``***`` before
        and after control characters go (so none hides it), then cut to ``limit`` characters."""
        line = self.redact(printable(self.redact(str(text)[:1 << 16]), 1 << 16))
        return line if len(line) <= limit else line[: limit - 3] + "..."


async def read_body(content: Any, cap: int, *, cut: bool = False) -> bytes:
    """At most ``cap`` bytes of a response body (``content``: aiohttp's ``resp.content``);
    StreamError when there is more, or (``cut``) its first ``cap`` bytes."""
    data = bytearray()
    while True:
        chunk = await content.read(min(1 << 16, cap + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > cap:
            if cut:
                return bytes(data[:cap])
            raise StreamError(f"an answer of over {cap:,} bytes")


async def read_reported_json(content: Any, cap: int = MAX_BODY) -> Any:
    """The JSON of a body of at most ``cap`` bytes, by the bounded reader (no NaN, no
    Infinity, no 400-digit number, no nesting past its limit); None when it is not JSON."""
    try:
        return parse_json(await read_body(content, cap))
    except JsonError:
        return None


async def read_lines(content: Any, on_line: Callable[[bytes], bool], *, stall: float, max_bytes: int) -> None:
    """Hand each line of a stream to ``on_line`` (which returns True to stop reading) as it
    completes. Raises ``Stalled`` when no line completes for ``stall`` seconds, StreamError for
    a line over ``MAX_LINE`` bytes or a stream over ``max_bytes``; the request's own time-out
    (a TimeoutError of ``content``) passes through as it is."""
    loop = asyncio.get_running_loop()
    buf = bytearray()
    total, last = 0, loop.time()
    while True:
        wait = stall - (loop.time() - last)
        if wait <= 0:
            raise Stalled
        try:
            async with asyncio.timeout(wait) as window:     # not wait_for: before 3.12 it can lose a cancel
                chunk = await content.readany()
        except TimeoutError:
            if window.expired():
                raise Stalled from None
            raise                                 # the request's whole time (aiohttp's total), not a stall
        if not chunk:
            break
        total += len(chunk)
        if total > max_bytes:
            raise StreamError(f"the stream went past {max_bytes:,} bytes")
        start = len(buf)
        buf += chunk
        pos, end = 0, buf.find(b"\n", start)
        while end >= 0:
            if on_line(bytes(buf[pos:end])):
                return
            pos, end = end + 1, buf.find(b"\n", end + 1)
        if pos:
            del buf[:pos]
            last = loop.time()
        if len(buf) > MAX_LINE:
            raise StreamError(f"an event line of over {MAX_LINE:,} bytes")
    if buf:
        on_line(bytes(buf))
