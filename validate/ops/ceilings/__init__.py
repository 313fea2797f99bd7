"""Family "ceilings": the microbenchmarks that calibrate a hardware spec.

  read    a Triton kernel streams a buffer and reduces it (one fp32 partial per program): bytes = size
  copy    a Triton kernel copies a buffer: bytes = read + written = 2 x size
  gemm    torch.matmul bf16 (and torch._scaled_mm e4m3 for fp8), M = N = K = 8192: flops = 2 M N K
  launch  an empty Triton kernel launched back to back (in a CUDA graph; and from Python), per launch
`predict` gives the datasheet figure (bytes / peak bandwidth, flops / dense peak), so compare reports
the achieved fraction of peak; calibrate turns the measurements into Hardware.measured.
"""
