"""The application layer: what the window and the command line both ask of rooflab.

``resolve`` turns what the user named (a machine, a workload, llama.cpp's placement flags, an
engine, a calibration) into value objects; ``compare`` does the same for many models and
machines and writes their table as text; ``figures`` is the one answer for a scenario: placed
once, summarised once, every figure priced on that placement, which the numbers panel, the
charts, pins, reports and ``rooflab predict`` all read. The front ends format it; neither
rebuilds a figure from the other's output."""
