"""``rooflab predict``'s why says where a placed token's and prompt's time go: each part in a
person's units with its share, the parts adding up to the figure on the line, the round trips
an expected figure's (crossings x 25 us) and never a ceiling's."""

from __future__ import annotations

import json
import re

import pytest

from rooflab.core.cli.main import main

UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}
PART = re.compile(r"([\d.,]+) (s|ms|µs|ns) ([^,(]+?) \(([\d.]+) %")


def _seconds(number: str, unit: str) -> float:
    return float(number.replace(",", "")) * UNITS[unit]


def _parts(out: str, label: str) -> tuple[float, dict[str, float], float]:
    """(the line's figure, seconds of each named part, the shares' sum in %) of the why's
    ``label`` line."""
    (line,) = [x.strip() for x in out.splitlines() if x.strip().startswith(label)]
    head = re.match(rf"{label} \(([\d.,]+) (s|ms|µs)\): ", line)
    assert head, line
    found = PART.findall(line[head.end():])
    return (_seconds(*head.groups()), {name.strip(): _seconds(n, u) for n, u, name, _ in found},
            sum(float(share) for *_, share in found))


def test_experts_on_the_cpu_split_the_expected_token(capsys):
    # gpt-oss-120b's experts of 24 of its 36 layers on the host: every such layer goes GPU -> CPU
    # -> GPU, 48 crossings a graph pass; a 2,048-token prompt is 4 ubatches of 512
    args = ["predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37",
            "--cpu-moe", "24"]
    assert main(args) == 0
    out = capsys.readouterr().out
    token, parts, shares = _parts(out, "Token, part by part")
    # the preset names no host CPU: an 8-core desktop, whose arithmetic bounds its experts' decode
    host = "arithmetic of the experts on the CPU"
    assert set(parts) >= {"weights on the GPU", host, "round trips", "per-step overhead"}
    # each part is printed to 3 significant digits: their sum is the figure to that rounding
    assert sum(parts.values()) == pytest.approx(token, rel=0.01)
    assert shares == pytest.approx(100, abs=1.5)
    assert parts["round trips"] == pytest.approx(48 * 25e-6, rel=0.01)
    assert "48 crossings × 25 µs)" in out
    assert parts[host] == max(parts.values())     # where an offloaded token's time goes
    prompt, parts, _ = _parts(out, "Prompt, part by part")
    assert sum(parts.values()) == pytest.approx(prompt, rel=0.01)
    assert "48 crossings × 25 µs × 4 ubatches" in out
    assert "PCIe streaming of the host's weights" in parts
    # the prompt's figure is the expected TTFT the same output prints below
    ttft = re.search(r"time to first token +([\d.,]+) (s|ms)", out)
    assert ttft and prompt == pytest.approx(_seconds(*ttft.groups()), rel=0.01)


def test_a_ceiling_has_no_round_trips(capsys):
    assert main(["predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37",
                 "--cpu-moe", "24", "--ceiling-only"]) == 0
    out = capsys.readouterr().out
    token, parts, _ = _parts(out, "Token, part by part")
    assert "The ceiling, a step at 2,048 tokens of context" in out
    assert "round trips" not in parts and "per-step overhead" not in parts
    tpot = re.search(r"at 2,048 tokens of context .* ([\d.]+) ms a step in all", out)
    assert tpot and token == pytest.approx(float(tpot.group(1)) * 1e-3, rel=0.005)   # the step the why prints


def test_the_json_holds_the_same_parts(capsys):
    args = ["predict", "--model", "gpt-oss-120b-mxfp4", "--machine", "rtx-4090", "--gpu-layers", "37",
            "--cpu-moe", "24", "--contexts", "0", "--batches", "1", "--prompts", "1"]
    assert main([*args, "--json"]) == 0
    parts = json.loads(capsys.readouterr().out)["time_parts"]
    assert parts["figures"] == "expected with llama.cpp CUDA" and parts["decode_context"] == 2048
    decode = parts["decode"]
    assert sum(p["seconds"] for p in decode["parts"]) == pytest.approx(decode["seconds"])
    assert sum(p["share"] for p in decode["parts"]) == pytest.approx(1.0)
    assert decode["crossings"] == 48 and decode["graph_passes"] == pytest.approx(1.0)
    assert parts["prefill"]["graph_passes"] == pytest.approx(4.0)
    trips = {p["key"]: p for p in decode["parts"]}["round_trips"]
    assert trips["seconds"] == pytest.approx(48 * 25e-6)
    assert main(args) == 0                                          # the text's figure is the JSON's
    token, _, _ = _parts(capsys.readouterr().out, "Token, part by part")
    assert token == pytest.approx(decode["seconds"], rel=0.005)
    assert main(["predict", "--model", "qwen3-8b-q4_k_m", "--machine", "rtx-4090", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_parts"] is None      # wholly on the GPU
