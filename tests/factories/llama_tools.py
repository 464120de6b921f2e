"""A stand-in for a user's llama-bench / llama-batched-bench: an executable script that answers
--help and --version like llama.cpp's tools, then replays scripted output (JSONL rows, log lines,
sleeps, an exit or a signal), so that streaming, cancel and crashes can be tested without a build.

The rows are llama.cpp's own examples. LLAMA_BENCH_ROWS: the JSON section of
tools/llama-bench/README.md in ggml-org/llama.cpp (build 5163, commit 8cf427ff, RTX 4080;
"JSONL prints the same objects as JSON, one complete object per line"); OLD_ROW: the same
README's JSONL section as of that build (flash_attn still a boolean, no n_cpu_moe). The
llama-batched-bench row follows the JSONL format string of tools/batched-bench/batched-bench.cpp,
with the numbers of a published run ("n_kv_max = 36864 ... | 2048 | 128 | 16 | 34816 | 29.142 |
1124.43 | 10.031 | 204.17 | 39.173 | 888.79 |")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

_COMMON = {"build_commit": "8cf427ff", "build_number": 5163, "cpu_info": "AMD Ryzen 7 7800X3D 8-Core Processor",
           "gpu_info": "NVIDIA GeForce RTX 4080", "backends": "CUDA",
           "model_filename": "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "model_type": "qwen2 7B Q4_K - Medium",
           "model_size": 4677120000, "model_n_params": 7615616512, "n_batch": 2048, "n_ubatch": 512,
           "n_threads": 8, "cpu_mask": "0x0", "cpu_strict": False, "poll": 50, "type_k": "f16", "type_v": "f16",
           "n_gpu_layers": -1, "n_cpu_moe": 0, "split_mode": "layer", "main_gpu": 0, "no_kv_offload": False,
           "flash_attn": -1, "devices": "auto", "tensor_split": "0.00", "tensor_buft_overrides": "none",
           "use_mmap": True, "use_direct_io": False, "embeddings": False, "no_op_offload": 0, "no_host": False,
           "repack": True, "fit_target": 0, "fit_min_ctx": 0}
PP_ROW = {**_COMMON, "n_prompt": 512, "n_gen": 0, "n_depth": 0, "test_time": "2025-04-24T11:58:50Z",
          "avg_ns": 72135640, "stddev_ns": 1453752, "avg_ts": 7100.002165, "stddev_ts": 140.341520,
          "samples_ns": [74601900, 71632900, 71745200, 71952700, 70745500],
          "samples_ts": [6863.1, 7147.55, 7136.37, 7115.79, 7237.21]}
TG_ROW = {**_COMMON, "n_prompt": 0, "n_gen": 128, "n_depth": 0, "test_time": "2025-04-24T11:58:51Z",
          "avg_ns": 1076767880, "stddev_ns": 9449585, "avg_ts": 118.881588, "stddev_ts": 1.041811,
          "samples_ns": [1075361300, 1065089400, 1071761200, 1081934900, 1089692600],
          "samples_ts": [119.03, 120.178, 119.43, 118.307, 117.464]}
OLD_ROW = {"build_commit": "8cf427ff", "build_number": 5163, "cpu_info": "AMD Ryzen 7 7800X3D 8-Core Processor",
           "gpu_info": "NVIDIA GeForce RTX 4080", "backends": "CUDA",
           "model_filename": "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "model_type": "qwen2 7B Q4_K - Medium",
           "model_size": 4677120000, "model_n_params": 7615616512, "n_batch": 2048, "n_ubatch": 512,
           "n_threads": 8, "cpu_mask": "0x0", "cpu_strict": False, "poll": 50, "type_k": "f16", "type_v": "f16",
           "n_gpu_layers": 99, "split_mode": "layer", "main_gpu": 0, "no_kv_offload": False, "flash_attn": False,
           "tensor_split": "0.00", "use_mmap": True, "embeddings": False, "n_prompt": 0, "n_gen": 128,
           "n_depth": 0, "test_time": "2025-04-24T11:59:33Z", "avg_ns": 1068078400, "stddev_ns": 6279455,
           "avg_ts": 119.844681, "stddev_ts": 0.699739,
           "samples_ns": [1066331700, 1064864900, 1079042600, 1063328400, 1066824400],
           "samples_ts": [120.038, 120.203, 118.624, 120.377, 119.982]}
BATCHED_ROW = {"n_kv_max": 36864, "n_batch": 2048, "n_ubatch": 2048, "flash_attn": 1, "is_pp_shared": 0,
               "n_gpu_layers": -1, "n_threads": 28, "n_threads_batch": 28, "pp": 2048, "tg": 128, "pl": 16,
               "n_kv": 34816, "t_pp": 29.142, "speed_pp": 1124.43, "t_tg": 10.031, "speed_tg": 204.17,
               "t": 39.173, "speed": 888.79}

# what --help lists, trimmed to the lines that matter (tools/llama-bench/README.md "Syntax")
BENCH_HELP = """usage: llama-bench [options]
  -o, --output <csv|json|jsonl|md|sql>      output format printed to stdout (default: md)
  -p, --n-prompt <n>                        (default: 512)
  -n, --n-gen <n>                           (default: 128)
  -d, --n-depth <n>                         (default: 0)
  -ngl, --n-gpu-layers <n>                  (default: -1)
  -ncmoe, --n-cpu-moe <n>                   (default: 0)
  -fa, --flash-attn <on|off|auto>           (default: auto)"""
OLD_BENCH_HELP = """usage: ./llama-bench [options]
  -o, --output <csv|json|jsonl|md|sql>      (default: md)
  -p, --n-prompt <n>                        (default: 512)
  -fa, --flash-attn <0|1>                   (default: 0)"""
BATCHED_HELP = """-fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto',
default: 'auto')
-ncmoe, --n-cpu-moe N                    keep the MoE weights of the first N layers in the CPU
--output-format {md,jsonl}               output format for batched-bench results (default: md)"""
OLD_BATCHED_HELP = """-fa,   --flash-attn                     enable Flash Attention (default: disabled)
--output-format {md,jsonl}               output format for batched-bench results (default: md)"""


FAKE_TOOL = """#!{python}
import json, os, signal, subprocess, sys, time
S = json.loads({scenario!r})
args = sys.argv[1:]
if "--help" in args:
    print(S["help"])
    sys.exit(0)
