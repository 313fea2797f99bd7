"""quant_attention's launcher: the fast kernel (tiled_*.py) for caches stored tiled, plain.py's kernel for the
plain layout; SKVQ's channel reorder applied around them; the sm_90 compile specs of either."""

from __future__ import annotations

from validate.common.recipes import recipe
from validate.ops.quant_attention import plain, tiled_kernel, tiled_launch
from validate.ops.quant_attention.cache import QuantCache, cache_tilings, permute_channels, unpermute_channels

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama-3.1-8B: the sm_90 specs' default shape


def decode(q, cache: QuantCache, num_splits: int | None = None, out=None, work: dict | None = None,
           num_warps: int = 4, num_stages: int | None = None):
    """softmax(q k^T / sqrt(D)) v per query head over the quantized cache, in its stored channel order;
    q [B, HQ, D] bf16 (contiguous) -> out [B, HQ, D]. `work` (a dict) keeps the partials between calls."""
    if cache.k.tiling is not None:  # stored tiled: the fast kernel, its launch defaults
        return tiled_launch.fast_decode(q, cache, num_splits, out, work, None if num_warps == 4 else num_warps,
                                        num_stages)
    return plain.decode_plain(q, cache, num_splits, out, work, num_warps, num_stages)


def attention(q, cache: QuantCache, **kwargs):
    """decode() for a query in the model's channel order: SKVQ's reorder, folded into W_q and W_o in a
    model, is applied here to q and undone on the output."""
    if cache.perm_k is None:
        return decode(q, cache, **kwargs)
    out = decode(permute_channels(q, cache.perm_k).contiguous(), cache, **kwargs)
    return unpermute_channels(out, cache.perm_v)


def sm90_spec(method: str, tail: bool = False, heads: int = HEADS, kv_heads: int = KV_HEADS, dim: int = HEAD_DIM,
              num_warps: int | None = None, num_stages: int | None = None) -> dict:
    """A validate.common.sm90 compile spec of the kernel that runs `method`'s storage (the fast kernel
    where the cache is stored tiled, else quant_decode_kernel), middle or tail part; the fast kernel's as
    tiled_launch.fast_decode launches it by default (LAUNCH: warps, stages, VAR bits and, middle only, "maxnreg")."""
    r = recipe(method)
    tk, tv = cache_tilings(r, dim)
    if tk is not None:
        warps, cap, stages, var = tiled_launch.launch_defaults(tk, tv)
        ce = tiled_launch.plan(r, tk, tv, heads, kv_heads, dim, emu=False, variant=var)
        warps = num_warps or warps
        return {"module": tiled_kernel.__name__, "kernel": "fast_decode_kernel",
                "signature": tiled_launch.signature(r), "constexprs": {**ce, "TAIL": tail},
                "num_warps": 4 if tail else warps, "num_stages": 1 if tail else (num_stages or stages),
                "maxnreg": None if tail else cap}
    sig = {"q_ptr": "*bf16", "m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "qk_scale": "fp32"}
    for x, t in (("k", r.k), ("v", r.v)):
        meta = "*fp16" if t.meta == "fp16" else "*fp8e4nv"
        sig.update({f"{x}c": "*i32", f"{x}s": meta, f"{x}z": meta, f"{x}_sinks": "*fp16", f"{x}_win": "*fp16"})
    for name in ("num_sinks", "nq_k", "nq_v", "win_k", "win_v", "nq_mid", "chunk", "num_mid", "tail_len",
                 "num_parts"):
        sig[name] = "i32"
    return {"module": plain.__name__, "kernel": "quant_decode_kernel", "signature": sig,
            "constexprs": {**plain.constexprs(r, heads, kv_heads, dim, upcast=False), "TAIL": tail},
            "num_warps": num_warps or 4, "num_stages": 1 if tail else (num_stages or plain.default_stages(r))}
