"""Compute-side microbenchmarks (torch only), each the lab's definition so the figures compare:

  gemm_peak  M = N = K = 8192 random matrices per dtype, 2 M N K / time (validate/ops/ceilings/cases.py _run_gemm):
             bf16 / fp16 torch.matmul, fp8 e4m3 torch._scaled_mm (unit scales, bf16 out; compute capability >= 8.9),
             tf32 and fp32 torch.matmul of fp32 under float32 matmul precision 'high' / 'highest'
  gemm       F.linear bf16 at the decode and prefill shapes of the catalogue models (M tokens x K -> N), weights
             rotated through ceil(4 L2 / weight bytes) copies (at most 16) so none is read from L2 (micro.gemm_grid)
  flash      causal SDPA, batch 1, 32 query / 8 KV heads (enable_gqa), per head dim and prompt P:
             FLOPs 4 H D P (P + 1) / 2 (micro.flash_prefill)
  decode     one-query SDPA over a cache of L tokens (enable_gqa): KV bytes 2 B Hkv L D x 2 (micro.decode_attention)
  grouped    torch._grouped_mm of Mixtral-8x7B-sized expert layers (w13 [E, 2 I, d], w2 [E, d, I]) at decode
             batches, each layer with its own random top-2 routing; bytes: mean active experts x bytes per expert
             (validate/clients/step_costs_gpu.py h3_moe, the grouped calls alone)
(the sustained rates: bench_sustained.py)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from roofline.calibrate.bench import Bench

HEADS, KV_HEADS = 32, 8
# expert layers (each its own uniform random top-2 routing) per timed call: the mean active experts of a batch then
# sits nearer its expectation E (1 - (1 - k/E)^B) than one draw's (the lab's probe drew 2 layers from its router)
ROUTED_LAYERS = 4
EXPERT_STD = 0.02


def _matmul_inputs(b: Bench, dtype: str, size: int):
    """(call, label) of one size^3 GEMM of `dtype`, or (None, why) when the device or torch lacks it."""
    if dtype in ("bf16", "fp16"):
        tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
        a, c = b.randn(size, size, dtype=tdt), b.randn(size, size, dtype=tdt)
        return (lambda: torch.matmul(a, c)), "matmul"
    if dtype in ("tf32", "fp32"):
        if dtype == "tf32" and b.device != "cuda":
            return None, "tf32 is a CUDA tensor-core mode"
        a, c = b.randn(size, size, dtype=torch.float32), b.randn(size, size, dtype=torch.float32)
        precision = "high" if dtype == "tf32" else "highest"

        def mm():
            torch.set_float32_matmul_precision(precision)
            return torch.matmul(a, c)
        return mm, f"matmul precision {precision}"
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None, f"torch {torch.__version__} has no torch._scaled_mm / float8_e4m3fn"
    if b.device != "cuda" or torch.cuda.get_device_capability() < (8, 9):
        return None, "fp8 GEMM needs a CUDA device of compute capability >= 8.9"
    a = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn)
    c = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
    one = torch.tensor(1.0, device="cuda")
    return (lambda: torch._scaled_mm(a, c, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), "_scaled_mm"


def gemm_peak(b: Bench, dtypes=("bf16", "fp16", "fp8", "tf32", "fp32")) -> None:
    """One row per dtype the device runs: 2 size^3 / time of a square GEMM."""
    size = b.scale.gemm_size
    for dtype in dtypes:
        if b.late(f"gemm_{dtype}"):
            return
        call, label = _matmul_inputs(b, dtype, size)
        if call is None:
            b.skip(f"gemm_{dtype}", label)
            continue
        try:
            call()
            b.timer.sync()
        except RuntimeError as err:
            b.skip(f"gemm_{dtype}", f"{label} failed: {str(err).splitlines()[0][:100]}")
            continue
        width = {"fp8": 1, "bf16": 2, "fp16": 2}.get(dtype, 4)
        s = b.timer.do_bench_s(call)
        b.add("gemm_peak", f"gemm_{dtype}_{size}", s, 2 * size * size * width + 2 * size * size, 2 * size ** 3,
              dtype=dtype, size=size, call=label)
        torch.set_float32_matmul_precision("highest")
        del call
        b.release()


def gemm_grid(b: Bench) -> None:
    """bf16 F.linear rows at every (M, N, K) of the scale's tokens x model shapes."""
    for n, k in b.scale.gemm_shapes:
        if b.late(f"gemm_n{n}_k{k}"):
            return
        weight_bytes = n * k * 2
        copies = b.copies(weight_bytes, most=16)
        ws = [b.randn(n, k) for _ in range(copies)]
        for m in b.scale.gemm_tokens:
            x = b.randn(m, k)
            s = b.timer.per_call_s(lambda x=x, ws=ws: [F.linear(x, w) for w in ws], calls=copies, reps=b.scale.reps)
            b.add("gemm", f"gemm_m{m}_n{n}_k{k}", s, (n * k + m * k + m * n) * 2, 2 * m * n * k, m=m, n=n, k=k,
                  dtype="bf16", copies=copies)
        del ws
        b.release()


