"""Architecture knowledge shared by the readers: which layers use sliding-window attention
when a file or config does not say so itself.

llama.cpp marks sliding layers with a period p: layer i slides when i % p < p - 1 (gemma2
and gpt-oss: p = 2, even layers slide; gemma3: p = 6, five local then one global; gemma3n: p = 5)."""

from __future__ import annotations

# Hugging Face model_type -> llama.cpp architecture (GGUF names pass through unchanged)
_LLAMA_CPP_NAMES: dict[str, str] = {
    "llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen2_moe": "qwen2moe",
    "qwen3": "qwen3", "qwen3_moe": "qwen3moe", "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3",
    "gemma3_text": "gemma3", "gpt_oss": "gpt-oss", "phi3": "phi3", "olmo2": "olmo2", "olmoe": "olmoe",
    "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2", "granite": "granite", "exaone4": "exaone4",
    "gemma3n": "gemma3n", "gemma3n_text": "gemma3n",
}


def llama_cpp_name(architecture: str) -> str:
    """The llama.cpp spelling of an architecture named either way ("qwen3_moe" -> "qwen3moe",
    "gemma3_text" -> "gemma3", "mistral" -> "llama"); other names pass through, lower-cased. One
    model read from its config.json and from its GGUF gets one name."""
    name = architecture.lower()
    return _LLAMA_CPP_NAMES.get(name, name)


# architecture (GGUF spelling and HF model_type) -> period of the sliding pattern
_PERIODS: dict[str, int] = {
    "gemma2": 2,
    "gemma3": 6,
    "gemma3_text": 6,
    "gemma3n": 5,
    "gemma3n_text": 5,
    "gpt-oss": 2,
    "gpt_oss": 2,
    "gptoss": 2,
    "cohere2": 4,
    "exaone4": 4,
}

# architectures whose every layer slides when a window is given (HF applies it to all layers)
_ALL_LAYERS: frozenset[str] = frozenset({"mistral", "mixtral", "phi3", "starcoder2"})


def pattern_from_period(period: int, n_layers: int) -> tuple[bool, ...]:
    """Sliding flags for ``n_layers`` layers with llama.cpp's period rule (period <= 1: none)."""
    if period <= 1:
        return (False,) * n_layers
    return tuple(i % period < period - 1 for i in range(n_layers))


def default_sliding(architecture: str, n_layers: int, window: int) -> tuple[tuple[bool, ...], bool]:
    """(sliding flags, known) for an architecture with a window but no explicit pattern.

    ``known`` is False when the architecture is not in the table and the window was applied
    to no layer; the caller should warn."""
    if window <= 0:
        return (), True
    arch = architecture.lower()
    if arch in _PERIODS:
        return pattern_from_period(_PERIODS[arch], n_layers), True
    if arch in _ALL_LAYERS:
        return (True,) * n_layers, True
    return (), False
