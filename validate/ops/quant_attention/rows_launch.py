"""The rows kernel's launcher (rows.py): its compile-time parameters, splits from the compiled kernel's
occupancy (as tiled_launch), the middle launch, tiled_kernel's tail launch and the merge."""

from __future__ import annotations

import triton

from validate.common.flash_decode import reduce_kernel, split_state
from validate.common.recipes import MODES
from validate.common.triton_helpers import interpreting
from validate.ops.quant_attention import tiled_launch
from validate.ops.quant_attention.rows import rows_decode_kernel
from validate.ops.quant_attention.tiled_dequant import KINDS
from validate.ops.quant_attention.tiled_kernel import fast_decode_kernel
from validate.ops.quant_attention.tiled_tail import TAIL_TOKENS

STEP_SUBTILES = 4  # sub-tiles of R tokens per step at least (a step: one softmax max over its tokens)
NUM_WARPS, NUM_STAGES = 2, 2  # warps split the R = 32 token rows of a sub-tile: 16 rows (one MMA's M) each

_RESIDENT: dict = {}  # (constexprs, warps, stages, device) -> programs per SM, from the compiled kernel


def plan(r, tk, tv, heads: int, kv_heads: int, dim: int, emu: bool | None = None, nsub: int = STEP_SUBTILES) -> dict:
    """rows_decode_kernel's compile-time parameters for recipe r stored with tilings (tk, tv); NSUB sub-tiles a
    step: at least a whole chunk of each tiling (F sub-tiles along tokens, 2 for CVT) and `nsub`."""
    group = heads // kv_heads
    chunks = [8 // t.planes[0] for t, til in ((r.k, tk), (r.v, tv)) if til.kind in ("TK", "TV")]
    need = max([*chunks, 2 if tv.kind == "CVT" else 1])
    if tk.rows != tv.rows:
        raise ValueError("tiling: K and V sub-tiles differ")
    out = {"KV_HEADS": kv_heads, "GROUP": group, "HP": max(16, triton.next_power_of_2(group)),
           "NSUB": max(need, nsub), "D": dim, "R": tk.rows, "EMU": interpreting() if emu is None else emu}
    for name, t, til in (("K", r.k, tk), ("V", r.v, tv)):
        out.update({f"{name}_KIND": KINDS[til.kind], f"{name}_A": t.planes[0], f"{name}_B": t.planes[1],
                    f"{name}_G": t.group, f"{name}_MODE": MODES[t.mode], f"{name}_OFF": t.levels // 2})
    return out


def signature(r) -> dict:
    """validate.common.sm90 signature of rows_decode_kernel for recipe r."""
    sig = {"q_ptr": "*bf16"}
    for x, t in (("k", r.k), ("v", r.v)):
        meta = "*fp16" if t.meta == "fp16" else "*fp8e4nv"
        sig.update({f"{x}c": "*u8", f"{x}c16": "*i16", f"{x}s": meta, f"{x}z": meta})
    sig.update({"m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "qk_scale": "fp32"})
    for name in ("nq_k", "nq_v", "nq_mid", "chunk", "num_parts"):
        sig[name] = "i32"
    return sig


def _middle_args(args: tuple) -> tuple:
    """rows_decode_kernel's arguments out of tiled_launch._args (which carries sinks and windows too)."""
    q, kc, kc16, ks, kz, _, _, vc, vc16, vs, vz, _, _, m, l_, acc, scale, _, nq_k, nq_v, _, _, nq_mid = args
    return q, kc, kc16, ks, kz, vc, vc16, vs, vz, m, l_, acc, scale, nq_k, nq_v, nq_mid


def rows_decode(q, cache, num_splits: int | None = None, out=None, work: dict | None = None,
                num_warps: int = NUM_WARPS, num_stages: int = NUM_STAGES, nsub: int = STEP_SUBTILES,
                waves: int = tiled_launch.WAVES):
    """kernel.decode through rows_decode_kernel for a cache stored tiled: q [B, HQ, D] bf16 -> out [B, HQ, D]."""
    import torch

    batch, heads, dim = q.shape
    k, v = cache.k, cache.v
    kv_heads = k.tensors["codes"].shape[1]
    ce = plan(cache.recipe, k.tiling, v.tiling, heads, kv_heads, dim, nsub=nsub)
    tail_ce = tiled_launch.plan(cache.recipe, k.tiling, v.tiling, heads, kv_heads, dim)
    step = ce["NSUB"] * ce["R"]
    launch = {"num_warps": num_warps, "num_stages": num_stages}
    nq_mid = min(k.nq, v.nq) // step * step
    tail_len = cache.context - nq_mid
    if num_splits is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
        slots = tiled_launch.DEFAULT_RESIDENT
        key = (tuple(sorted(ce.items())), num_warps, num_stages, str(q.device))
        if q.is_cuda and nq_mid:
            if key not in _RESIDENT:  # compile (no launch) to read registers and shared memory
                kernel = rows_decode_kernel.warmup(*_middle_args(tiled_launch._args(q, k, v, None, None, dim, nq_mid)),
                                                   step, 1, **ce, grid=(1,), **launch)
                kernel._init_handles()
                _RESIDENT[key] = tiled_launch.resident(kernel.n_regs, kernel.metadata.shared, num_warps)
            slots = _RESIDENT[key]
        num_splits = tiled_launch.choose_splits(batch * kv_heads, nq_mid, sms, step, slots, waves)
    chunk, num_mid = tiled_launch.split_plan(nq_mid, step, num_splits) if nq_mid else (step, 0)
    num_parts = num_mid + triton.cdiv(tail_len, TAIL_TOKENS.value)
    work = split_state(work, batch, heads, num_parts, dim, q.device)
    work["num_splits"] = num_mid
    out = torch.empty_like(q) if out is None else out
    assert q.is_contiguous() and heads % kv_heads == 0
    args = tiled_launch._args(q, k, v, work, out, dim, nq_mid)
    if num_mid:
        # one program: the GROUP query heads of one KV head of one sequence, over `chunk` middle tokens
        grid = (num_mid, kv_heads, batch)
        rows_decode_kernel[grid](*_middle_args(args), chunk, num_parts, **ce, **launch)
    if num_parts > num_mid:
        # one program: TAIL_TOKENS tail positions (sinks, leftover quantized tokens, windows) of one KV head
        grid = (num_parts - num_mid, kv_heads, batch)
        fast_decode_kernel[grid](*args, TAIL_TOKENS.value, num_mid, tail_len, num_parts, TAIL=True, **tail_ce,
                                 num_warps=4, num_stages=1)
    # one program: one query head of one sequence, merging its parts
    grid = (batch * heads,)
    reduce_kernel[grid](work["m"], work["l"], work["acc"], out, num_parts, out.stride(0), out.stride(1),
                        HEADS=heads, HEAD_DIM=dim, SPLITS_PAD=max(2, triton.next_power_of_2(num_parts)), num_warps=4)
    return out
