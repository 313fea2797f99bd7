"""Family "quant_attention": GQA decode attention over a quantized KV cache, dequantization fused.

The cache is stored exactly as roofline's TensorQuant counts it (validate.common.recipes: codes, scales,
zeros, fp16 sinks and window, bytes by part = `layout_bytes`). `decode` (kernel.py) runs the fast kernel
(tiled_*.py) on caches stored in a tiled layout (cache.cache_tilings: every bench preset at head_dim 128;
same bytes, bits placed for it; QUANT_NOTES.md) and plain.py's on the plain layout (any other recipe or shape).

Plain-layout kernel: one program covers one KV head of one sequence (its
GROUP query heads, padded to >= 16 rows for tl.dot) over one part of the context; two launches of
quant_decode_kernel cover the parts: TAIL=False the chunks of the middle, where both K and V are
quantized (packed bytes unpacked in registers with tl.interleave, scales loaded once per group), TAIL=True
the "tail" (the sinks, the fp16 windows and the tokens where only one of K, V is quantized, dequantized
element by element). Each part writes the flash-decoding partials m, l, acc (log2 domain, as
flash_decode) and validate.common.flash_decode.reduce_kernel merges them.

Per group of G elements with dequantization x = a*u + c (common/quantize.py), the middle applies (a, c):
  outer groups (the group runs across the reduction: KIVI's K over tokens, per-token V over channels):
      per element, x = a*u + c, then the dot product  (2 FLOPs per element);
  inner groups (along the reduction, InnerQ §4.4; SKVQ's K): once per group and query row,
      s_t = sum_g a_gt (q_g . u_gt) + c_gt sum(q_g),   o_d = a_d (p . u_d) + c_d sum(p)   (2/G per element
      and row), the V block being exactly one group of G tokens.
SKVQ's channel reorder is folded into W_q and W_o: the kernel attends in the stored (permuted) order.
"""
