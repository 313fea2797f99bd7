"""XQuant's storage of a layer (`XLayer`, as roofline's XQuant counts it) and the launchers of its kernels:
fused decode, materialize (remat to bf16 K, V) then flash-decoding, the same through cuBLAS (dequantize, one
batched torch.bmm, rope_, flash-decoding: cublas_decode), XQuant-CL's accumulator update."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from validate.common.flash_decode import MAX_SPLITS, decode_attention, reduce_kernel
from validate.common.quantize import QuantTensor, quantize
from validate.common.recipes import TensorRecipe
from validate.common.triton_helpers import LOG2E, interpreting
from validate.ops.xquant.acc_words import acc4_words_kernel
from validate.ops.xquant.kernel import acc_update_kernel, dequant_kernel, fused_kernel, remat_kernel, rope_kernel
from validate.ops.xquant.shared import rows_pad, shared_kernel

ROPE_THETA = 500000.0  # Llama-3.1
# launch defaults (the sm_90 specs compile the same): tokens per block, latent channels per MMA step. H200 sweep
# (benchmarks/gpu_sweep_xquant.py, validate/results/nvidia-h200-xquant-sweep.txt): r 128 with 2 stages beat 64 with
# 3 by 1.10-1.23x (fused b8 L16K 2.56 -> 2.10 ms, remat 2.41 -> 2.08, MHA b1 L8K 2.11 -> 1.91); 128 tokens needs
# 8 warps and gave 2.66-2.80 ms. With the keys as rows (_keys), remat_kernel runs best at r 64 and 3 stages
# (b8 L16K 1.94-1.96 ms vs 2.10 at r 128, 2 stages); fused_kernel there: GQA 1.02x, MHA 0.89x
BLOCK_N, R_BLOCK, NUM_WARPS, NUM_STAGES = 64, 128, 4, 2
REMAT_R_BLOCK, REMAT_STAGES = 64, 3
BLOCK_T, BLOCK_D = 32, 128  # accumulator update: tokens x channels per program
# GQA-CL's update through U_kv^T (up=True): at 32 x 128 the dot ran on mma.sync (M < 64), each token's delta was
# dequantized d / BLOCK_D = 32 times and U_kv^T (16 MiB) re-read from L2 per 32 tokens (512 KiB a token);
# 128 x 256 with 8 warps is wgmma (64 tokens a warpgroup), 16 dequantizations and 128 KiB of U_kv^T a token:
# 11,067 warp instructions a token instead of 67,696 (sm_90, Triton 3.6; structure.py --acc)
ACC_UP_BLOCK_T, ACC_UP_BLOCK_D, ACC_UP_R_BLOCK, ACC_UP_WARPS, ACC_UP_STAGES = 128, 256, 64, 8, 2
# the 4-bit update on packed words (acc_words.acc4_words_kernel, acc_update(variant="words")): tokens per program,
# tokens per unrolled step, channels per program, warps; a step gives each thread 4 accumulator words (32 channels,
# one 16-byte load and store) and their delta bits (one 8-byte load): 4.4 lane instructions per element against
# the old kernel's 20.3 (sm_90, Triton 3.6; validate/notes/2026-11-23-xquant-cl-accumulator-update.md)
ACC4_BLOCK_T, ACC4_STEP_T, ACC4_BLOCK_D, ACC4_WARPS = 16, 4, 1024, 4
# shared_kernel (decode(variant="shared")): KV heads per program, tokens per block, warps, stages; sm_90 compiles
# of the candidates (validate/ops/xquant/structure.py --shared) in
# validate/notes/2026-11-23-xquant-shared-kernel-launches.md
SHARED_HPP, SHARED_BLOCK_N, SHARED_WARPS, SHARED_STAGES, SHARED_R_BLOCK = 2, 128, 8, 2, 64
# dequant="pairs" (deq_pairs.py, 2-bit codes to bf16x2 by inline PTX): fused_kernel's latent channels per MMA step;
# at 128 its loop spills 190 registers a step (sm_90, Triton 3.6), at 64 28
# (validate/notes/2026-11-23-xquant-remat-dequant.md)
PAIRS_R_BLOCK = 64
DEQUANTS = ("fp32", "pairs")
# the cuBLAS path's memory-bound kernels: dequant_kernel's tokens x latent channels per program (64: the K latent's
# token blocks must divide its groups of G = 128), warps; rope_kernel's tokens per program. Not tuned on a GPU
DEQ_BLOCK_N, DEQ_R_BLOCK, DEQ_WARPS = 64, 128, 4
ROPE_BLOCK_T, ROPE_WARPS = 32, 4


@dataclass
class XLayer:
    """One layer's XQuant storage for a batch (QuantTensor, heads dimension 1) and its remat weights."""

    xk: QuantTensor  # X U_k (GQA) or X (MHA)
    xv: QuantTensor | None  # X U_v (GQA); None: V from xk (MHA)
    wk: torch.Tensor  # [r, H_kv d_h] bf16
    wv: torch.Tensor
    kv_heads: int
    context: int
    theta: float = ROPE_THETA
    dequantized: tuple | None = None  # (x^K, x^V) [B, L, r] fp32, as the kernels see them

    @property
    def v_latent(self) -> QuantTensor:
        return self.xk if self.xv is None else self.xv


