"""The machine benchmark: this machine's bandwidth and peak FLOP/s, measured, checked for
disturbance and kept."""
