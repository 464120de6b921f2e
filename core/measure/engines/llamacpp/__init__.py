"""llama.cpp in this process (llama-cpp-python's low-level API): the binding layer, the plan and
memory check, the timed loops, and the measurement job built from them."""
