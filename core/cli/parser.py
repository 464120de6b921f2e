"""The command line's parser: every command and its options (the commands run in ``cli.main``;
compare, fit, measure, placement and serving options come from their own modules)."""

from __future__ import annotations

import argparse
from typing import NoReturn

from rooflab.core import __version__
from rooflab.core.cli.args import add_engine_options, add_host_options, dtype_name, folder_name, int_list, number_in
from rooflab.core.values.efficiency import FACTOR_RANGE
from rooflab.core.values.machine import BANDWIDTH_RANGE, FLOPS_RANGE, MEMORY_RANGE
from rooflab.core.values.workload import MAX_BATCH, MAX_TOKENS

GB = 1e9


class _Parser(argparse.ArgumentParser):
    """A bad argument is one line, like every other error (the usage is one --help away).
    Sub-commands' parsers are made of this class too (argparse's default)."""

    def error(self, message: str) -> NoReturn:
        from rooflab.core.io.textfile import printable

        # "unrecognized arguments: ..." quotes what was typed as it was typed
        self.exit(2, f"{printable(f'{self.prog}: error: {message}', 4000)} (see {self.prog} --help)\n")


def add_model_options(p: argparse.ArgumentParser, *, positional: bool = False, required: bool = True) -> None:
    if positional:
        p.add_argument("model", metavar="MODEL", help="a .gguf file, config.json, model folder or catalogue key")
    else:
        p.add_argument("--model", required=required, metavar="MODEL",
                       help="a .gguf file, config.json, model folder or catalogue key")
    p.add_argument("--weights", metavar="FORMAT",
                   help="weight format for config-defined models: fp32, bf16, fp16, q8_0, q6_k, q5_k_m, "
                        "q4_k_m, q4_k_s, q4_0, mxfp4")


def add_machine_options(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    p.add_argument("--machine", required=required, metavar="MACHINE",
                   help="a preset key, a saved profile, 'measured', or a profile .json path")
    p.add_argument("--bandwidth", type=number_in(BANDWIDTH_RANGE[0] / GB, BANDWIDTH_RANGE[1] / GB, "GB/s"),
                   metavar="GB/s", help="override memory bandwidth")
    p.add_argument("--peak-tflops", type=number_in(FLOPS_RANGE[0] / 1e12, FLOPS_RANGE[1] / 1e12, "TFLOP/s"),
                   metavar="T", help="override peak TFLOP/s (compute dtype; a CPU's default is its int8 path, "
                                                      "4x its FP32 FMA rate)")
    p.add_argument("--memory-gb", type=number_in(MEMORY_RANGE[0] / GB, MEMORY_RANGE[1] / GB, "GB"), metavar="G",
                   help="override memory size (10^9 bytes)")
    add_host_options(p)
    p.add_argument("--dtype", dest="compute_dtype", metavar="DTYPE", type=dtype_name,
                   help="compute dtype whose peak applies (fp32, fp16, bf16, ...); default: the machine's")
    p.add_argument("--bandwidth-efficiency", type=number_in(*FACTOR_RANGE), metavar="F",
                   help="share of the bandwidth an engine reaches (predictions are ceilings at 1.0)")
    p.add_argument("--compute-efficiency", type=number_in(*FACTOR_RANGE), metavar="F",
                   help="share of the peak FLOP/s an engine reaches")
    p.add_argument("--step-overhead-ms", type=number_in(0, 59_999, "ms"), metavar="MS",
                   help="fixed time added to every forward pass")
    p.add_argument("--calibrated", action="store_true",
                   help="apply efficiency factors fitted from this model's own measurements on this machine")
    p.add_argument("--ceiling-only", action="store_true",
                   help="leave out the expected figures a calibration of the machine gives")


def add_workload_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt", type=int, default=None, help="prompt tokens (default 2048)")
    p.add_argument("--answer", type=int, default=None, help="answer tokens (default 256)")
    p.add_argument("--context", type=int, default=None, help="tokens already in the cache (default 0)")
    p.add_argument("--batch", type=int, default=None, help="sequences decoded together (default 1)")
    p.add_argument("--kv-type", default="f16", help="KV-cache type: f32, f16, bf16, q8_0, q4_0, ... (default f16)")
    p.add_argument("--draft-tokens", type=int, default=0, help="speculative decoding: drafts per verify")
    p.add_argument("--acceptance", type=float, default=0.7, help="speculative decoding: acceptance rate")
    p.add_argument("--offload", type=float, default=0.0, metavar="FRACTION",
                   help="share of the weights on the machine's second, slower memory (as whole layers)")
    add_engine_options(p)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rooflab", description="Predict how fast a language model runs on a machine; then measure it.")
    parser.add_argument("--version", action="version", version=f"rooflab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("inspect", help="tensor table, bytes read per token and KV cache of a model")
    add_model_options(p, positional=True)
    p.add_argument("--kv-type", default="f16", help="KV-cache type for kv_bytes_per_token (default f16)")
    p.add_argument("--json", action="store_true", help="machine-readable output (stable keys)")
    p.add_argument("--tensors", action="store_true", help="list every tensor (text output)")

    p = sub.add_parser("predict", help="prefill, decode, batching and memory predictions")
    add_model_options(p)
    add_machine_options(p)
    add_workload_options(p)
    p.add_argument("--contexts", type=int_list(0, MAX_TOKENS),
                   help="contexts for the decode table (default 0,4096,32768)")
    p.add_argument("--batches", type=int_list(1, MAX_BATCH),
                   help="batch sizes for the decode table (default 1,4,16,64)")
    p.add_argument("--prompts", type=int_list(1, MAX_TOKENS), help="prompt lengths for the prefill table")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="machine-readable output (stable keys)")
    out.add_argument("--csv", action="store_true", help="decode and prefill rows as CSV")
    p.add_argument("--ops", action="store_true",
                   help="every operation of the prefill and decode step on the roofline (with --json: an 'ops' list)")
    from rooflab.core.cli.placement import add_placement_options

    add_placement_options(p)
    from rooflab.core.cli.serve import add_serve_options

    add_serve_options(p)
    from rooflab.core.cli.compare import add_compare_parser
    from rooflab.core.cli.fit import add_fit_parser

    add_compare_parser(sub)
    add_fit_parser(sub)

    p = sub.add_parser("models", help="the built-in model catalogue")
    p.add_argument("--search", metavar="TEXT", help="only models whose key, name, description or Hugging Face "
                                                    "repository hold every word of TEXT")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("machines", help="machine presets and saved profiles")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("gui", help="open the desktop application")
    p.add_argument("model", nargs="?", metavar="MODEL", help="model to open (default: the catalogue default)")
    p.add_argument("--weights", metavar="FORMAT", help="weight format for config-defined models")
    p.add_argument("--machine", metavar="MACHINE", help="machine to select")
    p.add_argument("--screenshot", metavar="FILE.png", help="render the window to FILE.png and exit")

    p = sub.add_parser("report", help="write the plots (PNG) and series (CSV) without a window")
    add_model_options(p)
    add_machine_options(p)
    add_workload_options(p)
    p.add_argument("--out", required=True, metavar="DIR", type=folder_name, help="folder for the report files")
    add_placement_options(p)

    try:
        from rooflab.core.cli.measure import add_measure_parser
    except ImportError:  # pragma: no cover - measurement package absent in a stripped build
        pass
    else:
        add_measure_parser(sub)
    return parser
