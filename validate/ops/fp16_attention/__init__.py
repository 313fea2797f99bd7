"""Family "fp16_attention": GQA decode attention over a bf16 KV cache, split-K flash-decoding.

The kernels are validate.common.flash_decode's (split, then merge; xquant's materialized path runs them too):
one program per KV head of one sequence and context split, its GROUP query heads at once.
Bytes and FLOPs of a case are the roofline's own "attention" op (validate.model.predict), so the measured
bandwidth and the prediction count the same work.
"""
