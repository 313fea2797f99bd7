"""Family "xquant": XQuant decode (seed 000 §3) on the GPU, fused and materialized, and XQuant-CL's
accumulator update, each case predicted from the roofline op that counts the same work.

Variants (kernels in kernel.py, launched by launch.py; storage as roofline's TensorQuant counts it, `layout_bytes`):
  fused         GQA, Llama-3.1-8B heads (32 q, 8 kv, d_h 128, latents d/g = 1024): dequant + remat +
                RoPE + split-K attention in one kernel: roofline op "attention" of xquant:bits=2
                (the remat ExtraOp merged into it)
  materialized  the same remat writing bf16 K, V, then validate.common.flash_decode reading them: "remat" + "attention"
                of xquant:bits=2,fused=false
  materialized_cublas  the same work as materialized in four kernels: dequant_kernel (bf16 latents), one batched
                torch.bmm (cuBLAS) writing K, V in flash-decoding's strided layout, rope_kernel (K in place), then
                flash-decoding (launch.cublas_decode); predicted by families.xquant.cublas_ops (cublas_predict.py)
  mha_fused     MHA, Llama-2-7B heads (32 q, 32 kv, X 4096 wide, W_k, W_v 4096 x 4096)
  acc_update    XQuant-CL accumulator (d = 4096) += dequant(delta) (GQA: @ U_kv^T), e_b = 4 or 16 bits
fused's kernel has a second form, launch.decode(variant="shared") (shared.py: HPP KV heads per program share each
dequantized latent tile), timed against it by variant_bench.py and predicted by shared_model.py
(validate/notes/2026-11-23-xquant-shared-kernel-launches.md).
Per sequence, step and layer (fused GQA, context L, e = 2): bytes = 576 L (+ 1760 (L mod 128) of fp16
window) + 4 MiB of Sigma B^T (shared by the batch); FLOPs = 4 L (d/g)^2 + 2 H L (2 d_h) + ..., so the
op is memory-bound only while B L is a few hundred tokens: `crossover` locates that point.
"""
