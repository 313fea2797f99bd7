"""Real serving engines as the reference: vLLM on the lent GPU (model folders, offline step timing, `vllm bench
serve`, kernel microbenchmarks, the comparison with roofline's prediction) and published benchmark runs on other GPUs
replayed on roofline's model (`public`)."""
