"""Timing engines: a model timed in torch, llama.cpp (llama-cpp-python, run in a child process)
or the user's llama-bench, and their shared plumbing (the engine choice, child processes,
synthetic GGUFs, memory budget, planned times, rounds)."""
