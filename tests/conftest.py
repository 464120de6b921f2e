"""Shared test set-up: Qt runs offscreen and platformdirs points at a temporary folder, so no
test ever opens a window on a desktop or touches the real user's settings and profiles."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
import rooflab.gui  # noqa: E402,F401  (sets the Qt binding before pyqtgraph is imported)

# Before anything imports platformdirs: every user folder lands in one throwaway tree for the
# session; each test then gets its own (see ``isolated_user_dirs``). An xdist worker makes its
# tree inside its controller's (named, with the controller's process id, in ``_HOME_VARIABLE``),
# so the controller's removal takes it too: a worker ended before its last hook (under load at
# the end of a run) left its tree behind, and test_session_cleanup failed once at load 5-6.
_HOME_VARIABLE = "ROOFLAB_TESTS_HOME"
_parent_pid, _, _parent_home = os.environ.get(_HOME_VARIABLE, "").partition(":")
_inside = _parent_home if _parent_pid == str(os.getppid()) and os.path.isdir(_parent_home) else None
_SESSION_HOME = Path(tempfile.mkdtemp(prefix="rooflab-tests-", dir=_inside))
if _inside is None:
    os.environ[_HOME_VARIABLE] = f"{os.getpid()}:{_SESSION_HOME}"
for _var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
    os.environ[_var] = str(_SESSION_HOME / _var.lower())
os.environ["ROOFLAB_CONFIG_DIR"] = str(_SESSION_HOME / "rooflab-config")
os.environ["ROOFLAB_DATA_DIR"] = str(_SESSION_HOME / "rooflab-data")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's throwaway tree: every process that read this file (the xdist
    controller and each worker) made its own, and each removes its own here, its last hook."""
    shutil.rmtree(_SESSION_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Per-test config/data/cache/state folders (platformdirs reads XDG_* on every call)."""
    home = tmp_path_factory.mktemp("userdirs")
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(home / var.lower()))
    monkeypatch.setenv("ROOFLAB_CONFIG_DIR", str(home / "rooflab-config"))
    monkeypatch.setenv("ROOFLAB_DATA_DIR", str(home / "rooflab-data"))
    return home


def build_spec(name: str = "tiny-dense", *, layers: int = 4, hidden: int = 256, ffn: int = 768,
               heads: int = 8, kv_heads: int = 2, head_dim: int = 32, vocab: int = 1024,
               experts: int = 0, experts_used: int = 0, window: int = 0, type_name: str = "F16",
               context_length: int = 4096):
    """A small, self-consistent ModelSpec built straight from a tensor table (no reader)."""
    from rooflab.core.values.model import AttentionLayout, ModelSpec, Role, Tensor
    from rooflab.core.values.quant import tensor_bytes

    def tensor(tname: str, shape: tuple[int, ...], role: Role, layer: int | None = None,
               ttype: str = type_name) -> Tensor:
        n = 1
        for d in shape:
            n *= d
        return Tensor(name=tname, shape=shape, type_name=ttype, nbytes=tensor_bytes(ttype, n), role=role,
                      layer=layer)

    tensors = [tensor("token_embd.weight", (hidden, vocab), Role.EMBEDDING)]
    for i in range(layers):
        p = f"blk.{i}."
        tensors += [
            tensor(p + "attn_norm.weight", (hidden,), Role.NORMS, i, "F32"),
            tensor(p + "attn_q.weight", (hidden, heads * head_dim), Role.ATTENTION, i),
            tensor(p + "attn_k.weight", (hidden, kv_heads * head_dim), Role.ATTENTION, i),
            tensor(p + "attn_v.weight", (hidden, kv_heads * head_dim), Role.ATTENTION, i),
            tensor(p + "attn_output.weight", (heads * head_dim, hidden), Role.ATTENTION, i),
            tensor(p + "ffn_norm.weight", (hidden,), Role.NORMS, i, "F32"),
        ]
        if experts:
            tensors += [
                tensor(p + "ffn_gate_inp.weight", (hidden, experts), Role.ROUTER, i, "F32"),
                tensor(p + "ffn_up_exps.weight", (hidden, ffn, experts), Role.EXPERTS, i),
                tensor(p + "ffn_down_exps.weight", (ffn, hidden, experts), Role.EXPERTS, i),
            ]
        else:
            tensors += [
                tensor(p + "ffn_up.weight", (hidden, ffn), Role.FEED_FORWARD, i),
                tensor(p + "ffn_down.weight", (ffn, hidden), Role.FEED_FORWARD, i),
            ]
    tensors += [tensor("output_norm.weight", (hidden,), Role.NORMS, None, "F32"),
                tensor("output.weight", (hidden, vocab), Role.OUTPUT)]
    sliding = tuple(i % 2 == 0 for i in range(layers)) if window else ()
    attention = AttentionLayout(heads=(heads,) * layers, kv_heads=(kv_heads,) * layers, head_dim_k=head_dim,
                                head_dim_v=head_dim, sliding=sliding, sliding_window=window)
    weight_bytes = sum(t.nbytes for t in tensors)
    return ModelSpec(name=name, architecture="qwen3moe" if experts else "qwen3", source=f"test:{name}",
                     tensors=tuple(tensors), attention=attention, hidden=hidden, vocab=vocab,
                     file_bytes=weight_bytes + 4096, experts=experts, experts_used=experts_used,
                     context_length=context_length, weights_format=type_name)


def build_machine(name: str = "Test GPU", *, bandwidth: float = 1.0e12, flops: float = 100e12,
                  memory: float = 24e9, offload: bool = True, key: str = "test-gpu"):
    from rooflab.core.values.machine import MachineProfile

    extra = dict(offload_bandwidth=64e9, offload_memory=64e9, offload_name="system RAM") if offload else {}
    return MachineProfile(name=name, bandwidth=bandwidth, peak_flops={"fp16": flops, "fp32": flops / 2},
                          memory=memory, key=key, **extra)


@pytest.fixture
def dense_spec():
    return build_spec()


@pytest.fixture
def moe_spec():
    return build_spec("tiny-moe", experts=8, experts_used=2)


@pytest.fixture
def sliding_spec():
    return build_spec("tiny-sliding", window=512)


@pytest.fixture
def machine():
    return build_machine()


@pytest.fixture(autouse=True)
def steady_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests time real models while the suite's other workers load the same cores, so the load
    average can rise by more than ``trust.LOAD_RISE_LIMIT`` during any run and mark every point
    disturbed. What a test checks must not depend on that: the load reads steady. The judge is
    tested in tests/core/measure/machine/test_trust.py, and a run that the load does disturb in
    tests/gui/test_measure_panel.py."""
    from rooflab.core.measure.engines import engine

    monkeypatch.setattr(engine, "load_average", lambda: 1.0)


@pytest.fixture
def steady_timings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every measured point reads as trusted: on a shared machine the other work spreads a
    tiny model's repeats past ``trust.SPREAD_LIMIT`` (at a load of 5-8, every point), so a test
    of what a run does with its points (fit, keep, print) must not ask the real clock whether
    they agreed. The judge itself is tested on given timings in tests/core/measure/machine/test_trust.py."""
    from rooflab.core.measure.engines import engine

    monkeypatch.setattr(engine, "judge", lambda point, load_at_start, load_now: point)
