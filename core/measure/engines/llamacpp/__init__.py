"""llama.cpp through llama-cpp-python's low-level API: the binding layer, the plan and memory
check, the timed loops, the measurement job built from them (run in whatever process calls it),
and that job run in a child process (``in_child``), as the window and the command line run it."""
