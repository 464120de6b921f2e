"""The user's own llama.cpp tools (llama-bench, llama-batched-bench): finding them, their flags and
command lines, and running them as a job."""
