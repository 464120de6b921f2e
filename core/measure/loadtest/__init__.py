"""The load test: a running OpenAI-compatible server measured under concurrency and request
rates (not the serving simulation, which is ``predict.serving``)."""
