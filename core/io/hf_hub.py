"""Models named the way people find them: ``hf:OWNER/REPO[@REVISION]`` (a transformers
repository: its config.json and safetensors headers), ``hf:OWNER/REPO/FILE.gguf[@REVISION]``
or ``hf:OWNER/REPO:QUANT`` (one GGUF file of a GGUF repository), and ``https://…/FILE.gguf``.
Only headers are read (``io.remote``); a split GGUF (``-00001-of-0000N.gguf``) has every
part's header read.

huggingface_hub's conventions, without importing it: files at
``{HF_ENDPOINT}/{owner}/{repo}/resolve/{revision}/{file}``; ``HF_TOKEN`` sent to that host for
gated repositories; a file already in the user's Hugging Face cache
(``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``) read from disk."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from rooflab.core.errors import ModelFileError, SpecError
from rooflab.core.files.safe_json import JsonError, parse_json
from rooflab.core.io.gguf import GGUFHeader, read_header, spec_from_headers, split_names
from rooflab.core.io.gguf_header import HeaderIncomplete, parse_header_prefix
from rooflab.core.io.hf import config_weights, spec_from_config, spec_from_safetensors_tables
from rooflab.core.io.remote import NotFound, Remote, read_head, read_small_file
from rooflab.core.io.safetensors import StoredTensor, header_length, parse_safetensors_header, read_safetensors
from rooflab.core.jobs import CancelFlag, Progress, check_cancel
from rooflab.core.values.model import ModelSpec

DEFAULT_ENDPOINT = "https://huggingface.co"
MAX_PARTS = 1024                # safetensors shards of one model
_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class HubName:
    """A file (or the config) of one repository at one revision."""

    repo: str                   # OWNER/NAME
    file: str = ""              # a path in the repository; "" for a transformers repository
    revision: str = "main"
    quant: str = ""             # hf:OWNER/REPO:Q4_K_M picks the GGUF file with that type


def remote_takes_weights(ref: str) -> bool:
    """A transformers repository takes a weight format; a GGUF file has its own types."""
    text = ref.split("@", 1)[0] if ref.startswith("hf:") else urlsplit(ref).path
    return not (text.lower().endswith(".gguf") or (ref.startswith("hf:") and ":" in text[3:]))


def parse_hf(ref: str) -> HubName:
    """``hf:OWNER/REPO[/FILE][:QUANT][@REVISION]`` as its parts; ModelFileError when malformed."""
    body, _, revision = ref.removeprefix("hf:").partition("@")
    body, _, quant = body.partition(":")
    parts = body.strip("/").split("/")
    if len(parts) < 2 or not all(_NAME.match(p) for p in parts[:2]) or any(p in ("", ".", "..") for p in parts):
        raise ModelFileError(ref, "not a Hugging Face name (hf:OWNER/REPO, hf:OWNER/REPO/FILE.gguf, "
                                  "hf:OWNER/REPO:Q4_K_M, each with an optional @REVISION)")
    if quant and len(parts) > 2:
        raise ModelFileError(ref, "name a file or a :QUANT tag, not both")
    return HubName(repo="/".join(parts[:2]), file="/".join(parts[2:]), revision=revision or "main", quant=quant)


def endpoint() -> str:
    """The Hub's address: ``HF_ENDPOINT`` when set (a mirror, a local server), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def resolve_url(name: HubName, file: str) -> str:
    """Where the Hub serves ``file`` of ``name``'s repository at its revision."""
    return f"{endpoint()}/{name.repo}/resolve/{quote(name.revision, safe='')}/{quote(file)}"


def hub_from_url(url: str) -> HubName | None:
    """The repository file a Hub URL (``…/OWNER/REPO/resolve|blob/REV/FILE``) points at, when its
    host is the endpoint's; None for any other URL."""
    parts = urlsplit(url)
    if parts.netloc != urlsplit(endpoint()).netloc:
        return None
    bits = [unquote(b) for b in parts.path.strip("/").split("/")]
    if len(bits) >= 5 and bits[2] in ("resolve", "blob"):
        return HubName(repo=f"{bits[0]}/{bits[1]}", file="/".join(bits[4:]), revision=bits[3])
    if len(bits) == 2 and all(_NAME.match(b) for b in bits) and not bits[1].lower().endswith(".gguf"):
        return HubName(repo="/".join(bits))
    return None