def recipes(bits: float, group: int, mha: bool) -> tuple[TensorRecipe, TensorRecipe | None]:
    """The roofline XQuant storage (roofline.methods.xquant's per-tensor TensorQuant): X per token; XK per
    channel with a block window of G tokens; XV per token."""
    from roofline.methods import parse_method

    config = parse_method(f"xquant:bits={bits:g},group_size={group}")
    if mha:
        return TensorRecipe(config.quant_for(bits, "channels")), None
    return TensorRecipe(config.quant_for(bits, "tokens")), TensorRecipe(config.quant_for(bits, "channels"))


def build_layer(xk: torch.Tensor, xv: torch.Tensor | None, wk: torch.Tensor, wv: torch.Tensor, kv_heads: int,
                bits: float = 2, group: int = 128, keep_dequantized: bool = True) -> XLayer:
    """Quantize latents [B, L, r] (xv None: MHA, one X) as roofline counts them."""
    rk, rv = recipes(bits, group, xv is None)
    qk, fk = quantize(xk[:, None], rk)
    qv, fv = quantize(xv[:, None], rv) if xv is not None else (None, fk)
    deq = (fk[:, 0], fv[:, 0]) if keep_dequantized else None
    return XLayer(qk, qv, wk.to(torch.bfloat16).contiguous(), wv.to(torch.bfloat16).contiguous(), kv_heads,
                  xk.shape[1], dequantized=deq)


def _args(layer: XLayer, fallback: torch.Tensor) -> list:
    """kc, ks, kz, kw, vc, vs, vz: empty tensors point at `fallback` (never read)."""
    k, v = layer.xk.tensors, layer.v_latent.tensors
    ts = [k["codes"], k["scale"], k["zero"], k["window"], v["codes"], v["scale"], v["zero"]]
    return [t if t.numel() else fallback for t in ts]


def constexprs(rec: TensorRecipe, latent: int, kv_heads: int, head_dim: int, block_n: int, r_block: int,
               upcast: bool | None = None) -> dict:
    """Compile-time parameters of fused_kernel / remat_kernel (launchers and sm_90 specs share them);
    `rec` is the K latent's recipe (along tokens: GQA's XK; along channels: MHA's X)."""
    k_tokens = rec.along == "tokens"
    if k_tokens and rec.group % block_n:
        raise ValueError(f"block_n: {block_n} must divide the K latent's token groups of {rec.group}")
    if latent % r_block or (r_block % rec.group and rec.group % r_block):
        raise ValueError(f"r_block: {r_block} must divide the latent {latent} and nest with groups of {rec.group}")
    upcast = interpreting() if upcast is None else upcast
    return {"K_TOKENS": k_tokens, "KV_HEADS": kv_heads, "HEAD_DIM": head_dim, "LAT": latent, "BLOCK_N": block_n,
            "R": r_block, "BITS_A": rec.planes[0], "BITS_B": rec.planes[1], "G": rec.group, "UPCAST": upcast}


