"""Calibrations: what a machine and an engine really reach, fitted to measured points (one model,
an engine over many, its solver and hold-out) and to published benchmark results, and the
expected figure they give a scenario. They compute; measuring lives in ``measure``."""