def hub_cache_file(name: HubName, file: str) -> Path | None:
    """``file`` from the user's Hugging Face cache when a download left it there, else None."""
    if os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE"):
        hub = Path(os.environ.get("HF_HUB_CACHE") or os.environ["HUGGINGFACE_HUB_CACHE"])
    else:
        home = os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
        hub = Path(home) / "hub"
    folder = hub / ("models--" + name.repo.replace("/", "--"))
    commit = name.revision
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        try:
            commit = (folder / "refs" / name.revision).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError, ValueError):
            return None
    path = folder / "snapshots" / commit / file
    return path if re.fullmatch(r"[0-9a-f]{40}", commit) and path.is_file() else None


def open_remote_job(ref: str, weights: str | None = None,
                    cancel: CancelFlag = None) -> Generator[Progress, None, ModelSpec]:
    """The ModelSpec of a remote model (a job: a Progress per request)."""
    hub = parse_hf(ref) if ref.startswith("hf:") else hub_from_url(ref)
    host = urlsplit(endpoint()).netloc
    remote = Remote(ref, token=os.environ.get("HF_TOKEN", "").strip(), token_host=host)
    if hub is not None and hub.quant:
        hub = yield from _pick_quant(remote, hub, cancel)
    if hub is not None and not hub.file:
        return (yield from _repository_job(remote, hub, weights, cancel))
    if weights:
        raise ModelFileError(ref, "--weights does not apply to a GGUF file (its tensors have their own types)")
    if hub is not None:
        files = _parts(hub.file)
        return (yield from _gguf_job(remote, [(resolve_url(hub, f), hub_cache_file(hub, f)) for f in files], cancel))
    if not urlsplit(ref).path.lower().endswith(".gguf"):
        raise ModelFileError(ref, "a model URL must end in .gguf (or name a Hub repository: hf:OWNER/REPO)")
    head, _, last = ref.rpartition("/")
    return (yield from _gguf_job(remote, [(f"{head}/{p}", None) for p in _parts(last)], cancel))


def _parts(file: str) -> list[str]:
    """Every part of a split GGUF named by one of them, first part first; else ``[file]``."""
    folder, _, last = file.rpartition("/")
    prefix = f"{folder}/" if folder else ""
    return [prefix + name for name in split_names(last)]


def _gguf_job(remote: Remote, parts: list[tuple[str, Path | None]],
              cancel: CancelFlag) -> Generator[Progress, None, ModelSpec]:
    headers: list[GGUFHeader] = []
    for i, (url, local) in enumerate(parts):
        check_cancel(cancel)
        label = remote.name if len(parts) == 1 else f"{remote.name} (part {i + 1} of {len(parts)})"
        if local is not None:
            headers.append(read_header(local))
        else:
            headers.append((yield from read_head(remote, url, functools.partial(parse_header_prefix, label),
                                                 what="the GGUF", cancel=cancel)))
    declared = headers[0].metadata.get("split.count", 1)
    if len(parts) > 1 and declared != len(parts):
        raise ModelFileError(remote.name, f"its name says {len(parts)} parts, its header split.count {declared!r}")
    return spec_from_headers(headers, source=remote.name)


def _json(remote: Remote, raw: bytes, file: str) -> Any:
    try:
        return parse_json(raw)
    except JsonError as exc:
        raise remote.fail(f"{file} {exc}") from None


def _small_file(remote: Remote, hub: HubName, file: str, cancel: CancelFlag) -> Generator[Progress, None, Any]:
    local = hub_cache_file(hub, file)
    if local is not None:
        try:
            return _json(remote, local.read_bytes(), file)
        except OSError as exc:
            raise remote.fail(f"{local}: {exc.strerror or exc}") from None
    return _json(remote, (yield from read_small_file(remote, resolve_url(hub, file), cancel)), file)