def acc_constexprs(rec: TensorRecipe, d: int, dw: int, up: bool, acc_bits: int, block_t: int, block_d: int,
                   r_block: int, upcast: bool | None = None) -> dict:
    """Compile-time parameters of acc_update_kernel."""
    if acc_bits not in (4, 16) or d % block_d or (up and dw % r_block):
        raise ValueError(f"accumulator: bits {acc_bits} (4 or 16), d {d} / block_d {block_d}, width {dw} / {r_block}")
    upcast = interpreting() if upcast is None else upcast
    return {"D": d, "DW": dw, "BLOCK_T": block_t, "BLOCK_D": block_d, "R": r_block, "UP": up, "ACC_BITS": acc_bits,
            "BITS_A": rec.planes[0], "BITS_B": rec.planes[1], "G": rec.group, "UPCAST": upcast}


def _layer_constexprs(layer: XLayer, block_n: int, r_block: int) -> dict:
    latent, kv_dim = layer.wk.shape
    return constexprs(layer.xk.recipe, latent, layer.kv_heads, kv_dim // layer.kv_heads, block_n, r_block)


def pairs_constexprs(layer: XLayer, ce: dict, dequant: str) -> dict:
    """PACKED and EMU of fused_kernel / remat_kernel for `dequant` ("fp32": kernel._dequant; "pairs":
    deq_pairs.py); raises where the pairs layout does not apply."""
    if dequant not in DEQUANTS:
        raise ValueError(f"dequant: {dequant!r} is not one of {DEQUANTS}")
    if dequant == "fp32":
        return {"PACKED": False, "EMU": False}
    recs = [layer.xk.recipe] + ([layer.xv.recipe] if layer.xv is not None else [])
    if any(r.planes != (2, 0) or r.group % 16 for r in recs) or ce["R"] % 16 or ce["LAT"] % 16 or ce["BLOCK_N"] % 4:
        raise ValueError(f"dequant 'pairs': 2-bit codes in one plane ({[r.planes for r in recs]}), groups, r_block "
                         f"{ce['R']} and latent {ce['LAT']} multiples of 16, block_n {ce['BLOCK_N']} of 4")
    return {"PACKED": True, "EMU": interpreting()}


def fused_splits(nq_k: int, block_n: int) -> int:
    """Splits per (sequence, KV head): MAX_SPLITS, down to one block each. The remat makes the kernel
    compute-bound, and more, shorter programs even out the SMs' last wave (H200, batch 8, 16K tokens:
    132 TFLOP/s at flash_decode's 2 programs per SM, 213 at 64 splits; batch 1 and 32 gain 1-6%)."""
    return max(1, min(MAX_SPLITS, triton.cdiv(nq_k, block_n)))


def decode(q, layer: XLayer, num_splits: int | None = None, out=None, work: dict | None = None,
           block_n: int | None = None, r_block: int | None = None, num_warps: int | None = None,
           num_stages: int | None = None, variant: str = "fused", heads_per_program: int | None = None,
           dequant: str = "fp32"):
    """Fused XQuant decode attention; q [B, H, d_h] bf16 contiguous (RoPE applied) -> out [B, H, d_h].
    `work` (a dict) keeps the partials between calls. variant "fused": fused_kernel, one KV head per program
    (the committed results' kernel); "shared": shared_kernel, `heads_per_program` KV heads per program sharing
    each dequantized latent tile (None: SHARED_HPP, at most H_kv). Unset block_n / r_block / warps / stages take the
    variant's defaults. `dequant` (fused only): "fp32", the committed kernel's; "pairs", deq_pairs.py's bf16x2
    dequantization (2-bit codes; r_block PAIRS_R_BLOCK unless given)."""
    if variant not in ("fused", "shared"):
        raise ValueError(f"variant: {variant!r} is not 'fused' or 'shared'")
    shared = variant == "shared"
    block_n = block_n or (SHARED_BLOCK_N if shared else BLOCK_N)
    if shared and dequant != "fp32":
        raise ValueError(f"dequant: {dequant!r} is fused_kernel's only (variant 'fused')")
    r_block = r_block or (SHARED_R_BLOCK if shared else PAIRS_R_BLOCK if dequant == "pairs" else R_BLOCK)
    num_warps = num_warps or (SHARED_WARPS if shared else NUM_WARPS)
    num_stages = num_stages or (SHARED_STAGES if shared else NUM_STAGES)
    batch, heads, dim = q.shape
    ce = _layer_constexprs(layer, block_n, r_block)
    group = heads // layer.kv_heads
    nq_k, win_k = layer.xk.nq, layer.xk.recent
    num_splits = fused_splits(nq_k, block_n) if num_splits is None else num_splits
    chunk = triton.cdiv(triton.cdiv(max(nq_k, 1), num_splits), block_n) * block_n
    num_mid = triton.cdiv(nq_k, chunk)
    num_tail = triton.cdiv(win_k, block_n)
    num_parts = num_mid + num_tail
    work = {} if work is None else work
    if work.get("key") != (batch, heads, num_parts, dim, q.device):
        m = torch.empty(batch, heads, num_parts, dtype=torch.float32, device=q.device)
        work.update(key=(batch, heads, num_parts, dim, q.device), m=m, l=torch.empty_like(m),
                    acc=torch.empty(*m.shape, dim, dtype=torch.float32, device=q.device))
    out = torch.empty_like(q) if out is None else out
    assert q.is_contiguous() and heads % layer.kv_heads == 0 and dim == ce["HEAD_DIM"]
    args = (q, *_args(layer, q), layer.wk, layer.wv, work["m"], work["l"], work["acc"], dim ** -0.5 * LOG2E,
            math.log2(layer.theta), layer.context, nq_k, win_k, chunk, num_mid, num_parts)
    kernel, programs = fused_kernel, layer.kv_heads
    if shared:
        hpp = heads_per_program or min(SHARED_HPP, layer.kv_heads)
        if layer.kv_heads % hpp or hpp & (hpp - 1):
            raise ValueError(f"heads_per_program: {hpp} must be a power of two dividing H_kv {layer.kv_heads}")
        kernel, programs = shared_kernel, layer.kv_heads // hpp
        ce.update(GROUP=group, HPP=hpp, ROWS_PAD=rows_pad(hpp, group))
    else:
        ce.update(GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)), **pairs_constexprs(layer, ce, dequant))
    if num_mid:
        # one program: the GROUP query heads of KV head h (shared: of HPP KV heads) of one sequence, over `chunk`
        # tokens whose K latent is quantized; KV head fastest, so the heads of one chunk share its latent rows in L2
        kernel[(programs, num_mid, batch)](*args, TAIL=False, **ce, num_warps=num_warps, num_stages=num_stages)
    if num_tail:
        # one program: the same query heads over BLOCK_N tokens of K's fp16 window
        kernel[(programs, num_tail, batch)](*args, TAIL=True, **ce, num_warps=num_warps, num_stages=num_stages)
    # one program: one query head of one sequence, merging its parts
    grid = (batch * heads,)
    reduce_kernel[grid](work["m"], work["l"], work["acc"], out, num_parts, out.stride(0), out.stride(1),
                        HEADS=heads, HEAD_DIM=dim, SPLITS_PAD=max(2, triton.next_power_of_2(num_parts)), num_warps=4)
    return out


