"""The timed passes themselves: prefill with logits at the last position, decode steps on a
transformers cache, batched steps with the cache rewound, and the per-pass overhead probe.

Works with the cache API of transformers 4.46 to 5.x: the cache argument is ``cache`` or
``past_key_values`` (whichever ``forward`` names), rewinding uses ``crop(-n)`` and falls back
to a fresh copy where a layer cannot crop (a full sliding window). Every pass is timed with the
device synchronised before and after."""

from __future__ import annotations

import copy
import inspect
import time
from typing import Any

from rooflab.core.errors import Cancelled, SpecError
from rooflab.core.io.hf_build import tiny_config
from rooflab.core.io.hf_tables import normalise
from rooflab.core.jobs import CancelFlag, check_cancel, run_job
from rooflab.core.measure.engines.torch import backend
from rooflab.core.measure.engines.torch.models import ModelSource, transformers_config


def _layer_count(model: Any) -> int | None:
    """The decoder depth the model's config gives, read by the config reader (None if it
    cannot read it)."""
    try:
        return normalise(model.config.to_dict()).layers
    except SpecError:
        return None


def _decoder_layers(model: Any, count: int | None) -> list[Any]:
    """The decoder blocks: the longest ModuleList of ``count`` modules (any, if none is)."""
    torch = backend.require_torch()
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    matching = [m for m in lists if count is None or len(m) == count]
    chosen = max(matching or lists, key=len, default=None)
    return list(chosen) if chosen is not None else []


class Runner:
    """Drives one model on one device; every forward pass checks ``cancel`` at each layer."""

    def __init__(self, model: Any, device: str, cancel: CancelFlag = None, seed: int = 0) -> None:
        torch = backend.require_torch()
        self.model = model
        self.device = device
        self.vocab = int(model.get_input_embeddings().num_embeddings)     # the ids index this table
        self.generator = torch.Generator().manual_seed(seed)
        params = inspect.signature(model.forward).parameters
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.notes: list[str] = []
        if "logits_to_keep" in params:
            self.keep: dict[str, int] = {"logits_to_keep": 1}
        elif "num_logits_to_keep" in params:
            self.keep = {"num_logits_to_keep": 1}
        else:
            self.keep = {}
            self.notes.append("this model computes logits at every prompt position (no logits_to_keep)")
        self.attention = str(getattr(model.config, "_attn_implementation", "") or "")
        self._hooks = []
        if cancel is not None:
            def stop(module: Any, args: Any) -> None:
                check_cancel(cancel)
            layers = _decoder_layers(model, _layer_count(model))
            self._hooks = [layer.register_forward_pre_hook(stop) for layer in layers]

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    # -- passes --------------------------------------------------------------------------------
    def _ids(self, batch: int, tokens: int) -> Any:
        torch = backend.require_torch()
        ids = torch.randint(0, self.vocab, (batch, tokens), generator=self.generator)
        return ids.to(self.device)

    def _cache_of(self, out: Any) -> Any:
        cache = getattr(out, "cache", None)
        return cache if cache is not None else out.past_key_values

    def _forward(self, ids: Any, cache: Any = None, keep: bool = False) -> Any:
        kwargs: dict[str, Any] = {"input_ids": ids, "use_cache": True}
        if cache is not None:
            kwargs[self.cache_arg] = cache
        if keep:
            kwargs.update(self.keep)
        return self.model(**kwargs)

    def prefill(self, tokens: int, batch: int = 1) -> tuple[float, Any, Any]:
        """(seconds, cache, next token): one prompt pass, the first token picked from it."""
        ids = self._ids(batch, tokens)

        def run() -> tuple[Any, Any]:
            out = self._forward(ids, keep=True)
            return self._cache_of(out), out.logits[:, -1:].argmax(-1)

        seconds, (cache, token) = backend.timed(self.device, run)
        return seconds, cache, token

    def step(self, token: Any, cache: Any) -> tuple[float, Any]:
        """(seconds, next token): one decode step appending to ``cache``."""
        def run() -> Any:
            out = self._forward(token, cache)
            return out.logits[:, -1:].argmax(-1)

        return backend.timed(self.device, run)

    def request(self, prompt: int, steps: int) -> tuple[float, list[float]]:
        """(TTFT, each decode step's seconds) of one request of ``prompt`` tokens."""
        ttft, cache, token = self.prefill(prompt)
        times = []
        for _ in range(steps):
            seconds, token = self.step(token, cache)
            times.append(seconds)
        return ttft, times

    def context_cache(self, context: int) -> Any:
        """A batch-1 cache holding ``context`` tokens (its prefill untimed)."""
        _, cache, _ = self.prefill(context)
        return cache

    def batch_steps(self, base: Any, batch: int, steps: int) -> list[float]:
        """Seconds of ``steps`` decode steps for ``batch`` copies of ``base``, each at the same
        context: the cache is rewound by one token after every step (one untimed step first)."""
        template = copy.deepcopy(base)
        if batch > 1:
            template.batch_repeat_interleave(batch)
        token = self._ids(batch, 1)
        cache = copy.deepcopy(template)
        times: list[float] = []
        for i in range(steps + 1):
            seconds, _ = self.step(token, cache)
            if i:
                times.append(seconds)
            cache = self._rewind(cache, template)
        return times

    def _rewind(self, cache: Any, template: Any) -> Any:
        """``cache`` less its last token: cropped in place, or a fresh copy of ``template``."""
        try:
            cache.crop(-1)
            return cache
        except (RuntimeError, ValueError, NotImplementedError, AttributeError):
            return copy.deepcopy(template)


def overhead_probe(source: ModelSource, dtype: str, device: str, cancel: CancelFlag = None,
                   steps: int = 20) -> tuple[float | None, str]:
    """(seconds, note): the fastest decode step of a tiny model of the same architecture and
    layer count, which moves almost no bytes and does almost no arithmetic, so its time is the
    fixed cost every pass of the real model also pays. (None, why) when it cannot be built."""
    from rooflab.core.measure.engines.torch.models import build_model

    tiny = ModelSource(label=f"{source.label} (tiny probe)", config=tiny_config(source.config))
    try:
        transformers_config(tiny)
        model = run_job(build_model(tiny, dtype, device, cancel))
    except Cancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - the probe is optional; its failure is a note
        return None, f"overhead probe skipped: {exc}"
    runner = Runner(model, device, cancel)
    try:
        _, cache, token = runner.prefill(8)
        best = float("inf")
        deadline = time.perf_counter() + 2.0
        for _ in range(steps):
            check_cancel(cancel)
            seconds, token = runner.step(token, cache)
            best = min(best, seconds)
            if time.perf_counter() > deadline:
                break
    finally:
        runner.close()
    return best, ""