def _repository_job(remote: Remote, hub: HubName, weights: str | None,
                    cancel: CancelFlag) -> Generator[Progress, None, ModelSpec]:
    """A transformers repository: config.json, then exact bytes from every safetensors header
    (named by model.safetensors.index.json, else model.safetensors); ``weights`` prices the
    config in that format instead."""
    try:
        config = yield from _small_file(remote, hub, "config.json", cancel)
    except NotFound:
        ggufs = yield from _gguf_files(remote, hub, cancel)
        if not ggufs:
            raise
        raise remote.fail(f"has no config.json but {len(ggufs)} GGUF files: name one, e.g. "
                          f"hf:{hub.repo}/{ggufs[0]} or hf:{hub.repo}:Q4_K_M") from None
    if not isinstance(config, dict):
        raise remote.fail("config.json must hold a JSON object")
    name = hub.repo.split("/")[1]
    try:
        if weights:
            return spec_from_config(config, weights=weights, name=f"{name} ({weights.upper()})", source=remote.name)
        files = yield from _weight_files(remote, hub, cancel)
        if not files:
            spec = spec_from_config(config, weights=config_weights(config), name=name, source=remote.name)
            return dataclasses.replace(spec, warnings=(
                *spec.warnings, "no safetensors files in the repository: bytes from the config at its dtype"))
        tables: list[list[StoredTensor]] = []
        total = 0
        for file in files:
            table, size = yield from _safetensors_table(remote, hub, file, cancel)
            tables.append(table)
            total += size
        return spec_from_safetensors_tables(config, tables, name=name, source=remote.name, file_bytes=total)
    except SpecError as exc:
        raise remote.fail(f"config.json: {exc}") from exc


def _weight_files(remote: Remote, hub: HubName, cancel: CancelFlag) -> Generator[Progress, None, list[str]]:
    try:
        index = yield from _small_file(remote, hub, "model.safetensors.index.json", cancel)
    except NotFound:
        return ["model.safetensors"]
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise remote.fail("model.safetensors.index.json has no weight_map of tensor -> file names")
    files = sorted(set(weight_map.values()))
    if len(files) > MAX_PARTS or any(".." in f.split("/") or f.startswith("/") for f in files):
        raise remote.fail("model.safetensors.index.json names files outside the repository or too many")
    return files


def _safetensors_table(remote: Remote, hub: HubName, file: str,
                       cancel: CancelFlag) -> Generator[Progress, None, tuple[list[StoredTensor], int]]:
    """(tensor table, file bytes) of one safetensors file: from the HF cache, else by range."""
    local = hub_cache_file(hub, file)
    if local is not None:
        return read_safetensors(local), local.stat().st_size
    label = f"{remote.name}: {file}"

    def parse(first: bytes, file_bytes: int) -> tuple[list[StoredTensor], int]:
        if len(first) < 8:
            raise HeaderIncomplete(8)
        length = header_length(label, first, file_bytes)
        if len(first) < 8 + length:
            raise HeaderIncomplete(8 + length)
        return parse_safetensors_header(label, first[8:8 + length], file_bytes - 8 - length), file_bytes

    try:
        return (yield from read_head(remote, resolve_url(hub, file), parse, what="the safetensors", cancel=cancel))
    except NotFound:
        if file == "model.safetensors":
            return [], 0
        raise


def _gguf_files(remote: Remote, hub: HubName, cancel: CancelFlag) -> Generator[Progress, None, list[str]]:
    """The .gguf files of a repository (first parts of split ones), from the Hub's listing."""
    url = f"{endpoint()}/api/models/{hub.repo}/revision/{quote(hub.revision, safe='')}"
    try:
        listing = _json(remote, (yield from read_small_file(remote, url, cancel)), "the repository listing")
    except NotFound:
        return []
    siblings = listing.get("siblings") if isinstance(listing, dict) else None
    names = [s.get("rfilename") for s in siblings or [] if isinstance(s, dict)]
    return sorted(n for n in names if isinstance(n, str) and n.lower().endswith(".gguf")
                  and split_names(n.rsplit("/", 1)[-1])[0] == n.rsplit("/", 1)[-1])


def _pick_quant(remote: Remote, hub: HubName, cancel: CancelFlag) -> Generator[Progress, None, HubName]:
    """``hf:OWNER/REPO:Q4_K_M``: the repository's GGUF file whose name carries that type."""
    files = yield from _gguf_files(remote, hub, cancel)
    tag = hub.quant.lower()
    matches = [f for f in files if re.search(rf"(^|[-_./]){re.escape(tag)}([-_.]|$)", f.lower())
               and "mmproj" not in f.lower()]
    if not matches:
        shown = ", ".join(files[:12]) or "none"
        raise remote.fail(f"no GGUF file of type {hub.quant} in {hub.repo} (its GGUF files: {shown})")
    return HubName(repo=hub.repo, file=min(matches, key=len), revision=hub.revision)
