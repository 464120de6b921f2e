"""Files on a web server, read a header at a time: the first bytes of a GGUF or safetensors
file by HTTP range requests (never the whole file), and small files (config.json) whole under
a size cap. Only the standard library's urllib: no huggingface_hub.

Every answer is checked before it is used: a range request must come back as 206 with the
Content-Range asked for and exactly that many bytes (a server that ignores ranges and would
send the whole file is refused in one line, before its body is read); a small file stops at
its cap; redirects stop after ``MAX_REDIRECTS``; each request has a timeout and a deadline.
A token (``HF_TOKEN``) is sent only to the host it was given for, never follows a redirect
to another host, and is never written anywhere.

What was read is kept in the cache folder (``files.paths.cache_dir``), one file per URL, with
the server's ETag: a second look checks the ETag with one HEAD request and reuses the bytes,
and works offline (or with ``HF_HUB_OFFLINE=1``) from them alone."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit

from rooflab.core.errors import ModelFileError
from rooflab.core.files.atomic import write_atomic
from rooflab.core.files.paths import cache_dir
from rooflab.core.io.gguf_header import HeaderIncomplete
from rooflab.core.jobs import CancelFlag, Progress, check_cancel

T = TypeVar("T")

TIMEOUT_S = 20.0                # one connect or read
DEADLINE_S = 300.0              # one whole request
MAX_REDIRECTS = 5
FIRST_READ = 1 << 20            # bytes asked for first; a GGUF header is usually 1-10 MB
MAX_HEAD_BYTES = 64 << 20       # the most of one file read for its header
MAX_SMALL_FILE = 16 << 20       # config.json, model.safetensors.index.json
MAX_READS = 64                  # range requests for one header
_CHUNK = 1 << 16
_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)$")
USER_AGENT = "rooflab (header reader; https range requests)"


def offline() -> bool:
    """huggingface_hub's switch: no network at all, the cache only."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class Head:
    """The first bytes of a remote file, its size in bytes and the server's ETag."""

    data: bytes
    file_bytes: int
    etag: str