if "--version" in args:
    print("version: 5163 (8cf427ff)", file=sys.stderr)
    sys.exit(0)
open(S["dir"] + "/argv.json", "w").write(json.dumps(args))
open(S["dir"] + "/pid", "w").write(str(os.getpid()))
if S.get("ignore_term"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if S.get("grandchild"):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    open(S["dir"] + "/grandchild", "w").write(str(child.pid))
for kind, value in S["steps"]:
    if kind == "sleep":
        time.sleep(value)
    elif kind == "out":
        sys.stdout.write(value)
        sys.stdout.flush()
    elif kind == "err":
        sys.stderr.write(value + "\\n")
        sys.stderr.flush()
    elif kind == "exit":
        sys.exit(value)
    elif kind == "signal":
        os.kill(os.getpid(), value)
"""


def fake_tool(tmp_path: Path, steps: list, *, name: str = "llama-bench", help_text: str = BENCH_HELP,
          **extra: object) -> Path:
    """An executable that behaves like llama.cpp's tool: --help, --version, then ``steps``."""
    scenario = json.dumps({"dir": str(tmp_path), "help": help_text, "steps": steps, **extra})
    path = tmp_path / name
    path.write_text(FAKE_TOOL.format(python=sys.executable, scenario=scenario), encoding="utf-8")
    path.chmod(0o755)
    return path


def row_lines(*rows: dict) -> list:
    return [["out", json.dumps(r) + "\n"] for r in rows]
