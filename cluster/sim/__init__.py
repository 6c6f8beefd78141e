"""A stand-in for `vllm serve`: same flags, same API, latencies from a performance model."""
