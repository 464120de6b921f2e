"""A real HTTP file server on 127.0.0.1 for the remote-model tests: files from a folder, with
range requests or without, a Hub layout (``/OWNER/REPO/resolve/REV/FILE``, ``/api/models/...``)
and hostile answers chosen by path. It counts the body bytes it sends and keeps each
request's headers, so tests can say how much of a file was read and what was sent."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


@dataclass
class Served:
    """What a server did: its address, the bytes of body it sent, each request's (method,
    path, headers)."""

    root: Path
    ranges: bool = True
    url: str = ""
    bytes_sent: int = 0
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    token: str = ""             # paths with "/private-" answer 401 without "Bearer <token>"

    def sent(self, n: int) -> None:
        with self.lock:
            self.bytes_sent += n


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    served: Served

    def log_message(self, format: str, *args: object) -> None:    # quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _answer(self, *, body: bool) -> None:
        s = self.served
        path = unquote(urlsplit(self.path).path)
        with s.lock:
            s.requests.append((self.command, path, dict(self.headers.items())))
        if path.startswith("/loop/"):
            return self._status(302, {"Location": path})
        if "/private-" in path and self.headers.get("Authorization") != f"Bearer {s.token}":
            return self._status(401)
        if path.startswith("/endless/"):
            return self._endless(path, body)
        if path.startswith("/nohead/") and self.command == "HEAD":
            return self._status(405)
        hub = re.match(r"^/api/models/([^/]+/[^/]+)/revision/([^/]+)$", path)
        if hub:
            return self._listing(hub[1], hub[2])
        hub = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        file = s.root / (f"{hub[1]}/{hub[2]}/{hub[3]}" if hub else path.lstrip("/").split("/", 1)[-1])
        if ".." in path or not file.is_file():
            return self._status(404)
        size = file.stat().st_size
        etag = f'"{size:x}-{int(file.stat().st_mtime_ns):x}"'
        wanted = _RANGE.match(self.headers.get("Range") or "")
        if not (s.ranges and wanted) or self.command == "HEAD":
            return self._send(file, 0, size - 1, size, etag, 200, body)
        first, last = int(wanted[1]), min(int(wanted[2] or size - 1), size - 1)
        if path.startswith("/wrong-range/"):
            first, last = first + 1, last
        if path.startswith("/capped/"):                 # a CDN that sends at most 256 KiB a range
            last = min(last, first + (256 << 10) - 1)
        if path.startswith("/short/"):
            return self._short(file, first, last, size, etag)
        return self._send(file, first, last, size, etag, 206, body)

    def _status(self, code: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send(self, file: Path, first: int, last: int, size: int, etag: str, code: int, body: bool) -> None:
        self.send_response(code)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes" if self.served.ranges else "none")
        if code == 206:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        if not body:
            return
        with file.open("rb") as handle:
            handle.seek(first)
            left = last - first + 1
            try:
                while left:
                    chunk = handle.read(min(left, 1 << 16))
                    self.wfile.write(chunk)
                    self.served.sent(len(chunk))
                    left -= len(chunk)
            except OSError:             # the reader hung up (it refused a whole-file answer)
                return

    def _short(self, file: Path, first: int, last: int, size: int, etag: str) -> None:
        """A 206 that says it sends the range asked for, sends half of it and closes."""
        self.send_response(206)
        self.send_header("ETag", etag)
        self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        with file.open("rb") as handle:
            handle.seek(first)
            self.wfile.write(handle.read((last - first + 1) // 2))
        self.close_connection = True

    def _endless(self, path: str, body: bool) -> None:
        """An answer whose body never ends: a 206 with a proper Content-Range for range
        requests, a 200 with no length for whole files."""
        wanted = _RANGE.match(self.headers.get("Range") or "")
        if wanted:
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {wanted[1]}-{wanted[2]}/{10**12}")
        else:
            self.send_response(200)
        self.send_header("ETag", '"endless"')
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if not body:
            return
        # GGUF, version 3, an absurd key count: valid bytes a reader must stop reading
        chunk = b"{" + b" " * ((1 << 16) - 1) if path.endswith(".json") else b"\0" * (1 << 16)
        try:
            while True:
                self.wfile.write(chunk)
                self.served.sent(len(chunk))
        except OSError:
            return

    def _listing(self, repo: str, revision: str) -> None:
        folder = self.served.root / repo / revision
        if not folder.is_dir():
            return self._status(404)
        names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        data = json.dumps({"id": repo, "siblings": [{"rfilename": n} for n in names]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serve_files(root: Path, *, ranges: bool = True, token: str = "") -> Iterator[Served]:
    """Serve ``root`` on 127.0.0.1 (a free port) until the block ends."""
    served = Served(root=root, ranges=ranges, token=token)
    handler = type("Handler", (_Handler,), {"served": served})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def hub_file(root: Path, repo: str, file: str, revision: str = "main") -> Path:
    """Where a Hub file lives under a served root (``/REPO/resolve/REVISION/FILE``)."""
    path = root / repo / revision / file
    path.parent.mkdir(parents=True, exist_ok=True)
    return path

