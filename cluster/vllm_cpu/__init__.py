"""Real vLLM on CPU: vLLM's CPU build serving a tiny locally made model, for tests without a GPU."""
