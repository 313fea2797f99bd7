"""Real serving engines on the GPU: vLLM first (model folders, offline step timing, `vllm bench serve`, kernel
microbenchmarks), their results files and the comparison with roofline's prediction."""
