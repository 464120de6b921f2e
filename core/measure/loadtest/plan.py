"""What ``measure.loadtest.run`` is asked to do and what it brings back: the plan (an endpoint, a model,
load levels, lengths, bounds in count and time), each request's raw times, and each level's
figures computed from them by the same ``serving_stats`` a prediction uses.

The plan names the environment variable that holds an API key, never the key: nothing here can
write a key to disk or into a report, and ``public_url`` drops credentials from an address.

Everything a plan can be asked is checked here, before a request goes out: an address that is
no http(s) URL (``http://[::1``, port 99999, a control character), extra fields nested past
``MAX_EXTRA_DEPTH`` or holding NaN, prompts whose text in flight would pass
``MAX_PROMPT_BYTES``; and ``time_bound`` is the longest the whole measurement can take."""

from __future__ import annotations

import ipaddress
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from rooflab.core.errors import SpecError
from rooflab.core.io.textfile import shown
from rooflab.core.predict.serving import Lengths, Load, ServingPlan
from rooflab.core.predict.serving_stats import Bounds, ServingLevel, level_stats, saturation_rate
from rooflab.core.values.machine import MachineProfile
from rooflab.core.values.model import ModelSpec

ENDPOINTS = ("completions", "chat")
STATUSES = ("ok", "error", "timeout", "cancelled")
MAX_IN_FLIGHT = 1024
MAX_EXTRA_BYTES = 16_384
MAX_EXTRA_DEPTH = 16           # levels of objects and lists in --extra-body
STORED_BYTES = 1 << 20         # a stored run keeps every token's time up to this size
MAX_PROMPT_BYTES = 512 << 20   # prompt text in flight at once, at most
PROMPT_BYTES_PER_TOKEN = 18    # at most: 2 words a token (``prompts.most_words``) of up to 9 bytes each
# the parts of the time bound beyond the levels' own (seconds)
PREFLIGHT_SECONDS = 10.0       # /v1/models
CALIBRATION_SECONDS = 180.0    # counting prompt tokens; lengths not searched by then use the fitted slope
METRICS_SECONDS = 3.0          # /metrics after a level


def _address_error(url: str, why: str) -> SpecError:
    return SpecError(f"the server address {shown(url, 80)} {why}")