def materialize(layer: XLayer, kv: tuple | None = None, block_n: int = BLOCK_N, r_block: int = REMAT_R_BLOCK,
                num_warps: int = NUM_WARPS, num_stages: int = REMAT_STAGES,
                dequant: str = "fp32") -> tuple[torch.Tensor, torch.Tensor]:
    """K (RoPE applied) and V [B, H_kv, L, d_h] bf16 written to memory from the latents (`dequant` as decode's)."""
    ce = _layer_constexprs(layer, block_n, r_block)
    ce.update(pairs_constexprs(layer, ce, dequant))
    codes = layer.xk.tensors["codes"]
    batch, dim = codes.shape[0], ce["HEAD_DIM"]
    shape = (batch, layer.kv_heads, layer.context, dim)
    k, v = kv or (torch.empty(shape, dtype=torch.bfloat16, device=codes.device),
                  torch.empty(shape, dtype=torch.bfloat16, device=codes.device))
    nq_k, win_k = layer.xk.nq, layer.xk.recent
    args = (*_args(layer, k), layer.wk, layer.wv, k, v, math.log2(layer.theta), layer.context,
            nq_k, win_k)
    for tail, tokens in ((False, nq_k), (True, win_k)):
        if tokens:
            # one program: K and V of KV head h of one sequence at BLOCK_N tokens
            grid = (layer.kv_heads, triton.cdiv(tokens, block_n), batch)
            remat_kernel[grid](*args, TAIL=tail, **ce, num_warps=num_warps, num_stages=num_stages)
    return k, v


