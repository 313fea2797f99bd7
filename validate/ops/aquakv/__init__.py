"""Family "aquakv": AQUA-KV's reference decode of one predicted layer (roofline op "aquakv_reconstruct").

For the l_q quantized tokens of every sequence (rows = batch x l_q; AQUA-KV Alg. 3, per token):
    K^ = K^_prev @ W_K + b_K + deq(K codes)                      W_K [d_kv, d_kv]
    V^ = [V^_prev ; K^] @ W_V + b_V + deq(V codes)               W_V [2 d_kv, d_kv]
written in bf16. One kernel, launched twice (K, then V: the V launch reads back the bf16 K^ it needs),
gives each program a BLOCK_M x BLOCK_N tile of the output: a bf16 GEMM over the d_kv (or 2 d_kv) inputs
with fp32 accumulation, then an epilogue adding the bias and the dequantized residual a*u + c.
Traffic, exactly roofline's classes: weights W_K, b_K, W_V, b_V (bf16); kv_read the K and V codes and
norms (the fp16 sinks and buffer are attention's to read, never reconstructed); act_read K^_prev, V^_prev
and K^ (3 d_kv x 2 B per row); act_write K^, V^ (2 d_kv x 2 B per row).

Residual storage: the bytes of roofline's TensorQuant for the method (validate.common.recipes layout, one "head" of
d_kv channels per token). HIGGS (RHT + a 2-D grid of n = 2^(2b) points, one fp16 norm per
G = min(1024, d_kv) values) is replaced by a symmetric uniform grid of b bits per value with one fp16
scale per G-group, x = s (u - 2^(b-1)): the same bytes (b/8 per value + 2/G), no Hadamard transform
(roofline counts 2 d_kv log2 G vector FLOPs per token for it, 0.3% of the op's FLOPs at d_kv = 1024).
The "uniform" quantizer (asymmetric, fp16 scale and zero per group of 64) is the same layout plus zeros.
"""