class Remote:
    """Requests for one model: ``name`` starts every error line (the hf: name or URL the user
    typed); ``token`` goes as a Bearer header to ``token_host`` only."""

    def __init__(self, name: str, *, token: str = "", token_host: str = "") -> None:
        self.name = name
        self._token = token
        self._token_host = token_host
        self._opener = urllib.request.build_opener(_Redirects(token, token_host))
        self.bytes_read = 0         # body bytes received, for the progress line

    def fail(self, reason: str) -> ModelFileError:
        return ModelFileError(self.name, reason)

    def _request(self, url: str, method: str = "GET", headers: dict[str, str] | None = None) -> Any:
        request = urllib.request.Request(url, method=method, headers={
            "User-Agent": USER_AGENT, "Accept-Encoding": "identity", **(headers or {})})
        if self._token and urlsplit(url).netloc == self._token_host:
            request.add_unredirected_header("Authorization", f"Bearer {self._token}")
        try:
            return self._opener.open(request, timeout=TIMEOUT_S)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise (NotFound if exc.code == 404 else ModelFileError)(self.name, _status_words(exc.code, url)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            raise Unreachable(self.name, _reason(exc, url)) from None

    def head(self, url: str) -> tuple[str, int]:
        """(ETag, size in bytes or -1) of the file at ``url``, from a HEAD request."""
        with self._request(url, "HEAD") as response:
            size = response.headers.get("Content-Length")
            return response.headers.get("ETag") or "", int(size) if size and size.isdigit() else -1

    def read_range(self, url: str, start: int, end: int) -> Head:
        """Bytes ``start`` to ``end`` (inclusive, or to the end of a shorter file) of ``url``."""
        with self._request(url, headers={"Range": f"bytes={start}-{end}"}) as response:
            if response.status == 200:
                length = response.headers.get("Content-Length") or ""
                whole = f"{int(length):,} bytes" if length.isdigit() else "of unstated size"
                raise self.fail(f"the server at {urlsplit(url).netloc} does not answer range requests (it "
                                f"would send the whole file, {whole}); download the file and open it "
                                "from disk")
            found = _RANGE.match(response.headers.get("Content-Range") or "")
            if response.status != 206 or found is None:
                raise self.fail(f"the server answered {response.status} with Content-Range "
                                f"{_quoted(response.headers.get('Content-Range'))} to a range request")
            first, last, total = (int(g) for g in found.groups())
            # fewer bytes than asked for is allowed (some servers cap a range's length): the
            # reader asks again from where the answer ended
            if first != start or last > min(end, total - 1) or last < first:
                raise self.fail(f"the server sent bytes {first}-{last} of {total} when asked for {start}-{end}")
            data = self._body(response, last - first + 1, exact=True)
            return Head(data=data, file_bytes=total, etag=response.headers.get("ETag") or "")

    def read_small(self, url: str, cap: int = MAX_SMALL_FILE) -> Head:
        """The whole of a small file (a config.json), refused past ``cap`` bytes."""
        with self._request(url) as response:
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > cap:
                raise self.fail(f"{_file_name(url)} is {int(length):,} bytes, more than the {cap:,} read at most")
            data = self._body(response, cap, exact=False)
            return Head(data=data, file_bytes=len(data), etag=response.headers.get("ETag") or "")

    def _body(self, response: IO[bytes], limit: int, *, exact: bool) -> bytes:
        """Up to ``limit`` bytes of a body (exactly ``limit`` when ``exact``), within the deadline;
        a body that goes past ``limit`` is cut there and, unless ``exact``, refused."""
        chunks: list[bytes] = []
        got = 0
        deadline = time.monotonic() + DEADLINE_S
        try:
            while got < limit + (0 if exact else 1):
                chunk = response.read(min(_CHUNK, limit + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
                self.bytes_read += len(chunk)
                if time.monotonic() > deadline:
                    raise Unreachable(self.name, f"the server took over {DEADLINE_S:.0f} s to send {limit:,} bytes")
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(self.name, f"the connection broke after {got:,} bytes ({_reason(exc, '')})") from None
        data = b"".join(chunks)
        if exact and len(data) != limit:
            raise self.fail(f"the server sent {len(data):,} bytes for a range of {limit:,}")
        if not exact and len(data) > limit:
            raise self.fail(f"the file is more than the {limit:,} bytes read at most")
        return data


class Unreachable(ModelFileError):
    """The server could not be reached (offline, refused, timed out): a cached copy may serve."""


class NotFound(ModelFileError):
    """The server has no such file (404): a reader may try another name."""


class _Redirects(urllib.request.HTTPRedirectHandler):
    """At most ``MAX_REDIRECTS`` hops; the token rides along only while the host stays its own."""

    max_redirections = MAX_REDIRECTS
    max_repeats = 1

    def __init__(self, token: str, host: str) -> None:
        self._token = token
        self._host = host

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and self._token and urlsplit(newurl).netloc == self._host:
            new.add_unredirected_header("Authorization", f"Bearer {self._token}")
        return new


def _status_words(code: int, url: str) -> str:
    name = _file_name(url)
    if code in (401, 403):
        return (f"{name}: access denied ({code}); a gated or private repository needs HF_TOKEN set to a "
                "token that may read it")
    if code == 404:
        return f"{name}: not found (404)"
    if 300 <= code < 400:
        return f"{name}: too many redirects (or a redirect loop; {code})"
    return f"{name}: the server answered {code}"


def _reason(exc: BaseException, url: str) -> str:
    host = urlsplit(url).netloc if url else ""
    inner = getattr(exc, "reason", exc)
    if isinstance(inner, (socket.timeout, TimeoutError)):
        words = f"no answer within {TIMEOUT_S:.0f} s"
    elif isinstance(inner, OSError) and inner.strerror:
        words = inner.strerror
    else:
        words = str(inner)[:200] or type(inner).__name__
    return f"cannot reach {host} ({words}); offline?" if host else words


def _quoted(value: str | None) -> str:
    return "none" if value is None else repr(value[:80])


def _file_name(url: str) -> str:
    return urlsplit(url).path.rsplit("/", 1)[-1] or url


# -- the cache ----------------------------------------------------------------------------------

def _cache_paths(url: str) -> tuple[str, str]:
    key = hashlib.sha256(url.encode()).hexdigest()[:40]
    folder = os.path.join(cache_dir(), "remote")
    return os.path.join(folder, key + ".json"), os.path.join(folder, key + ".bin")


def cached(url: str) -> Head | None:
    """What was read of ``url`` before (None when nothing, or the cache is unreadable)."""
    meta_path, data_path = _cache_paths(url)
    try:
        with open(meta_path, encoding="utf-8") as handle:
            meta = json.load(handle)
        with open(data_path, "rb") as handle:
            data = handle.read(MAX_HEAD_BYTES + 1)
        if len(data) != meta["bytes"] or len(data) > MAX_HEAD_BYTES:
            return None
        return Head(data=data, file_bytes=int(meta["file_bytes"]), etag=str(meta["etag"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keep(url: str, head: Head) -> None:
    """Cache what was read of ``url`` (only with an ETag to check it by); a cache that cannot be
    written is skipped, never an error. The URL itself is stored only as a hash."""
    if not head.etag:
        return
    meta_path, data_path = _cache_paths(url)
    try:
        write_atomic(data_path, head.data)
        write_atomic(meta_path, json.dumps({"etag": head.etag, "file_bytes": head.file_bytes,
                                            "bytes": len(head.data)}))
    except (OSError, ModelFileError):
        pass


def _reusable(remote: Remote, url: str) -> Head | None:
    """The cached bytes of ``url`` when its ETag still matches (or the server is out of reach)."""
    old = cached(url)
    if old is None:
        return None
    if offline():
        return old
    try:
        etag, _ = remote.head(url)
    except Unreachable:
        return old
    except ModelFileError:          # a server that refuses HEAD (405, ...): read the file again
        return None
    return old if etag == old.etag else None


# -- reading a header ---------------------------------------------------------------------------

def read_head(remote: Remote, url: str, parse: Callable[[bytes, int], T], *, what: str,
              cancel: CancelFlag = None) -> Generator[Progress, None, T]:
    """``parse(first_bytes, file_bytes)`` of the file at ``url``: the first MB by a range
    request, then more, growing, while ``parse`` raises ``HeaderIncomplete``; the bytes read
    are cached. A job: a Progress per request."""
    head = _reusable(remote, url)
    if head is not None:
        try:
            return parse(head.data, head.file_bytes)
        except HeaderIncomplete:
            pass                                    # a cache from a shorter read: read again
    if offline():
        raise remote.fail(f"{_file_name(url)} is not in the cache and HF_HUB_OFFLINE is set")
    yield Progress(step="open", message=f"Reading the header of {_file_name(url)}…")
    head = remote.read_range(url, 0, FIRST_READ - 1)
    for _ in range(MAX_READS):
        try:
            result = parse(head.data, head.file_bytes)
        except HeaderIncomplete as more:
            want = min(max(more.needed, 2 * len(head.data)), head.file_bytes)
            if want > MAX_HEAD_BYTES:
                raise remote.fail(f"{what} header is more than {MAX_HEAD_BYTES >> 20} MB") from None
            want = max(want, len(head.data) + 1)
            check_cancel(cancel)
            yield Progress(step="open", message=f"Reading the header of {_file_name(url)}: "
                                                f"{len(head.data) / 1e6:,.1f} MB of {head.file_bytes / 1e9:,.2f} GB…")
            rest = remote.read_range(url, len(head.data), want - 1)
            if rest.etag != head.etag or rest.file_bytes != head.file_bytes:
                raise remote.fail(f"{_file_name(url)} changed on the server while it was read") from None
            head = Head(data=head.data + rest.data, file_bytes=head.file_bytes, etag=head.etag)
            continue
        keep(url, head)
        return result
    raise remote.fail(f"{_file_name(url)}: the header was not whole after {MAX_READS} range requests")


def read_small_file(remote: Remote, url: str, cancel: CancelFlag = None) -> Generator[Progress, None, bytes]:
    """A small file (config.json) whole, from the cache when its ETag still matches."""
    head = _reusable(remote, url)
    if head is not None:
        return head.data
    if offline():
        raise remote.fail(f"{_file_name(url)} is not in the cache and HF_HUB_OFFLINE is set")
    check_cancel(cancel)
    yield Progress(step="open", message=f"Reading {_file_name(url)}…")
    head = remote.read_small(url)
    keep(url, head)
    return head.data