def materialized_decode(q, layer: XLayer, num_splits: int = 1, out=None, kv: tuple | None = None, **kwargs):
    """materialize() then flash_decode.decode_attention over the bf16 K, V it wrote."""
    k, v = materialize(layer, kv, **kwargs)
    return decode_attention(q, k, v, num_splits, out=out)


def dequantize(layer: XLayer, x: torch.Tensor | None = None, block_n: int = DEQ_BLOCK_N, r_block: int = DEQ_R_BLOCK,
               num_warps: int = DEQ_WARPS) -> torch.Tensor:
    """x^K and x^V stacked, [2, B*L, r] bf16 (torch.bmm's batch of two), from a GQA layer's latents: dequant_kernel
    over the quantized K tokens, then over K's fp16 window (TAIL), as materialize launches remat_kernel."""
    if layer.xv is None:
        raise ValueError("dequantize: the cuBLAS path takes GQA's two latents (MHA's one X is not stacked)")
    ce = _layer_constexprs(layer, block_n, r_block)
    ce = {k: ce[k] for k in ("K_TOKENS", "LAT", "BLOCK_N", "R", "BITS_A", "BITS_B", "G")}
    codes = layer.xk.tensors["codes"]
    batch, latent = codes.shape[0], ce["LAT"]
    x = torch.empty(2, batch * layer.context, latent, dtype=torch.bfloat16, device=codes.device) if x is None else x
    nq_k, win_k = layer.xk.nq, layer.xk.recent
    args = (*_args(layer, x), x, layer.context, nq_k, win_k)
    for tail, tokens in ((False, nq_k), (True, win_k)):
        if tokens:
            # one program: x^K and x^V of BLOCK_N tokens x R latent channels of one sequence
            grid = (latent // r_block, triton.cdiv(tokens, block_n), batch)
            dequant_kernel[grid](*args, TAIL=tail, **ce, num_warps=num_warps)
    return x


def rope_(k: torch.Tensor, context: int, kv_heads: int, theta: float = ROPE_THETA, block_t: int = ROPE_BLOCK_T,
          num_warps: int = ROPE_WARPS) -> torch.Tensor:
    """K [B*L, H_kv d_h] bf16 (row b L + t: token t of sequence b) rotated in place: rope_kernel."""
    rows, width = k.shape
    assert k.is_contiguous() and width % kv_heads == 0
    # one program: BLOCK_T rows (tokens) of every KV head
    grid = (triton.cdiv(rows, block_t),)
    rope_kernel[grid](k, math.log2(theta), rows, context, KV_HEADS=kv_heads, HEAD_DIM=width // kv_heads,
                      BLOCK_T=block_t, num_warps=num_warps)
    return k


def stacked_weights(layer: XLayer) -> torch.Tensor:
    """[W_k, W_v] as one [2, r, H_kv d_h] bf16 tensor (the batched GEMM's B operand; made once, outside the step)."""
    return torch.stack((layer.wk, layer.wv)).contiguous()


def kv_views(kv: torch.Tensor, batch: int, kv_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """K, V [B, H_kv, L, d_h] views of the GEMM's output kv [2, B*L, H_kv d_h]: strides (L H_kv d_h, d_h, H_kv d_h, 1),
    which decode_attention reads as they are (no transposing copy)."""
    _, rows, width = kv.shape
    shape = (batch, rows // batch, kv_heads, width // kv_heads)
    return tuple(kv[i].view(shape).permute(0, 2, 1, 3) for i in range(2))


def cublas_remat(layer: XLayer, w: torch.Tensor, x: torch.Tensor | None = None, kv: torch.Tensor | None = None,
                 **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """K (RoPE applied) and V as `kv_views`: dequantize (its tiles in kwargs) -> torch.bmm(x, w) (cuBLAS, both
    latents in one call) into kv [2, B*L, H_kv d_h] -> rope_ on K. `w`: stacked_weights(layer)."""
    x = dequantize(layer, x, **kwargs)
    kv = torch.bmm(x, w, out=kv)
    rope_(kv[0], layer.context, layer.kv_heads, layer.theta)
    return kv_views(kv, layer.xk.tensors["codes"].shape[0], layer.kv_heads)


def cublas_decode(q, layer: XLayer, w: torch.Tensor, num_splits: int = 1, out=None, x=None, kv=None, **kwargs):
    """cublas_remat then flash_decode.decode_attention over the K, V views it wrote."""
    k, v = cublas_remat(layer, w, x, kv, **kwargs)
    return decode_attention(q, k, v, num_splits, out=out)


def acc_variant(delta: QuantTensor, acc: torch.Tensor, u_t: torch.Tensor | None, block_d: int) -> str:
    """The update's default kernel: "words" (acc4_words_kernel) for a 4-bit accumulator, no U_kv^T, 2-bit delta
    codes in one plane and groups of 8 k channels (k a power of two) that tile block_d; else "elements"."""
    g = delta.recipe.group
    words = (acc.dtype == torch.uint8 and u_t is None and delta.recipe.planes == (2, 0) and g % 8 == 0
             and (g // 8) & (g // 8 - 1) == 0 and block_d % g == 0 and acc.shape[-1] * 2 % block_d == 0)
    return "words" if words else "elements"


def acc_update(delta: QuantTensor, acc: torch.Tensor, u_t: torch.Tensor | None = None, step: float = 1.0,
               block_t: int | None = None, block_d: int | None = None, r_block: int | None = None,
               num_warps: int | None = None, num_stages: int | None = None, variant: str | None = None):
    """XQuant-CL: acc[b, t] += dequant(delta)[b, t] (@ U_kv^T when u_t [2r, d] is given), in place.
    acc is bf16 [B, L, d] or 4-bit codes uint8 [B, L, d/2] with x = step (u - 8): roofline counts the
    accumulator as e_b/8 L d bytes with no metadata (methods/xquant.py), so the 4-bit one has a single
    layer-wide step, a scalar argument, and is re-rounded after each add. `variant` "elements":
    kernel.acc_update_kernel, one fp32 lane per element; unset tile sizes: ACC_UP_* with u_t, else BLOCK_T x
    BLOCK_D, R_BLOCK, NUM_WARPS and Triton's default 3 stages (the committed results' launch; the up-projection's
    was BLOCK_T, BLOCK_D, R_BLOCK, NUM_WARPS, 3). "words": acc_words.acc4_words_kernel, the 4-bit update on packed
    words (ACC4_* tiles). None: `acc_variant`'s choice."""
    up = u_t is not None
    if variant is None:
        variant = acc_variant(delta, acc, u_t, block_d or ACC4_BLOCK_D)
    if variant == "words":
        return _acc_words(delta, acc, step, block_t or ACC4_BLOCK_T, block_d or ACC4_BLOCK_D,
                          num_warps or ACC4_WARPS)
    if variant != "elements":
        raise ValueError(f"variant: {variant!r} is not 'elements' or 'words'")
    block_t = block_t or (ACC_UP_BLOCK_T if up else BLOCK_T)
    block_d = block_d or (ACC_UP_BLOCK_D if up else BLOCK_D)
    r_block = r_block or (ACC_UP_R_BLOCK if up else R_BLOCK)
    num_warps = num_warps or (ACC_UP_WARPS if up else NUM_WARPS)
    num_stages = num_stages or (ACC_UP_STAGES if up else 3)
    codes = delta.tensors["codes"]
    batch, tokens = codes.shape[0], delta.nq
    four = acc.dtype == torch.uint8
    d = acc.shape[-1] * (2 if four else 1)
    dw = u_t.shape[0] if u_t is not None else d
    _check_delta(delta)
    ce = acc_constexprs(delta.recipe, d, dw, u_t is not None, 4 if four else 16, block_t, block_d, r_block)
    # one program: BLOCK_T tokens x BLOCK_D channels of one sequence's accumulator
    grid = (triton.cdiv(tokens, block_t), d // block_d, batch)
    acc_update_kernel[grid](codes, delta.tensors["scale"], delta.tensors["zero"], acc if u_t is None else u_t, acc,
                            step, 1.0 / step, tokens, **ce, num_warps=num_warps, num_stages=num_stages)
    return acc


def _check_delta(delta: QuantTensor) -> None:
    if delta.recent or delta.sinks or delta.recipe.along != "channels":
        raise ValueError("delta: per-token groups with no fp16 tokens (roofline's dX)")


def acc4_constexprs(rec: TensorRecipe, d: int, block_t: int, block_d: int, step_t: int | None = None,
                    emu: bool | None = None) -> dict:
    """Compile-time parameters of acc4_words_kernel; raises where the words layout does not apply."""
    g = rec.group
    if rec.planes != (2, 0) or g % 8 or (g // 8) & (g // 8 - 1) or block_d % g or d % block_d:
        raise ValueError(f"variant 'words': 2-bit delta codes ({rec.planes}), group {g} = 8 x a power of two, "
                         f"dividing block_d {block_d}, dividing d {d}")
    step_t = step_t or min(block_t, ACC4_STEP_T)
    if block_t % step_t:
        raise ValueError(f"variant 'words': step_t {step_t} must divide block_t {block_t}")
    return {"D": d, "BLOCK_T": block_t, "STEP_T": step_t, "BLOCK_D": block_d, "G": g,
            "EMU": interpreting() if emu is None else emu}


def _acc_words(delta: QuantTensor, acc: torch.Tensor, step: float, block_t: int, block_d: int, num_warps: int):
    """acc_update(variant="words"): the 4-bit accumulator [B, L, d/2] uint8 viewed as int32 words, the delta's codes
    [B, 1, L, d/4] as int16 (one per word), no copies."""
    _check_delta(delta)
    if acc.dtype != torch.uint8 or not acc.is_contiguous():
        raise ValueError("variant 'words': the accumulator must be contiguous 4-bit codes (uint8)")
    codes = delta.tensors["codes"]
    batch, tokens, d = codes.shape[0], delta.nq, acc.shape[-1] * 2
    ce = acc4_constexprs(delta.recipe, d, block_t, block_d)
    grid = (triton.cdiv(tokens, block_t), d // block_d, batch)
    # one program: BLOCK_T tokens x BLOCK_D channels of one sequence's accumulator
    acc4_words_kernel[grid](codes.view(torch.int16), delta.tensors["scale"], delta.tensors["zero"],
                            acc.view(torch.int32), 1.0 / step, tokens, **ce, num_warps=num_warps)
    return acc
