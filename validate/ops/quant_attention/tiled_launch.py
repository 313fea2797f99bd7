"""The fast kernel's launcher: compile-time parameters from the recipe and tilings, splits from the compiled
kernel's occupancy, the middle and tail launches and the merge."""

from __future__ import annotations

import triton

from validate.common.flash_decode import reduce_kernel, split_state
from validate.common.recipes import MODES
from validate.common.triton_helpers import LOG2E, interpreting
from validate.common.triton_helpers import choose_splits as choose_splits_for
from validate.ops.quant_attention.tiled_dequant import KINDS
from validate.ops.quant_attention.tiled_kernel import QALL, fast_decode_kernel
from validate.ops.quant_attention.tiled_tail import TAIL_TOKENS


def plan(r, tk, tv, heads: int, kv_heads: int, dim: int, emu: bool | None = None, variant: int = 0) -> dict:
    """The kernel's compile-time parameters for recipe r stored with tilings (tk, tv) (cache.cache_tilings);
    `variant`: the VAR bits of tiled_kernel (0: none; tiled_launch.LAUNCH's default is QALL for KIVI)."""
    emu = interpreting() if emu is None else emu
    group = heads // kv_heads
    gp = triton.next_power_of_2(group)
    along_tokens = [8 // t.planes[0] for t, til in ((r.k, tk), (r.v, tv)) if til.kind in ("TK", "TV")]
    nsub = max([*along_tokens, 16 // gp if gp < 16 else 1, 2 if tv.kind == "CVT" else 1])
    if tk.rows != tv.rows:
        raise ValueError("tiling: K and V sub-tiles differ")
    out = {"KV_HEADS": kv_heads, "GROUP": group, "GP": gp, "NSUB": nsub, "D": dim, "R": tk.rows, "EMU": emu,
           "VAR": variant}
    for name, t, til in (("K", r.k, tk), ("V", r.v, tv)):
        out.update({f"{name}_KIND": KINDS[til.kind], f"{name}_A": t.planes[0], f"{name}_B": t.planes[1],
                    f"{name}_G": t.group, f"{name}_MODE": MODES[t.mode], f"{name}_OFF": t.levels // 2})
    return out


def step_tokens(ce: dict) -> int:
    """Tokens of one middle step (NSUB sub-tiles of R tokens): the middle covers a multiple of it."""
    return ce["NSUB"] * ce["R"]


def split_plan(nq_mid: int, step: int, num_splits: int) -> tuple[int, int]:
    """(tokens per middle program, a multiple of `step`; number of middle programs)."""
    chunk = triton.cdiv(triton.cdiv(max(nq_mid, 1), num_splits), step) * step
    return chunk, triton.cdiv(nq_mid, chunk)


def signature(r) -> dict:
    """validate.common.sm90 signature of fast_decode_kernel for recipe r."""
    sig = {"q_ptr": "*bf16", "m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "qk_scale": "fp32"}
    for x, t in (("k", r.k), ("v", r.v)):
        meta = "*fp16" if t.meta == "fp16" else "*fp8e4nv"
        sig.update({f"{x}c": "*u8", f"{x}c16": "*i16", f"{x}s": meta, f"{x}z": meta, f"{x}_sinks": "*fp16",
                    f"{x}_win": "*fp16"})
    for name in ("num_sinks", "nq_k", "nq_v", "win_k", "win_v", "nq_mid", "chunk", "num_mid", "tail_len",
                 "num_parts"):
        sig[name] = "i32"
    return sig


WAVES = 1  # middle programs = WAVES x the programs the GPU holds at once (whole waves, no straggling tail)


DEFAULT_RESIDENT = 4  # programs per SM assumed before the compiled kernel says (interpreter, first call)


MAX_SPLITS = 64


_RESIDENT: dict = {}  # (constexprs, warps, stages, device) -> programs per SM, from the compiled kernel


def resident(n_regs: int, shared: int, num_warps: int) -> int:
    """Programs of a kernel an H100/H200 SM holds at once: 64K registers (allocated per warp in units of
    256), 228 KB shared memory (1 KB reserved per block), 64 warps, 32 blocks."""
    per_warp = -(-n_regs * 32 // 256) * 256
    by_regs = 65536 // max(per_warp * num_warps, 1)
    by_smem = 228 * 1024 // (shared + 1024)
    return max(1, min(by_regs, by_smem, 64 // num_warps, 32))


def choose_splits(programs: int, tokens: int, sm_count: int, step: int, slots_per_sm: int = DEFAULT_RESIDENT,
                  waves: int = WAVES) -> int:
    """Middle splits per (sequence, KV head): the most that keep programs x splits within `waves` whole
    waves of resident programs (floor, not ceil: a partial extra wave runs at a fraction of the GPU), each
    split >= one step, at most MAX_SPLITS."""
    return choose_splits_for(programs, tokens, sm_count, waves * slots_per_sm, step, MAX_SPLITS, whole_waves=True)


def _pointers(t, fallback) -> list:
    """codes (uint8 and int16 views), scale, zero, sinks, window of one tensor; empty ones -> `fallback`."""
    import torch

    ts = t.tensors
    codes = ts["codes"]
    out = [codes, codes.view(torch.int16)] if codes.numel() else [fallback] * 2
    for name in ("scale", "zero" if "zero" in ts else "scale", "sinks", "window"):
        out.append(ts[name] if ts[name].numel() else fallback)
    return out


def _args(q, k, v, work, out, dim: int, nq_mid: int) -> tuple:
    """The kernel's arguments up to nq_mid (partials buffers: `work`, or stand-ins for a compile)."""
    stand_in = work is None
    m, l_, acc = (q, q, q) if stand_in else (work["m"], work["l"], work["acc"])
    if stand_in:
        import torch

        m = l_ = acc = torch.empty(1, dtype=torch.float32, device=q.device)
    return (q, *_pointers(k, q), *_pointers(v, q), m, l_, acc, dim ** -0.5 * LOG2E, k.sinks, k.nq, v.nq, k.recent,
            v.recent, nq_mid)


# launch defaults by (K, V) tiling kinds: (warps, register cap or None, pipeline stages, tiled_kernel VAR bits), the
# best measured on an H200 (QUANT_NOTES.md): 4 warps for KIVI, 2 for InnerQ, 2 uncapped with 3 stages for SKVQ; KIVI
# (K along tokens) runs variant QALL capped at 128 registers, "qall-r128": 11-14 % faster than VAR 0 uncapped at
# large shapes on an H100 and an H200 (validate/notes/2026-11-23-kivi-kernel-variants.md,
# nvidia-h{100,200}-kivi-variants.json)
LAUNCH = {("TK", "CVT"): (4, 128, 2, QALL.value), ("TK", "CVC"): (4, 128, 2, QALL.value), ("CK", "TV"): (2, None, 2, 0),
          ("CK", "CVT"): (2, None, 3, 0), ("CK", "CVC"): (2, None, 3, 0)}


def launch_defaults(tk, tv) -> tuple[int, int | None, int, int]:
    """(num_warps, maxnreg, num_stages, VAR bits) of LAUNCH for tilings tk, tv."""
    return LAUNCH.get((tk.kind, tv.kind), (4, None, 2, 0))


def fast_decode(q, cache, num_splits: int | None = None, out=None, work: dict | None = None,
                num_warps: int | None = None, num_stages: int | None = None, waves: int = WAVES,
                maxnreg: int | None = 0, variant: int | None = None):
    """kernel.decode for a cache stored tiled (cache.cache_tilings): q [B, HQ, D] bf16 -> out.
    num_warps, num_stages, variant None and maxnreg 0: LAUNCH's defaults for the tilings (maxnreg None: no cap);
    `variant`: tiled_kernel's VAR bits (0: the kernel without variants, KIVI's before qall-r128;
    validate/notes/2026-11-23-kivi-kernel-variants.md)."""
    import torch

    batch, heads, dim = q.shape
    k, v = cache.k, cache.v
    kv_heads = k.tensors["codes"].shape[1]
    warps0, cap0, stages0, var0 = launch_defaults(k.tiling, v.tiling)
    ce = plan(cache.recipe, k.tiling, v.tiling, heads, kv_heads, dim, variant=var0 if variant is None else variant)
    num_warps = warps0 if num_warps is None else num_warps
    num_stages = stages0 if num_stages is None else num_stages
    maxnreg = cap0 if maxnreg == 0 else maxnreg
    step = step_tokens(ce)
    launch = {"num_warps": num_warps, "num_stages": num_stages}
    if maxnreg and q.is_cuda:
        launch["maxnreg"] = maxnreg
    nq_mid = min(k.nq, v.nq) // step * step
    tail_len = cache.context - nq_mid
    args = None
    if num_splits is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
        slots = DEFAULT_RESIDENT
        key = (tuple(sorted(ce.items())), num_warps, num_stages, maxnreg, str(q.device))
        if q.is_cuda and nq_mid:
            if key not in _RESIDENT:  # compile (no launch) to read registers and shared memory
                args = _args(q, k, v, None, None, dim, nq_mid)
                kernel = fast_decode_kernel.warmup(*args, step, 2, tail_len, 3, TAIL=False, **ce, grid=(1,), **launch)
                kernel._init_handles()
                _RESIDENT[key] = resident(kernel.n_regs, kernel.metadata.shared, num_warps)
            slots = _RESIDENT[key]
        num_splits = choose_splits(batch * kv_heads, nq_mid, sms, step, slots, waves)
    chunk, num_mid = split_plan(nq_mid, step, num_splits) if nq_mid else (step, 0)
    num_parts = num_mid + triton.cdiv(tail_len, TAIL_TOKENS.value)
    work = split_state(work, batch, heads, num_parts, dim, q.device)
    work["num_splits"] = num_mid
    out = torch.empty_like(q) if out is None else out
    assert q.is_contiguous() and heads % kv_heads == 0
    args = _args(q, k, v, work, out, dim, nq_mid)
    if num_mid:
        # one program: the GROUP query heads of one KV head of one sequence, over `chunk` middle tokens
        fast_decode_kernel[(num_mid, kv_heads, batch)](*args, chunk, num_mid, tail_len, num_parts, TAIL=False,
                                                       **ce, **launch)
    if num_parts > num_mid:
        tail_grid = (num_parts - num_mid, kv_heads, batch)
        fast_decode_kernel[tail_grid](*args, TAIL_TOKENS.value, num_mid, tail_len, num_parts, TAIL=True, **ce,
                                      num_warps=4, num_stages=1)
    reduce_kernel[(batch * heads,)](work["m"], work["l"], work["acc"], out, num_parts, out.stride(0), out.stride(1),
                                    HEADS=heads, HEAD_DIM=dim, SPLITS_PAD=max(2, triton.next_power_of_2(num_parts)),
                                    num_warps=4)
    return out
