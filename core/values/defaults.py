"""What the app opens on when nothing is named: a catalogue model, a machine, a workload."""

from __future__ import annotations

from rooflab.core.values.workload import Workload

DEFAULT_MODEL = "qwen3-8b-q4_k_m"
DEFAULT_MACHINE = "rtx-4090"
DEFAULT_WORKLOAD = Workload(prompt=2048, answer=256, context=0, batch=1, kv_type="f16")

DEFAULT_CONTEXTS = (0, 4096, 32768)
DEFAULT_BATCHES = (1, 4, 16, 64)
DEFAULT_PROMPTS = (1, 16, 64, 256, 1024, 4096)
