"""llama.cpp in this process, through llama-cpp-python's low-level (ctypes) API: load a GGUF,
make contexts, decode batches of tokens, rewind the cache. ``timing.py`` times with it.

What this layer takes care of so the timing code need not:

- every handle (model, context, batch) is freed exactly once, in reverse order, whatever
  happens (``Engine`` is a context manager; ``open_handles`` counts what is still held);
- llama.cpp's log goes to a ring buffer instead of the terminal; its last warning and error
  lines become the text of a ``MeasurementError``;
- a cancel request stops a running ``llama_decode`` of a prompt within one graph node
  (llama.cpp's abort callback) and a model load within one tensor (its progress callback), not
  just between calls, so Cancel takes effect within a second even on a slow machine. Calls of
  fewer than ``ABORT_MIN_TOKENS`` tokens (a generation step, a batched decode step) run without
  the callback and are cancelled between calls: the callback is a call into Python at every
  graph node (several hundred a token), each of which waits for the interpreter's lock while
  the window's thread holds it, and llama-bench has none; such a call lasts one step.

No thread pool is attached: llama-bench attaches one (``ggml_threadpool_new`` and
``llama_attach_threadpool``), but llama-cpp-python 0.3.36 binds neither (its source marks
``llama_attach_threadpool`` as a TODO). Its wheels build ggml with OpenMP, where every graph
runs on OpenMP's own persistent threads whether or not a pool is attached, so the two time the
same thing; a build without OpenMP would start its threads at each decode here.

llama_cpp is imported only inside functions (``require_llama_cpp``)."""

from __future__ import annotations

import ctypes
import os
import re
import threading
from collections import deque
from types import ModuleType, TracebackType
from typing import Any

import numpy as np

from rooflab.core.errors import Cancelled, MeasurementError
from rooflab.core.jobs import CancelFlag, check_cancel
from rooflab.core.measure.machine.sysinfo import physical_cores
from rooflab.core.values.quant import type_by_name

LOG_LINES = 200                      # llama.cpp log lines kept for messages
ABORT_MIN_TOKENS = 32                # decode calls this long or longer can be aborted mid-call
_WARN, _ERROR, _CONT = 3, 4, 5       # ggml_log_level
_GPU_BACKENDS = ("CUDA", "Metal", "Vulkan", "ROCm", "HIP", "SYCL", "OpenCL", "CANN", "MUSA")
_FLASH = re.compile(r"Flash Attention (enabled|not supported)")

_live = 0                            # handles created and not yet freed, all engines together
_live_lock = threading.Lock()


def require_llama_cpp() -> ModuleType:
    """The ``llama_cpp`` module, or a MeasurementError saying how to install it."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise MeasurementError("llama.cpp measurements need llama-cpp-python: "
                               "pip install llama-cpp-python==0.3.36") from exc
    return llama_cpp


def open_handles() -> int:
    """Models, contexts and batches created here and not yet freed (0 when all is clean)."""
    return _live


def _count(delta: int) -> None:
    global _live
    with _live_lock:
        _live += delta


def engine_version(lib: ModuleType) -> str:
    """"0.3.36 (llama.cpp 0.5.0-dev)": the binding's version and the library's own."""
    core = lib.llama_version().decode(errors="replace") if hasattr(lib, "llama_version") else "unknown"
    return f"{lib.__version__} (llama.cpp {core})"


def system_info(lib: ModuleType) -> str:
    """llama.cpp's one-line description of the back ends and CPU features it was built with."""
    return str(lib.llama_print_system_info().decode(errors="replace")).strip()


def gpu_backend(lib: ModuleType) -> str | None:
    """The GPU back end this build offloads to ("cuda", "metal", ...), None for a CPU build."""
    if not lib.llama_supports_gpu_offload():
        return None
    info = system_info(lib)
    return next((name.lower() for name in _GPU_BACKENDS if name in info), "gpu")


def default_threads() -> int:
    """llama-bench's default thread count: the physical cores this process may run on (half the
    CPUs on a machine with two hardware threads a core)."""
    return physical_cores()


class LogTail:
    """llama.cpp's log, kept in memory instead of printed: one per process, since llama.cpp
    holds a single log callback. ``install`` (again) after anything else may have replaced it."""

    def __init__(self, lib: ModuleType) -> None:
        self.lines: deque[tuple[int, int, str]] = deque(maxlen=LOG_LINES)   # (number, level, text)
        self._count = 0
        self._level = 0
        self._callback = lib.llama_log_callback(self._on_log)   # kept: C holds only the pointer
        self._lib = lib

    def install(self) -> None:
        self._lib.llama_log_set(self._callback, None)

    def _on_log(self, level: int, text: bytes, _data: Any) -> None:
        if level != _CONT:
            self._level = level
        self._count += 1
        self.lines.append((self._count, self._level, text.decode("utf-8", errors="replace")))

    def mark(self) -> int:
        """A position in the log: ``problems(since=mark())`` reads only what comes after."""
        return self._count

    def problems(self, since: int = 0, last: int = 3) -> str:
        """The last warning and error lines after ``since``, joined into one line."""
        bad = [text.strip() for number, level, text in self.lines
               if number > since and level >= _WARN and text.strip()]
        return " | ".join(bad[-last:]) or "no reason given"

    def flash_attention(self) -> bool | None:
        """What llama.cpp resolved "auto" flash attention to, from its last report."""
        for _, _, text in reversed(self.lines):
            match = _FLASH.search(text)
            if match:
                return match.group(1) == "enabled"
        return None


