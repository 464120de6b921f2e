"""rooflab's own calibration models: random-weight models of several shapes and weight formats
that ``rooflab measure calibrate`` times on this machine, so the fit sees what changes between
models (depth and width, sliding-window attention, routed experts, the weight format) and can
carry over to a model it never saw.

The toys are chosen for a small machine: each is 40-250 MB (more than a 32 MB last-level
cache, so weights stream from memory as a real model's do) with a 16k vocabulary, and a full
sweep of one takes tens of seconds on two cores. The thorough set adds models at the sizes and
vocabularies people run (``REAL_SIZE_MODELS``: the exact tensor tables of Qwen3-0.6B, Gemma 3 1B
with its 262k vocabulary and sliding-window attention, Qwen3-1.7B, and a 2B mixture of experts
with Qwen3's 152k vocabulary), where the output head is a large share of a small model's bytes.
Each model's sweep holds the short prompts, shallow depths and small batches the extrapolation
check fits on and the long, deep and large ones it scores on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rooflab.core.io.hf import spec_from_config
from rooflab.core.values.model import ModelSpec

_VOCAB = 16000


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationModel:
    """One calibration model: a config.json (as Hugging Face writes it) and a weight format."""

    key: str
    description: str
    config: dict[str, Any]
    weights: str                 # recipe for llama.cpp (q4_k_m, q8_0); torch runs the config itself
    quick: bool = True           # part of the quick set (``measure calibrate --quick``)
    real_size: bool = False      # a real model's size and vocabulary: only in the thorough set

    def spec(self) -> ModelSpec:
        return spec_from_config(self.config, weights=self.weights, name=f"calibration {self.key}",
                                source=f"calibration:{self.key}")


def _dense(model_type: str, hidden: int, layers: int, heads: int, kv_heads: int, ffn: int,
           **more: Any) -> dict[str, Any]:
    return {"model_type": model_type, "hidden_size": hidden, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "intermediate_size": ffn,
            "vocab_size": _VOCAB, "max_position_embeddings": 8192, "tie_word_embeddings": False, **more}


_WIDE = _dense("llama", 1024, 12, 16, 4, 2816)
_DEEP = _dense("qwen3", 768, 16, 12, 4, 2048, head_dim=64)
_SLIDING = _dense("gemma3_text", 1024, 12, 8, 4, 2816, head_dim=128, sliding_window=128)
_EXPERTS = _dense("qwen3_moe", 1024, 8, 16, 4, 2816, head_dim=64, moe_intermediate_size=512, num_experts=32,
                  num_experts_per_tok=4)
_FINE_EXPERTS = _dense("qwen3_moe", 768, 12, 12, 4, 2048, head_dim=64, moe_intermediate_size=256, num_experts=64,
                       num_experts_per_tok=8)

#: The llama.cpp set: two formats of two dense shapes (so leaving one model out still leaves
#: its format in the fit), a sliding-window model and two mixtures of experts.
LLAMACPP_MODELS: tuple[CalibrationModel, ...] = (
    CalibrationModel(key="wide-q4_k_m", description="dense, 12 layers of 1024", config=_WIDE, weights="q4_k_m"),
    CalibrationModel(key="deep-q4_k_m", description="dense, 16 layers of 768", config=_DEEP, weights="q4_k_m"),
    CalibrationModel(key="wide-q8_0", description="dense, 12 layers of 1024", config=_WIDE, weights="q8_0"),
    CalibrationModel(key="deep-q8_0", description="dense, 16 layers of 768", config=_DEEP, weights="q8_0"),
    CalibrationModel(key="sliding-q4_k_m", description="sliding-window attention (128 tokens), 12 layers",
                     config=_SLIDING, weights="q4_k_m", quick=False),
    CalibrationModel(key="experts-q4_k_m", description="32 routed experts, 4 per token, 8 layers",
                     config=_EXPERTS, weights="q4_k_m", quick=False),
    CalibrationModel(key="fine-experts-q4_k_m", description="64 routed experts, 8 per token, 12 layers",
                     config=_FINE_EXPERTS, weights="q4_k_m", quick=False),
)

#: The torch set: the same shapes, run by transformers at the compute dtype (smaller: torch in
#: fp32 holds four bytes a weight).
TORCH_MODELS: tuple[CalibrationModel, ...] = (
    CalibrationModel(key="wide", description="dense, 8 layers of 768",
                     config=_dense("llama", 768, 8, 12, 4, 2048), weights="fp32"),
    CalibrationModel(key="deep", description="dense, 12 layers of 512",
                     config=_dense("qwen3", 512, 12, 8, 4, 1536, head_dim=64), weights="fp32"),
    CalibrationModel(key="narrow", description="dense, 16 layers of 384",
                     config=_dense("qwen3", 384, 16, 6, 2, 1024, head_dim=64), weights="fp32"),
    CalibrationModel(key="experts", description="16 routed experts, 4 per token, 6 layers",
                     config=_dense("qwen3_moe", 512, 6, 8, 4, 1536, head_dim=64, moe_intermediate_size=384,
                                   num_experts=16, num_experts_per_tok=4), weights="fp32", quick=False),
    CalibrationModel(key="fine-experts", description="32 routed experts, 8 per token, 8 layers",
                     config=_dense("qwen3_moe", 384, 8, 6, 2, 1024, head_dim=64, moe_intermediate_size=192,
                                   num_experts=32, num_experts_per_tok=8), weights="fp32", quick=False),
)


def _real(model_type: str, hidden: int, layers: int, heads: int, kv_heads: int, ffn: int, vocab: int,
          **more: Any) -> dict[str, Any]:
    return {**_dense(model_type, hidden, layers, heads, kv_heads, ffn, **more), "vocab_size": vocab,
            "tie_word_embeddings": True}


#: Models at real sizes and vocabularies, from their published config.json (Qwen/Qwen3-0.6B,
#: google/gemma-3-1b-it, Qwen/Qwen3-1.7B), and a 2.0 B mixture of experts in Qwen3-MoE's layout
#: (64 experts, 8 per token: 0.45 B active) with the same 152k vocabulary. Formats as people run
#: them: Q4_K_M, whose K-quants then span 1,024- and 2,048-wide multiplies (a wide multiply runs
#: a prompt at a third more FLOP/s than a narrow one on the same CPU); Gemma 3 1B's widths are not
#: multiples of a K-quant's 256-weight block, so its "Q4_K_M" is mostly Q8_0, the real-size Q8_0
#: model. llama.cpp only: torch would hold them in fp32.
REAL_SIZE_MODELS: tuple[CalibrationModel, ...] = (
    CalibrationModel(key="qwen3-0.6b-q4_k_m", description="Qwen3-0.6B's table: 0.6 B, 152k vocabulary",
                     config=_real("qwen3", 1024, 28, 16, 8, 3072, 151936, head_dim=128), weights="q4_k_m",
                     quick=False, real_size=True),
    CalibrationModel(key="gemma3-1b-q4_k_m", description="Gemma 3 1B's table: 1.0 B, 262k vocabulary, "
                     "sliding window of 512", config=_real("gemma3_text", 1152, 26, 4, 1, 6912, 262144, head_dim=256,
                                                         sliding_window=512), weights="q4_k_m", quick=False,
                     real_size=True),
    CalibrationModel(key="qwen3-1.7b-q4_k_m", description="Qwen3-1.7B's table: 1.7 B, 152k vocabulary",
                     config=_real("qwen3", 2048, 28, 16, 8, 6144, 151936, head_dim=128), weights="q4_k_m",
                     quick=False, real_size=True),
    CalibrationModel(key="moe-2b-a0.4b-q4_k_m", description="2.0 B mixture of experts (64 experts, 8 per token), "
                     "152k vocabulary", config=_real("qwen3_moe", 1024, 24, 16, 4, 3072, 151936, head_dim=64,
                                                     moe_intermediate_size=384, num_experts=64, num_experts_per_tok=8),
                     weights="q4_k_m", quick=False, real_size=True),
)


def calibration_models(engine: str, *, thorough: bool = False) -> tuple[CalibrationModel, ...]:
    """The set for ``engine`` ("llamacpp" or "torch"); ``thorough`` adds llama.cpp's real-size models."""
    if engine == "torch":
        return TORCH_MODELS
    return LLAMACPP_MODELS + (REAL_SIZE_MODELS if thorough else ())
