"""Measurements in torch (CPU or an accelerator): the torch plumbing, building a random-weight or
local model, the timed passes and the prefill / decode / batch sweeps. torch and transformers
are imported inside functions only."""