_LOG: LogTail | None = None


def log_tail(lib: ModuleType) -> LogTail:
    """The process's ``LogTail``, installed as llama.cpp's log callback."""
    global _LOG
    if _LOG is None:
        _LOG = LogTail(lib)
    _LOG.install()
    return _LOG


class Engine:
    """One model with at most one context and one batch at a time, freed on ``close``.

    ``cancel`` is checked by llama.cpp itself (abort and load-progress callbacks) and by
    ``decode`` between calls."""

    def __init__(self, lib: ModuleType, cancel: CancelFlag = None) -> None:
        self.lib = lib
        self.cancel = cancel
        self.log = log_tail(lib)
        self.model: Any = None
        self.ctx: Any = None
        self.batch: Any = None
        self.capacity = 0
        self.n_vocab = 0
        self._abort = lib.ggml_abort_callback(self._should_abort)
        self._progress = lib.llama_progress_callback(self._load_progress)
        self._abort_on = False                          # the abort callback is attached to ctx
        self._arrays: dict[str, np.ndarray[Any, Any]] = {}
        self._seqs = np.zeros(0, dtype=np.int32)        # the sequence id each batch slot holds

    def _should_abort(self, _data: Any) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def _load_progress(self, _fraction: float, _data: Any) -> bool:
        return not self._should_abort(None)         # False makes llama.cpp stop loading

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- handles -------------------------------------------------------------------------
    def load(self, path: str, gpu_layers: int) -> None:
        """Load the GGUF at ``path`` (memory-mapped), ``gpu_layers`` layers offloaded."""
        params = self.lib.llama_model_default_params()
        params.n_gpu_layers = gpu_layers
        params.progress_callback = self._progress
        mark = self.log.mark()
        model = self.lib.llama_model_load_from_file(os.fsencode(path), params)
        if not model:
            check_cancel(self.cancel)
            raise MeasurementError(f"llama.cpp could not load {path}: {self.log.problems(mark)}")
        self.model = model
        _count(+1)
        self.n_vocab = int(self.lib.llama_vocab_n_tokens(self.lib.llama_model_get_vocab(model)))

    def new_context(self, *, n_ctx: int, n_seq_max: int, n_batch: int, n_ubatch: int, threads: int,
                    flash_attention: bool | None, type_k: str, type_v: str, capacity: int,
                    eval_callback: Any = None) -> None:
        """Replace the context (and batch) by a fresh one; ``capacity``: tokens a batch holds;
        ``eval_callback``: the scheduler's evaluation callback (``ops.NodeClock``), kept alive by
        the caller, None for none."""
        self.free_context()
        lib = self.lib
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_seq_max = n_ctx, n_seq_max
        params.n_batch, params.n_ubatch = n_batch, n_ubatch
        params.n_threads = params.n_threads_batch = threads
        params.flash_attn_type = {None: lib.LLAMA_FLASH_ATTN_TYPE_AUTO, True: lib.LLAMA_FLASH_ATTN_TYPE_ENABLED,
                                  False: lib.LLAMA_FLASH_ATTN_TYPE_DISABLED}[flash_attention]
        params.type_k, params.type_v = int(type_by_name(type_k)), int(type_by_name(type_v))
        params.kv_unified = False          # one cache stream per sequence, as llama-batched-bench
        params.swa_full = False            # sliding-window layers cache their window only, as llama-bench
        params.no_perf = True
        if eval_callback is not None:
            params.cb_eval, params.cb_eval_user_data = eval_callback, None
        mark = self.log.mark()
        ctx = lib.llama_init_from_model(self.model, params)
        if not ctx:
            raise MeasurementError(f"llama.cpp could not make a context of {n_ctx} tokens: {self.log.problems(mark)}")
        self.ctx = ctx
        _count(+1)
        self._abort_on = False
        self.batch = lib.llama_batch_init(capacity, 0, n_seq_max)
        _count(+1)
        self.capacity = capacity
        b = self.batch
        self._arrays = {
            "token": np.ctypeslib.as_array(b.token, shape=(capacity,)),
            "pos": np.ctypeslib.as_array(b.pos, shape=(capacity,)),
            "n_seq_id": np.ctypeslib.as_array(b.n_seq_id, shape=(capacity,)),
            "logits": np.ctypeslib.as_array(b.logits, shape=(capacity,)),
        }
        self._arrays["n_seq_id"][:] = 1
        for i in range(capacity):
            b.seq_id[i][0] = 0
        self._seqs = np.zeros(capacity, dtype=np.int32)

    def free_context(self) -> None:
        if self.batch is not None:
            self.lib.llama_batch_free(self.batch)
            self.batch = None
            _count(-1)
        if self.ctx is not None:
            self.lib.llama_free(self.ctx)
            self.ctx = None
            _count(-1)

    def close(self) -> None:
        """Free batch, context and model (each once; safe to call again)."""
        try:
            self.free_context()
        finally:
            if self.model is not None:
                self.lib.llama_model_free(self.model)
                self.model = None
                _count(-1)

    # -- work ----------------------------------------------------------------------------
    def clear(self) -> None:
        """Empty the cache (every sequence)."""
        self.lib.llama_memory_clear(self.lib.llama_get_memory(self.ctx), True)

    def remove(self, seq: int, start: int) -> bool:
        """Drop sequence ``seq``'s cached positions from ``start`` on; False if llama.cpp cannot."""
        return bool(self.lib.llama_memory_seq_rm(self.lib.llama_get_memory(self.ctx), seq, start, -1))

    def last_position(self, seq: int) -> int:
        """The highest position sequence ``seq`` holds in the cache, -1 when it is empty."""
        return int(self.lib.llama_memory_seq_pos_max(self.lib.llama_get_memory(self.ctx), seq))

    def copy(self, src: int, dst: int) -> None:
        """Give sequence ``dst`` the cache of ``src`` (applied at the next decode)."""
        self.lib.llama_memory_seq_cp(self.lib.llama_get_memory(self.ctx), src, dst, -1, -1)

    def save_state(self, seq: int = 0) -> Any:
        """Sequence ``seq``'s cache as llama.cpp serialises it (``llama_state_seq_get_data``)."""
        size = int(self.lib.llama_state_seq_get_size(self.ctx, seq))
        buffer = (ctypes.c_uint8 * max(size, 1))()
        self.lib.llama_state_seq_get_data(self.ctx, buffer, size, seq)
        return buffer

    def load_state(self, buffer: Any, seq: int = 0) -> bool:
        """Restore a ``save_state`` into sequence ``seq``; False when this context cannot take it."""
        return int(self.lib.llama_state_seq_set_data(self.ctx, buffer, len(buffer), seq)) != 0

    def synchronize(self) -> None:
        """Wait for every submitted computation to finish (``llama_synchronize``)."""
        self.lib.llama_synchronize(self.ctx)

    def decode(self, tokens: np.ndarray[Any, Any], positions: np.ndarray[Any, Any],
               seqs: np.ndarray[Any, Any] | list[int] | None = None, *, logits_last: bool = True, logits_all:
               bool = False, wait: bool = True) -> None:
        """One llama_decode of ``len(tokens)`` tokens (at most ``capacity``), waited for unless
        ``wait`` is False (llama-bench submits a prompt's batches and synchronises once).

        ``seqs``: the sequence of each token (None: all sequence 0). Logits are asked for the
        last token only, or every token (``logits_all``: one per sequence in a batched step)."""
        n = len(tokens)
        arrays = self._arrays
        arrays["token"][:n] = tokens
        arrays["pos"][:n] = positions
        arrays["logits"][:n] = 1 if logits_all else 0
        if logits_last and not logits_all:
            arrays["logits"][n - 1] = 1
        self._set_seqs(np.zeros(n, dtype=np.int32) if seqs is None else np.asarray(seqs, dtype=np.int32))
        self.batch.n_tokens = n
        self._abortable(n >= ABORT_MIN_TOKENS)
        mark = self.log.mark()
        rc = self.lib.llama_decode(self.ctx, self.batch)
        if wait or rc != 0:
            self.lib.llama_synchronize(self.ctx)
        if rc == 0:
            return
        if rc == 2 and self._should_abort(None):
            raise Cancelled("measurement cancelled")
        what = {1: "no room in the KV cache", 2: "aborted", -1: "invalid batch"}.get(rc, f"error {rc}")
        raise MeasurementError(f"llama_decode failed ({what}) for {n} tokens: {self.log.problems(mark)}")

    def _abortable(self, on: bool) -> None:
        """Attach llama.cpp's abort callback for a long call, detach it for a short one."""
        if on != self._abort_on:
            self.lib.llama_set_abort_callback(self.ctx, self._abort if on else self.lib.ggml_abort_callback(0), None)
            self._abort_on = on

    def _set_seqs(self, seqs: np.ndarray[Any, Any]) -> None:
        """Write sequence ids only where they change: each is a write through a C pointer
        (``seq_id[i][0]``), slow in Python, and most calls change none."""
        for i in np.flatnonzero(self._seqs[:len(seqs)] != seqs):
            self.batch.seq_id[int(i)][0] = int(seqs[i])
        self._seqs[:len(seqs)] = seqs