def base_url(url: str) -> str:
    """The server's root: ``http://host:port`` (and any path prefix before ``/v1``). Raises
    SpecError (one line, the address quoted safely) for an address that is not an http(s) URL
    with a host and a port in 1-65535, or that holds a space or a control character."""
    if not isinstance(url, str) or len(url) > 2000:
        raise SpecError("the server address must be text of at most 2,000 characters")
    url = url.strip()
    if any(ord(c) <= 0x20 or 0x7F <= ord(c) <= 0x9F for c in url):
        raise _address_error(url, "holds a space or a control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        why = ("has a port that is not 1 to 65535" if "ort" in str(exc)
               else "is not a URL: a bracket is not closed or holds no IPv6 address")
        raise _address_error(url, why) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _address_error(url, "must start with http:// or https:// and name a host")
    if port == 0 or (parts.netloc.rpartition("@")[2].endswith(":") and port is None):
        raise _address_error(url, "has a port that is not 1 to 65535")
    host = parts.hostname
    if ":" in host:
        try:
            ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            raise _address_error(url, "is not a URL: a bracket is not closed or holds no IPv6 address") from None
    elif not all(c.isalnum() or c in "-._" for c in host):
        raise _address_error(url, "has a host name with characters no host name holds")
    path = parts.path.rstrip("/")
    for tail in ("/v1/chat/completions", "/v1/completions", "/v1"):
        if path.endswith(tail):
            path = path[: -len(tail)]
            break
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def check_extra_body(body: Any) -> None:
    """SpecError unless ``body`` is a JSON object rooflab can send: at most ``MAX_EXTRA_DEPTH``
    levels deep, finite numbers only (no NaN, which json.dumps would send bare), text keys,
    at most ``MAX_EXTRA_BYTES`` as JSON. Walked without recursion, so any depth is refused in
    linear time."""
    if not isinstance(body, Mapping):
        raise SpecError("the extra request fields must be a JSON object ({...})")
    stack: list[tuple[Any, int]] = [(body, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if depth > MAX_EXTRA_DEPTH or seen > MAX_EXTRA_BYTES:
            raise SpecError(f"the extra request fields nest deeper than {MAX_EXTRA_DEPTH} levels or pass "
                            f"{MAX_EXTRA_BYTES:,} bytes")
        if isinstance(item, Mapping):
            if not all(isinstance(k, str) for k in item):
                raise SpecError("the extra request fields must have text keys")
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, (list, tuple)):
            stack += [(v, depth + 1) for v in item]
        elif isinstance(item, float) and not math.isfinite(item):
            raise SpecError("the extra request fields hold NaN or Infinity, which JSON cannot carry")
        elif isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 1000:
            raise SpecError("the extra request fields hold a number of over 300 digits")
        elif not (item is None or isinstance(item, (str, bool, int, float))):
            raise SpecError(f"the extra request fields hold a {type(item).__name__}, which JSON cannot carry")
    if len(json.dumps(dict(body), allow_nan=False)) > MAX_EXTRA_BYTES:
        raise SpecError(f"the extra request fields must be a JSON object of at most {MAX_EXTRA_BYTES:,} bytes")


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
        if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in self.model):
            raise SpecError(f"the model name {shown(self.model, 80)} holds a control character")
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
        if self.api_key_env is not None and not (isinstance(self.api_key_env, str) and len(self.api_key_env) <= 256
                                                 and self.api_key_env.replace("_", "").isalnum()):
            raise SpecError(f"--api-key-env names an environment variable (letters, digits, _), "
                            f"got {shown(self.api_key_env, 80)}")
        parts = urlsplit(self.url)
        if self.api_key_env is not None and (parts.username is not None or parts.password is not None):
            raise SpecError("the server address holds a user and password, and an API key is given too: "
                            "give one of them")
        check_extra_body(self.extra_body)
        self.serving_plan()         # validates the lengths, count and seed
        for load in self.loads:
            if load.mode == "concurrency" and \
                    min(int(load.level), self.serving_plan().count(load)) * self.prompt_bytes > MAX_PROMPT_BYTES:
                raise SpecError(f"prompts of up to {self.prompt.most:,} tokens at concurrency {load.level:g} are up "
                                f"to {self.prompt_bytes * load.level / 2**30:.3g} GiB of text in flight; at most "
                                f"{MAX_PROMPT_BYTES / 2**30:.3g} GiB: lower the prompt length or the concurrency")

    @property
    def prompt_bytes(self) -> int:
        """The most bytes one prompt's text can take (``PROMPT_BYTES_PER_TOKEN``)."""
        return self.prompt.most * PROMPT_BYTES_PER_TOKEN + 256

    @property
    def in_flight_cap(self) -> int:
        """Requests in flight at once, at most: ``MAX_IN_FLIGHT``, fewer where their prompts'
        text would pass ``MAX_PROMPT_BYTES`` (a rate level waits for one to end)."""
        return max(1, min(MAX_IN_FLIGHT, MAX_PROMPT_BYTES // self.prompt_bytes))

    def time_bound(self) -> float:
        """The longest the measurement can take, in seconds: reaching the server, the warm-up
        (each request tried twice at most), counting prompt tokens, then per level its
        ``level_seconds``, the ``request_timeout`` of requests still running then, and /metrics."""
        setup = PREFLIGHT_SECONDS + 2 * self.warmup * self.request_timeout + CALIBRATION_SECONDS
        return setup + len(self.loads) * (self.level_seconds + self.request_timeout + METRICS_SECONDS)

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
    token_times: Sequence[float]              # an array("d") as measured: 8 bytes a token
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
        times = sum(len(r.token_times) for lv in self.levels for r in lv.records)
        if 3 * times > STORED_BYTES:      # a time is 3 bytes of JSON at the least: past the size unwritten
            return self.to_dict(token_times=False)
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


def check_keepable(plan: ServerPlan, machine: MachineProfile | None = None) -> Path:
    """The file ``keep_server_run`` would write for ``plan`` on ``machine``, checked before
    the measurement (which would otherwise be lost after the run): SpecError when a name in
    its path passes 255 bytes or its folder cannot be written."""
    import os

    from rooflab.core.calibration import store

    where = store.machine_key(machine) if machine is not None else "unspecified"
    path = store.server_run_path(public_url(plan.url), plan.model, where)
    long = [part for part in path.parts if len(os.fsencode(part)) > 255]
    if long or len(os.fsencode(str(path))) > 4000:
        raise SpecError(f"the measurement could not be kept: a name in its path is over 255 bytes "
                        f"({shown(long[0] if long else str(path), 60)}, from the server address or the model "
                        "name): shorten it or give --no-save")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not (folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)):
        raise SpecError(f"the measurement could not be kept: {shown(str(folder), 120)} cannot be written "
                        "(give --no-save, or set ROOFLAB_DATA_DIR to a folder that can be)")
    return path


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
