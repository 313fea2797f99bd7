"""What the kernel families share: the timing harness, Triton helpers, the quantized-storage layouts roofline
counts, the split-K flash-decoding kernels, torch references and testing helpers, sm_90 compile checks."""
