"""Running a core job (a plain generator) on a worker thread with superqt's signal set: progress,
result, error, aborted and finished last."""
