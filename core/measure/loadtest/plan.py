"""What ``measure.loadtest.run`` is asked to do and what it brings back: the plan (an endpoint, a model,
load levels, lengths, bounds in count and time), each request's raw times, and each level's
figures computed from them by the same ``serving_stats`` a prediction uses.

The plan names the environment variable that holds an API key, never the key: nothing here can
write a key to disk or into a report, and ``public_url`` drops credentials from an address."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from rooflab.core.errors import SpecError
from rooflab.core.predict.serving import Lengths, Load, ServingPlan
from rooflab.core.predict.serving_stats import Bounds, ServingLevel, level_stats, saturation_rate
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec

ENDPOINTS = ("completions", "chat")
STATUSES = ("ok", "error", "timeout", "cancelled")
MAX_IN_FLIGHT = 1024
MAX_EXTRA_BYTES = 16_384
STORED_BYTES = 1 << 20         # a stored run keeps every token's time up to this size


def base_url(url: str) -> str:
    """The server's root: ``http://host:port`` (and any path prefix before ``/v1``). Raises
    SpecError for an address that is not http(s)."""
    if not isinstance(url, str) or len(url) > 2000:
        raise SpecError("the server address must be text of at most 2,000 characters")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(f"the server address must start with http:// or https:// and name a host, got {url!r}")
    path = parts.path.rstrip("/")
    for tail in ("/v1/chat/completions", "/v1/completions", "/v1"):
        if path.endswith(tail):
            path = path[: -len(tail)]
            break
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def public_url(url: str) -> str:
    """``url`` without user, password, query or fragment: what may be shown and stored."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerPlan:
    """A measurement of one served model. ``url``: the server (``base_url`` is applied);
    ``endpoint``: "completions" or "chat"; ``api_key_env``: the name of the environment variable
    holding the key (None: none); times in seconds: ``request_timeout`` for a whole request,
    ``stall_timeout`` without a byte, ``level_seconds`` after which a level sends nothing new.
    ``force_length``: ask the server for exactly the answer's tokens (``min_tokens``,
    ``ignore_eos``). ``extra_body``: more fields for every request (vLLM bench's
    ``--extra-body``: a temperature, a logit bias); the model, prompt, length and streaming
    fields stay rooflab's."""

    url: str
    model: str
    loads: tuple[Load, ...]
    prompt: Lengths
    answer: Lengths
    endpoint: str = "completions"
    requests: int | None = None
    seed: int = 0
    api_key_env: str | None = None
    request_timeout: float = 120.0
    stall_timeout: float = 30.0
    level_seconds: float = 300.0
    force_length: bool = True
    warmup: int = 1
    bounds: Bounds = field(default_factory=Bounds)
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", base_url(self.url))
        if not isinstance(self.model, str) or not self.model.strip() or len(self.model) > 512:
            raise SpecError("the model name must be non-empty text of at most 512 characters")
        if self.endpoint not in ENDPOINTS:
            raise SpecError(f"endpoint must be one of {', '.join(ENDPOINTS)}, got {self.endpoint!r}")
        if not self.loads:
            raise SpecError("a server measurement needs at least one load level")
        for name in ("request_timeout", "stall_timeout", "level_seconds"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value <= 86_400):
                raise SpecError(f"{name} must be a number of seconds in (0, 86400], got {value!r}")
        if not isinstance(self.warmup, int) or not 0 <= self.warmup <= 16:
            raise SpecError(f"warmup must be 0 to 16 requests, got {self.warmup!r}")
        if self.api_key_env is not None and not (self.api_key_env.replace("_", "").isalnum()):
            raise SpecError(f"--api-key-env names an environment variable (letters, digits, _), "
                            f"got {self.api_key_env!r}")
        if not isinstance(self.extra_body, Mapping) or len(json.dumps(dict(self.extra_body))) > MAX_EXTRA_BYTES:
            raise SpecError(f"the extra request fields must be a JSON object of at most {MAX_EXTRA_BYTES:,} bytes")
        self.serving_plan()         # validates the lengths, count and seed

    def serving_plan(self) -> ServingPlan:
        """The simulation's plan with the same lengths, count and seed: a measurement draws its
        requests (lengths, arrival times) as the prediction does (``serving.draw_requests``)."""
        return ServingPlan(prompt=self.prompt, answer=self.answer, requests=self.requests, seed=self.seed,
                           bounds=self.bounds)

    def describe(self) -> dict[str, Any]:
        """The plan as stored and reported: no key, no credentials in the address."""
        return {"url": public_url(self.url), "model": self.model, "endpoint": self.endpoint,
                "loads": [{"mode": x.mode, "level": x.level} for x in self.loads],
                "prompt_tokens": self.prompt.mean, "prompt_spread": self.prompt.spread,
                "answer_tokens": self.answer.mean, "answer_spread": self.answer.spread, "requests": self.requests,
                "seed": self.seed, "authenticated": self.api_key_env is not None,
                "request_timeout_seconds": self.request_timeout, "stall_timeout_seconds": self.stall_timeout,
                "level_seconds": self.level_seconds, "force_length": self.force_length,
                "ttft_bound_seconds": self.bounds.ttft, "tpot_bound_seconds": self.bounds.tpot,
                "extra_body": dict(self.extra_body)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord:
    """One request as measured, seconds from its level's start: ``sent``, each token step's
    arrival (``token_times``), ``end`` (the last token, or when it failed). ``answer_tokens``:
    the server's count when it gave one (``counted_by`` "usage"), else the token steps
    ("stream"). ``status``: ok, error, timeout or cancelled, with ``error`` its one line."""

    index: int
    sent: float
    end: float
    token_times: tuple[float, ...]
    prompt_tokens: int
    asked_tokens: int
    answer_tokens: int
    counted_by: str
    status: str
    error: str = ""
    server: dict[str, float] = field(default_factory=dict)   # usage and llama-server's timings

    @property
    def first(self) -> float:
        return self.token_times[0] if self.token_times else math.nan

    def to_dict(self, token_times: bool = True) -> dict[str, Any]:
        return {"index": self.index, "sent": self.sent, "first": self.first, "end": self.end,
                "token_times": list(self.token_times) if token_times else [],
                "prompt_tokens": self.prompt_tokens, "asked_tokens": self.asked_tokens,
                "answer_tokens": self.answer_tokens, "counted_by": self.counted_by, "status": self.status,
                "error": self.error, "server": dict(self.server)}


def gaps(records: list[RequestRecord]) -> np.ndarray:
    """Every inter-token gap of ``records``, request by request."""
    parts = [np.diff(np.asarray(r.token_times)) for r in records if len(r.token_times) > 1]
    return np.concatenate(parts) if parts else np.zeros(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLevel:
    """One level's requests and the figures of those that completed (``stats``; its
    ``completed`` is 0 and its latencies NaN when none did). ``metrics``: samples of the
    server's /metrics after the level, where reachable."""

    load: Load
    records: tuple[RequestRecord, ...]
    stats: ServingLevel
    warnings: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r.status == status)

    def problems(self) -> list[tuple[str, int]]:
        """Each distinct error line with how many requests it ended, most frequent first."""
        return Counter(r.error for r in self.records if r.status in ("error", "timeout")).most_common()

    def to_dict(self, token_times: bool = True) -> dict[str, Any]:
        return {"mode": self.load.mode, "level": self.load.level, "sent": len(self.records),
                "completed": self.count("ok"), "errors": self.count("error"), "timeouts": self.count("timeout"),
                "cancelled": self.count("cancelled"),
                "problems": [{"error": e, "count": n} for e, n in self.problems()],
                "stats": self.stats.to_dict(),
                "warnings": list(self.warnings), "metrics": dict(self.metrics),
                "requests": [r.to_dict(token_times) for r in self.records]}


def level_from(load: Load, records: list[RequestRecord], bounds: Bounds | None = None,
               warnings: tuple[str, ...] = (), metrics: dict[str, float] | None = None) -> ServerLevel:
    """A level's figures from its records: those that completed, by ``level_stats``."""
    ok = [r for r in records if r.status == "ok" and r.token_times]
    stats = level_stats(mode=load.mode, level=load.level, arrival=[r.sent for r in ok], first=[r.first for r in ok],
                        end=[r.token_times[-1] for r in ok], prompt_tokens=[r.prompt_tokens for r in ok],
                        answer_tokens=[r.answer_tokens for r in ok], itl=gaps(ok), bounds=bounds)
    return ServerLevel(load=load, records=tuple(records), stats=stats, warnings=warnings, metrics=metrics or {})


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerMeasurement:
    """A whole measurement: the plan, the levels run (all of them unless ``cancelled``), how
    prompt lengths were made (``prompt_method``) and what to watch for (``warnings``)."""

    plan: ServerPlan
    levels: tuple[ServerLevel, ...]
    started: str
    prompt_method: str
    server_models: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    cancelled: bool = False

    @property
    def saturation_rate(self) -> float:
        """The highest sustained requests/s measured: the saturation rate when a level reached
        it, a lower bound of it otherwise."""
        return saturation_rate([lv.stats for lv in self.levels])

    def to_dict(self, token_times: bool = True) -> dict[str, Any]:
        """Everything measured; without ``token_times`` each request keeps its first and last
        token and its count but not every token's time (``stored``)."""
        return {"plan": self.plan.describe(), "started": self.started, "prompt_method": self.prompt_method,
                "server_models": list(self.server_models), "warnings": list(self.warnings),
                "cancelled": self.cancelled, "saturation_requests_per_second": self.saturation_rate,
                "levels": [lv.to_dict(token_times) for lv in self.levels], "token_times": token_times}

    def stored(self) -> dict[str, Any]:
        """``to_dict`` as kept in the store: every token time while the run stays under
        ``STORED_BYTES`` of JSON, else first and last tokens only."""
        full = self.to_dict()
        return full if len(json.dumps(full)) <= STORED_BYTES else self.to_dict(token_times=False)


def measured_levels(run: Mapping[str, Any]) -> tuple[ServingLevel, ...]:
    """The levels' figures of a stored run (``ServerMeasurement.stored``); those of another
    shape are left out."""
    out = []
    for level in run.get("levels", []) if isinstance(run.get("levels"), list) else []:
        try:
            out.append(ServingLevel.from_dict(level["stats"]))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(out)


def keep_server_run(result: ServerMeasurement, *, spec: ModelSpec | None = None,
                    machine: MachineProfile | None = None) -> Path:
    """Keep ``result`` (``stored``: no key, no credentials) per (server, model name, machine),
    the window's and ``rooflab measure server``'s one way: with ``spec`` (the model the server
    runs) under its model key, so the Serving chart of that model on ``machine`` draws it;
    without ``machine``, as "unspecified". Returns the file written."""
    from rooflab.core.calibration import store

    kept = result.stored()
    if spec is not None:
        kept["model_key"] = store.model_key(spec)
    where = store.machine_key(machine) if machine is not None else "unspecified"
    return store.save_server_run(public_url(result.plan.url), result.plan.model, where, kept)


def latest_measured(model_key: str, machine: str) -> tuple[str, tuple[ServingLevel, ...]] | None:
    """(a label, the levels) of the newest server measurement kept for ``machine`` that named
    the model with ``model_key`` (``rooflab measure server --predict-model``), None when none."""
    from rooflab.core.calibration import store

    for run in reversed(store.server_runs_on(machine)):
        if run.get("model_key") == model_key:
            plan = run.get("plan") if isinstance(run.get("plan"), dict) else {}
            label = f"measured, {plan.get('url', 'a server')} {str(run.get('started', ''))[:10]}".strip()
            return label, measured_levels(run)
    return None
