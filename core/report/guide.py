"""The guide: one paragraph per quantity rooflab shows, each with its formula and a worked figure
from the course lessons (shared/reference: "FLOPs, Bandwidth, and the Roofline Model" and
"Prefill, Decode and Why Memory Bandwidth Rules"). The window's Help > Guide renders it (F1 on a
figure and each chart's "How is this computed?" open it at that figure's section); the text is
plain, so the command line and the docs can print it as it is.

``topic(key)`` maps what the window knows a figure by (a numbers-panel row's key, a chart's
key) to its section."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Section:
    """One quantity: its anchor, its name, its formula and one paragraph on what it means."""

    key: str
    title: str
    formula: str
    text: str


SYMBOLS = ("N parameters multiplied per token; W weight bytes one token reads; k KV-cache bytes per token of "
           "context; t tokens already in the cache; n prompt tokens; b sequences decoded together; B memory "
           "bandwidth, bytes/s; C peak arithmetic, FLOP/s. rooflab works in SI units: bytes, FLOP, seconds "
           "(GB = 10^9 bytes, GiB = 2^30).")

SECTIONS: tuple[Section, ...] = (
    Section("ttft", "Time to first token (TTFT)",
            "TTFT = prefill(n) = max(2 N n / C + attention / C, W / B)",
            "The wait before the first token appears: one prefill pass over the whole prompt, which reads every "
            "weight once and does 2 N n FLOP of multiplies plus attention's n² work. A long prompt makes it "
            "compute-bound, a short one bandwidth-bound. Queueing and tokenisation are left out. Worked: an 8B "
            "model's 8,000-token prompt on an RTX 4090 at half its 165.2 TFLOP/s (FP32 accumulate, the lesson's "
            "figure) takes about 1.6 s; on an 8-core "
            "desktop CPU (1.024 TFLOP/s) about 251 s, which is why prompts dominate on a CPU."),
    Section("tpot", "Time per output token (TPOT)",
            "TPOT = mean decode step over the answer = (end to end - TTFT) / (answer - 1)",
            "The gap between later tokens: the mean decode step while the cache grows from context + prompt to "
            "context + prompt + answer - 1. The first output token comes out of prefill, hence the - 1. Its "
            "inverse is the decode rate a user sees. Worked: a first token at 12.0 s and the 400th at 30.0 s give "
            "(30.0 - 12.0) / 399 = 45.1 ms, or 22.2 tokens/s; dividing 400 by 30 s (13.3) charges prefill to "
            "decode and is neither figure."),
    Section("end_to_end", "End to end",
            "end to end = TTFT + TPOT x (answer - 1)",
            "The whole request as a stopwatch sees it, prefill and every decode step. Shortening the prompt acts "
            "on the first term only, fewer bytes per token on the second only: read which term is large before "
            "choosing a fix."),
    Section("ceiling", "Decode ceiling",
            "tokens/s per sequence <= B / (W + k t)",
            "The fastest one sequence can generate: every decode step reads the weights a token uses and the "
            "whole cache, and nothing else is given any time. It is a ceiling, not a forecast; an engine reaches "
            "a share of it. Worked: Qwen3-8B Q4_K_M reads W = 4.67 GB; with 4,096 tokens of FP16 cache "
            "(147,456 bytes each, 0.60 GB) a 273 GB/s machine caps it at 273 / 5.28 = 51.7 tokens/s."),
    Section("prompt_rate", "Prompt rate",
            "prompt tokens/s = batch x n / TTFT",
            "Prompt tokens processed per second of prefill, the figure llama-bench reports as pp. It climbs with "
            "the prompt while prefill is bandwidth-bound (one read of the weights serves more tokens), flattens at "
            "the compute limit, and falls again on long prompts where attention's n² work grows faster than n."),
    Section("n_star", "Prefill crossover n*",
            "n* ~= W C / (2 N B)",
            "The prompt length where prefill turns from bandwidth-bound to compute-bound: the two clocks of the "
            "pass are equal, 2 N n / C = W / B. Shorter prompts mostly pay for reading the weights once; longer "
            "ones pay for arithmetic. rooflab solves the full clocks (output head, the cache a prompt writes, a "
            "batch), so its n* differs a little from this batch-1 form. Worked: Qwen3-0.6B in FP32 on a CPU, "
            "W = 2.384 GB, C ~= 741 GFLOP/s, 2 N = 0.88 GFLOP, B ~= 27 GB/s: n* ~= 74 tokens."),
    Section("batch_crossover", "Batch crossover b*",
            "2 N b / C = (W_b + b k t) / B;  without a cache b* = (C / B) x bytes per weight / 2",
            "The batch where a decode step turns compute-bound: up to it every extra sequence shares the one "
            "read of the weights nearly for free and the total rate grows with b; past it the total stops growing "
            "and each sequence slows. Each sequence's cache moves it to larger batches; when the caches grow as "
            "fast as the arithmetic there is none. Worked: an 8B model at 4.5 bits per weight on an RTX 4090 "
            "(balance 164 at the lesson's FP32-accumulate 165.2 TFLOP/s) gives 164 x 0.5625 / 2 ~= 46 sequences; "
            "92 at the FP16 accumulate llama.cpp's kernels run at (balance 328)."),
    Section("step_bytes", "The decode step: (W + b k t) / B",
            "step = max((W_b + b k t) / B, 2 N b / C);  per sequence 1 / step, total b / step",
            "The memory clock of one decode step for b sequences: the weights once (W_b, the experts the batch "
            "touches for a mixture of experts) plus every sequence's cache, divided by the bandwidth. The other "
            "clock is the arithmetic, 2 N b / C; the slower one is the step. Worked: Qwen3-8B with 16 sequences of "
            "4,096 tokens at 273 GB/s reads 4.67 + 16 x 0.60 = 14.3 GB a step: 19.0 tokens/s each, 305 in total."),
    Section("kv", "KV cache",
            "k = 2 x layers x kv_heads x head_dim x bytes per value;  cache read per step = k t",
            "Keys and values of every earlier token, in every layer: written once, read by every later step. It "
            "costs memory for the context allocated and time for the context in use. Sliding-window layers hold "
            "only their window. Worked: Llama 3.1 8B (32 layers, 8 KV heads of 128) holds 131,072 bytes a token "
            "at FP16; at 32,768 tokens that is 4.29 GB a step, about the size of its 4-bit weights, and halves "
            "the decode ceiling."),
    Section("weights_read", "W: weight bytes read per token",
            "W = the blocks' tensors + the output head + one embedding row (+ used / experts of the routed experts)",
            "What one decode token reads of the weights, from the file's tensor table rather than its size: the "
            "input embedding is a lookup (one row), the output head a full multiply, and a mixture of experts "
            "reads only the experts a token is routed to. A batch reads the union of its tokens' experts, "
            "1 - (1 - used / experts)^b of each layer's. Worked: Qwen3-8B Q4_K_M reads 4.67 GB of its 5.03 GB "
            "file; Qwen3-30B-A3B 1.92 GB of 18.56 GB."),
    Section("roofline", "The roofline",
            "attainable FLOP/s = min(C, I x B),  I = FLOP / byte moved",
            "How fast an operation of arithmetic intensity I can run: along the slanted roof it is bandwidth-bound "
            "(twice the intensity, twice the speed); past the bend it is flat at the peak. Decode at batch 1 sits "
            "far left (about 2 / bytes per weight: 1 FLOP per byte at FP16, 3.6 at 4.5 bits), a long prefill far "
            "right. Worked: an H100 at intensity 1 attains 1 x 3.35 TB/s = 3.35 TFLOP/s, 0.3 % of its 989."),
    Section("balance", "Machine balance C / B",
            "balance = C / B  (FLOP per byte)",
            "The intensity where the roofline bends: how many FLOP a kernel must do per byte before arithmetic, "
            "not memory, limits it. Work below it waits for memory. Worked: an RTX 4090 has 330.3 TFLOP/s over "
            "1,008 GB/s, about 328 FLOP per byte (FP16 at FP16 accumulate, the rate llama.cpp's kernels run at; "
            "164 at the 165.2 of FP32 accumulate); an 8-core desktop CPU with DDR5 about 46 on the int8 dot "
            "products its quantized multiplies run on (11 at FP32); an H100 SXM about 295. "
            "Decode's 1 to 4 FLOP per byte is memory-bound on all of them."),
    Section("compute_crossover", "Compute crossover",
            "compute clock = memory clock: 2 N n / C = W / B (prefill), 2 N b / C = (W_b + b k t) / B (decode)",
            "The point on a chart where a pass turns from bandwidth-bound to compute-bound: n* on the prefill "
            "chart, b* on the batching chart, the bend of the roofline. When it lies beyond what fits in memory "
            "the chart says so: the machine never reaches it for this model."),
    Section("kv_read_factor", "Cache-read factor",
            "memory clock = (W + f_kv x b k t) / (B x bandwidth efficiency)",
            "Cache bytes an engine moves per byte attention must read: 1.0 when it reads the cache once, 2.0 when "
            "it also copies the cache every step. Worked: Transformers' DynamicCache appends with a copy, so "
            "Qwen3-0.6B at about 4,100 tokens moved 2.384 + 0.940 + 0.940 = 4.26 GB a step, not 3.32, which "
            "matched the clock (a TPOT ratio of 1.79 predicted, 1.89 measured)."),
    Section("offload", "Offload",
            "time per token = W_fast / B_fast + W_slow / B_slow;  slowdown = (1 - f) + f r",
            "Layers kept in a second, slower memory (system RAM behind a GPU) are read there at its own bandwidth, "
            "one part after the other: the times add, they do not overlap. A share f of the bytes on a memory r "
            "times slower costs (1 - f) + f r: 10 % on a memory 10 times slower is 1.9 times slower overall. "
            "Worked: a 70B model at 4.5 bits (39.4 GB) with 22 GB on an RTX 4090 and 17.4 GB on DDR5 at "
            "89.6 GB/s: 21.8 + 193.9 ms, 4.64 tokens/s, against 25.6 if it all fitted."),
    Section("placement", "Placement flags",
            "-ngl N  --n-cpu-moe K  -ot PATTERN=CPU  --no-kv-offload",
            "Where llama.cpp puts each part, in its own flags: -ngl N puts the last N - 1 layers and the output "
            "layer on the GPU (N = layers + 1, or 99, puts everything there); --n-cpu-moe K keeps the routed "
            "experts of the first K layers in host memory, computed by the CPU, while attention stays on the GPU; "
            "-ot moves named tensors (part of one more layer); --no-kv-offload keeps the cache on the host. Auto "
            "placement is llama.cpp's fit: experts move first, then whole layers, until the GPU holds the rest "
            "with its reserve. A mixture of experts therefore fits where a dense model of the same size does not: "
            "a token reads few experts."),
    Section("memory", "Memory",
            "memory = weights + b x k x context + compute buffer + reserve  <=  capacity",
            "What must be resident: every weight (a mixture of experts needs all of its experts in memory, since "
            "any token may pick any of them), one cache per sequence for the whole context allocated, the engine's "
            "compute buffer and the back end's reserve. It fits when that is at most the memory; memory sold in "
            "GiB (an RTX 4090's 24 GB are 24 GiB, 25.8 GB) is shown as sold with its GB beside."),
    Section("expected", "Expected vs ceiling",
            "combined = max(m, c) + (1 - overlap) x min(m, c), with m and c at an engine's measured shares of B and C",
            "A ceiling lets nothing else take time; an engine reaches a share of each clock. A calibration (yours, "
            "or an engine's published llama-bench results) fits those shares, a fixed per-pass overhead, the "
            "cache-read factor and how far the two clocks overlap, and prices the same passes with them: the "
            "expected figure. Expect a measurement near it and below the ceiling; a gap of a factor is a "
            "symptom (offloaded layers, the wrong build, a context far larger than needed)."),
    Section("band", "The band",
            "band = 16th to 84th percentile of the expected figure over the calibration's resampled fits",
            "How sure the expected figure is: the calibration is fitted again on resampled points and the band "
            "spans the middle two thirds of what those fits expect. Its accuracy is quoted out of sample (a "
            "model, a machine or a source left out), never on the points it was fitted to."),
    Section("points", "Measured points",
            "decode 16/0/1 = kind prompt/context/batch",
            "A measured point is named by what was timed and its request: 'decode 16/0/1' is a decode step after "
            "a 16-token prompt with no earlier context at batch 1. A disturbed point was timed while something "
            "else loaded the machine and is not fitted."),
    Section("fit", "What can I run here?",
            "rank = order by (fits: all on the device > experts offloaded > layers offloaded, then expected tokens/s)",
            "Every catalogue model in its own weight format and the common GGUF ones, each placed by auto-fit as "
            "rooflab predict places it, ranked by how it fits and then by its expected decode rate per sequence "
            "(the ceiling where no calibration applies); rooflab fit prints the same rows as rooflab compare."),
)

#: what the window knows a figure by -> its section (a key that is a section's is itself)
ALIASES: dict[str, str] = {
    "expected_ttft": "expected", "expected_tpot": "expected", "expected_rate": "expected",
    "trained_context": "kv", "speculative": "tpot", "prefill": "ttft", "decode": "ceiling",
    "batching": "batch_crossover", "serving": "tpot", "balance_flop_per_byte": "balance",
}


def section(key: str) -> Section:
    """The section called ``key``; KeyError for an unknown one."""
    for s in SECTIONS:
        if s.key == key:
            return s
    raise KeyError(key)


def topic(key: str) -> str:
    """The section a figure's key opens the guide at (a numbers-panel row's, a chart's); the
    guide's top ("") for a key it does not cover."""
    key = ALIASES.get(key, key)
    return key if any(s.key == key for s in SECTIONS) else ""


def guide_text() -> str:
    """The guide as plain text: the symbols, then each section's title, formula and paragraph."""
    out = ["rooflab: what each figure means", "", SYMBOLS]
    for s in SECTIONS:
        out += ["", s.title, f"  {s.formula}", s.text]
    return "\n".join(out)