def _sdpa(q, k, v, causal: bool):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def flash(b: Bench) -> None:
    """Causal prefill attention rows per head dim and prompt."""
    for d, prompts in b.scale.flash.items():
        for p in prompts:
            if b.late(f"flash_d{d}_p{p}"):
                return
            q = b.randn(1, HEADS, p, d)
            k, v = b.randn(1, KV_HEADS, p, d), b.randn(1, KV_HEADS, p, d)
            s = b.timer.per_call_s(lambda q=q, k=k, v=v: _sdpa(q, k, v, True), reps=b.scale.reps)
            b.add("flash", f"flash_causal_d{d}_p{p}", s, (q.numel() + k.numel()) * 2 * 2,
                  4 * HEADS * d * (p * (p + 1) // 2), head_dim=d, prompt=p, heads=HEADS, kv_heads=KV_HEADS)
            del q, k, v
        b.release()


def decode_attention(b: Bench) -> None:
    """One-query attention rows over (batch, context) caches, inputs rotated past L2."""
    d = 128 if b.device == "cuda" else 64
    for batch, n in b.scale.decode:
        if b.late(f"decode_b{batch}_l{n}"):
            return
        kv_bytes = 2 * batch * KV_HEADS * n * d * 2
        copies = b.copies(kv_bytes, most=16)
        sets = [(b.randn(batch, HEADS, 1, d), b.randn(batch, KV_HEADS, n, d), b.randn(batch, KV_HEADS, n, d))
                for _ in range(copies)]
        s = b.timer.per_call_s(lambda sets=sets: [_sdpa(q, k, v, False) for q, k, v in sets], calls=copies,
                               reps=2 * b.scale.reps, warmup=3)  # micro.decode_attention: 3 warm, 20 timed replays
        b.add("decode_attention", f"decode_attn_b{batch}_l{n}", s, kv_bytes, 4 * batch * HEADS * n * d,
              batch=batch, context=n, head_dim=d, heads=HEADS, kv_heads=KV_HEADS, copies=copies)
        del sets
        b.release()


def grouped_gemm(b: Bench) -> None:
    """torch._grouped_mm rows of an expert layer's w13 and w2 at the scale's decode batches (random top-2)."""
    if not hasattr(torch, "_grouped_mm"):
        b.skip("grouped_gemm", f"torch {torch.__version__} has no torch._grouped_mm")
        return
    experts, d, inter = b.scale.moe_dims
    layer_bytes = experts * 3 * d * inter * 2
    count = ROUTED_LAYERS
    while count > 1 and count * layer_bytes > b.free_bytes() // 2:
        count //= 2
    if count * layer_bytes > b.free_bytes() // 2:
        b.skip("grouped_gemm", f"an expert layer ({layer_bytes / 1e9:.1f} GB) does not fit half the free memory")
        return
    # the lab's expert weights are N(0, 0.02) (validate/clients/decoder.py layer_weights, INIT_STD), its token rows
    # N(0, 1): the same values here, as a kernel's power and so its clock follow the bits it moves
    layers = [(b.randn(experts, 2 * inter, d, std=EXPERT_STD), b.randn(experts, d, inter, std=EXPERT_STD))
              for _ in range(count)]
    gen = torch.Generator().manual_seed(0)
    for batch in b.scale.moe_batches:
        if b.late(f"grouped_b{batch}"):
            break
        routed = []
        for _ in layers:
            picks = torch.stack([torch.randperm(experts, generator=gen)[:2] for _ in range(batch)]).reshape(-1)
            counts = torch.bincount(picks, minlength=experts)
            offs = torch.cumsum(counts, 0).to(torch.int32).to(b.device)
            routed.append((b.randn(2 * batch, d), b.randn(2 * batch, inter), offs, int((counts > 0).sum())))
        try:
            for (w13, w2), (xs, ys, offs, _) in zip(layers, routed, strict=True):
                torch._grouped_mm(xs, w13.transpose(-2, -1), offs=offs)
                torch._grouped_mm(ys, w2.transpose(-2, -1), offs=offs)
            b.timer.sync()
        except (RuntimeError, NotImplementedError) as err:
            b.skip("grouped_gemm", f"torch._grouped_mm failed: {str(err).splitlines()[0][:100]}")
            break
        for part, index in (("w13", 0), ("w2", 1)):
            def fn(routed=routed, index=index, layers=layers):
                for (w13, w2), (xs, ys, offs, _) in zip(layers, routed, strict=True):
                    torch._grouped_mm(xs if index == 0 else ys, (w13 if index == 0 else w2).transpose(-2, -1),
                                      offs=offs)
            s = b.timer.per_call_s(fn, calls=len(layers), reps=b.scale.reps)
            active = sum(r[3] for r in routed) / len(layers)
            per_expert = (2 * inter if part == "w13" else inter) * d * 2
            b.add("grouped_gemm", f"grouped_{part}_b{batch}", s, int(active * per_expert),
                  2 * 2 * batch * per_expert // 2, part=part, batch=batch, active_experts=active,
                  bytes_per_expert=per_expert)
    layers = None
    b.release()
