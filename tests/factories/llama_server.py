"""llama-cpp-python's OpenAI-compatible server (the binding's ``[server]`` extra) on 127.0.0.1,
in a process of its own, for the tests and ``benchmarks/accuracy/bench_serving.py``.

It runs one request at a time (a lock around the model); ``--interrupt_requests False`` makes a
new request wait instead of cutting the one streaming. Its streamed chunks are not tokens when a
token's text is not whole UTF-8 (a random model's byte tokens), it reports no usage while
streaming, and given both ``min_tokens`` and ``logit_bias`` it applies neither (0.3.36's
``LogitsProcessorList.extend`` returns None). ``ORDINARY_ONLY`` biases the control and byte
tokens of rooflab's generated vocabulary away (end of text among them): every answer is then its
full length in ordinary tokens, one chunk each."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.factories.fake_openai import free_port

# <unk>, <s>, </s>, <|endoftext|>, then <0x00> .. <0xFF>, then ordinary tokens (core.io.gguf_write)
ORDINARY_ONLY = {"logit_bias": {str(token): -100.0 for token in range(4 + 256)}}
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


@contextlib.contextmanager
def llama_server(model: Path, log: Path, *, threads: int = 1, n_batch: int = 512, n_ctx: int = 2048,
                 alias: str = "tiny", start_seconds: float = 60.0) -> Iterator[str]:
    """The server's URL while it runs (a RuntimeError with its log's tail when it does not start);
    stopped (terminate, then kill) on leaving."""
    port = free_port()
    args = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--n_threads_batch",
            str(threads), "--n_batch", str(n_batch), "--n_ubatch", str(n_batch), "--flash_attn", "False",
            "--interrupt_requests", "False", "--model_alias", alias]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + start_seconds
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not answer within {start_seconds:g} s") from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
