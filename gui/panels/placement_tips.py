"""The Placement group's tooltips: each flag in llama.cpp's words and ``rooflab predict``'s."""

from __future__ import annotations

TIPS = {
    "gpu_layers": "Layers on the GPU: llama.cpp's -ngl N (--n-gpu-layers; rooflab predict --gpu-layers N). "
                  "The device takes the last N − 1 repeating layers and the output layer; \"all\" (or any "
                  "number at or above the layers + 1, as llama.cpp reads -ngl 99) puts every layer there, the "
                  "rest run from host memory. A number is a placement by hand: not fitted, even when it does "
                  "not fit. This is where the weights sit: the share in host memory follows from it.",
    "gpu_auto": "Leave the GPU layers to rooflab: every layer on the device when it holds the model, else the "
                "most that fit around the experts on the CPU and the KV cache's place (auto-fit, as llama.cpp's "
                "fit does). The greyed number shows what auto placed; unticking starts from it.",
    "cpu_moe_auto": "Leave the experts on the CPU to auto-fit (it moves experts to the CPU before whole layers). "
                    "Unticked: exactly the number beside it, 0 for none.",
    "cpu_moe": "Keep the routed experts of the first N layers in host memory, computed by the CPU: llama.cpp's "
               "--n-cpu-moe N (rooflab predict --cpu-moe N). Attention, router and shared experts stay on the "
               "layer's device. With GPU layers on auto, rooflab fits the GPU layers around them. Only for a "
               "mixture-of-experts model.",
    "kv_on_device": "Unchecked: llama.cpp's --no-kv-offload (-nkvo; rooflab predict --no-kv-offload): the KV "
                    "cache stays in host memory and attention over it runs on the CPU. With GPU layers on "
                    "auto, rooflab fits the rest around it.",
    "devices": "Identical devices sharing the model (rooflab predict --devices N): llama.cpp's layer split "
               "across N GPUs, or vLLM's --tensor-parallel-size N. Every layer is on the devices, so the "
               "controls above wait. The numbers and every chart are the devices' (each device's memory, the "
               "link's share of each step). Needs an interconnect.",
    "parallel": "How the devices share the model (rooflab predict --parallel): layer — llama.cpp's "
                "--split-mode layer, consecutive layers per device, a token passes through them in turn "
                "(room, no speed-up for one sequence); tensor — every layer cut N ways (vLLM "
                "--tensor-parallel-size; llama.cpp's --split-mode row comes closest), two all-reduces per "
                "layer over the link.",
    "interconnect": "The link between the devices, bandwidth per direction (rooflab predict --interconnect "
                    "GB/s): the machine's own as its preset states it, or any link a preset states (NVLink, "
                    "PCIe, Thunderbolt...). Its latency stays the machine's kind of link.",
}
MODES = (("layer", "layer split"), ("tensor", "tensor parallel"))
