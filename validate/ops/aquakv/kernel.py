"""AQUA-KV's reconstruction kernel (a bf16 GEMM with the dequantized residual in its epilogue) and launcher."""

from __future__ import annotations

import triton
import triton.language as tl

from validate.common.quant_triton import affine_masked, channel_codes, code_float, repeat
from validate.common.quantize import QuantTensor
from validate.common.recipes import MODES, TensorRecipe
from validate.common.triton_helpers import interpreting, operand
from validate.ops.aquakv.storage import Predictors

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): the best of 8 configurations on an H200 (triton 3.6),
# 528 TFLOP/s at 130K rows; below BIG_ROWS the small tiles fill the SMs (214 vs 132 TFLOP/s at 896 rows)
GPU_TILES = {"big": (128, 256, 64, 8, 3), "small": (64, 128, 64, 4, 3)}
BIG_ROWS = 32768
# The variant "tuned" (reconstruct(..., big_rows=TUNED_BIG_ROWS)): the same kernel with the big tiles from 3,200 rows
# on. The structure (validate/model/structure/aquakv.json, families/aquakv.py) puts the 64 x 128 tiles at the
# shared-memory ceiling: one warpgroup per tile re-reads W's 64 x 128 slab per 64 rows, 46 KB of shared memory per
# MFLOP against 31 KB for 128 x 256; the model predicts the big tiles faster on the H100 and H200 from 25 row blocks
# of 128 on (3,072 rows: 1.04 / 1.14 of the small tiles' time; 3,200: 0.78 / 0.86).
TUNED_BIG_ROWS = 3200


@triton.jit
def _gemm(acc, x_ptr, w_ptr, toks, ok, cols, D: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr):
    """acc += x[toks, :] @ w[:, cols] for x [rows, D] and w [D, D] (bf16, row-major)."""
    kk = tl.arange(0, BLOCK_K)
    x_rows = x_ptr + toks[:, None] * D  # [BLOCK_M, 1]
    w_cols = w_ptr + cols[None, :]  # [1, BLOCK_N]
    for k0 in range(0, D, BLOCK_K):
        x = tl.load(x_rows + (k0 + kk)[None, :], mask=ok[:, None], other=0.0)  # [BLOCK_M, BLOCK_K]
        w = tl.load(w_cols + (k0 + kk).to(tl.int64)[:, None] * D)  # [BLOCK_K, BLOCK_N]
        acc = tl.dot(operand(x, UPCAST), operand(w, UPCAST), acc)
    return acc


@triton.jit
def _residual(acc, bias_ptr, codes_ptr, scale_ptr, zero_ptr, toks, ok, c0, cols, D: tl.constexpr, G: tl.constexpr,
              BITS_A: tl.constexpr, BITS_B: tl.constexpr, MODE: tl.constexpr, BLOCK_N: tl.constexpr):
    """acc + bias + a*u + c: the dequantized residual of the tile (GT = groups of G channels in the tile, 1 when a
    group spans several tiles)."""
    acc += tl.load(bias_ptr + cols).to(tl.float32)[None, :]
    GT: tl.constexpr = BLOCK_N // G if BLOCK_N > G else 1
    gi = tl.arange(0, GT)
    a, c = affine_masked(scale_ptr, zero_ptr, toks[:, None] * (D // G) + c0 // G + gi[None, :], ok[:, None], MODE,
                         1 << (BITS_A + BITS_B - 1))  # [BLOCK_M, GT]
    u = channel_codes(codes_ptr, toks, ok, c0, BLOCK_N, D, BITS_A, BITS_B)  # [BLOCK_M, BLOCK_N]
    acc += repeat(a, BLOCK_N // GT) * code_float(u) + repeat(c, BLOCK_N // GT)
    return acc


@triton.jit
def predict_kernel(x1_ptr, x2_ptr, w_ptr, bias_ptr, codes_ptr, scale_ptr, zero_ptr, out_ptr, rows,
                   D: tl.constexpr, TWO_INPUTS: tl.constexpr, G: tl.constexpr, BITS_A: tl.constexpr,
                   BITS_B: tl.constexpr, MODE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, UPCAST: tl.constexpr, PREINIT: tl.constexpr = False):
    """out = x1 @ w[:D] (+ x2 @ w[D:2D]) + bias + a*u + c, one [BLOCK_M, BLOCK_N] tile per program. PREINIT (the
    variant "preinit"): bias + a*u + c is the GEMM's initial accumulator, dequantized while the first k-steps'
    loads are in flight, instead of an epilogue after the last wgmma."""
    pid = tl.program_id(0)
    # the D / BLOCK_N programs of one row block run side by side: its x rows are read once from DRAM
    pid_m = pid // (D // BLOCK_N)
    pid_n = pid % (D // BLOCK_N)
    toks = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)  # [BLOCK_M] rows (sequence, token)
    ok = toks < rows
    c0 = pid_n * BLOCK_N
    cols = c0 + tl.arange(0, BLOCK_N)  # [BLOCK_N] output channels
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if PREINIT:
        acc = _residual(acc, bias_ptr, codes_ptr, scale_ptr, zero_ptr, toks, ok, c0, cols, D, G, BITS_A, BITS_B,
                        MODE, BLOCK_N)
    acc = _gemm(acc, x1_ptr, w_ptr, toks, ok, cols, D, BLOCK_K, UPCAST)
    if TWO_INPUTS:
        acc = _gemm(acc, x2_ptr, w_ptr + D * D, toks, ok, cols, D, BLOCK_K, UPCAST)
    if not PREINIT:
        acc = _residual(acc, bias_ptr, codes_ptr, scale_ptr, zero_ptr, toks, ok, c0, cols, D, G, BITS_A, BITS_B,
                        MODE, BLOCK_N)
    tl.store(out_ptr + toks[:, None] * D + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=ok[:, None])


def kernel_io(k: QuantTensor, v: QuantTensor, k_prev, v_prev, pred: Predictors, k_hat, v_hat) -> dict[str, list]:
    """The tensors the two launches read and write, by roofline traffic class: `reconstruct` passes the
    kernel these and no other pointer (zeros only where stored), so the physical-bytes test counts them."""
    meta = [t for q in (k, v) for t in (q.tensors["codes"], q.tensors["scale"], q.tensors.get("zero")) if t is not None]
    return {"weights": [pred.w_k, pred.b_k, pred.w_v, pred.b_v], "kv_read": meta,
            "act_read": [k_prev, v_prev, k_hat], "act_write": [k_hat, v_hat]}


def tiles(t: TensorRecipe, kv_dim: int, rows: int, interpret: bool, big_rows: int = BIG_ROWS
          ) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): GPU_TILES by rows (big from `big_rows` on) on a GPU,
    32-wide under the interpreter; BLOCK_N and BLOCK_K divide d_kv and BLOCK_N is a multiple or a divisor of G."""
    size = "big" if rows >= big_rows else "small"
    bm, bn, bk, warps, stages = (32, 32, 32, 4, 1) if interpret else GPU_TILES[size]
    while bn > 16 and (kv_dim % bn or (bn % t.group and t.group % bn)):
        bn //= 2
    while bk > 16 and kv_dim % bk:
        bk //= 2
    if kv_dim % bn or kv_dim % bk or (bn % t.group and t.group % bn):
        raise ValueError(f"kv_dim: {kv_dim} channels in groups of {t.group} fit no tile of 16..256 channels")
    return bm, bn, bk, warps, stages


def reconstruct(k: QuantTensor, v: QuantTensor, k_prev, v_prev, pred: Predictors, k_hat=None, v_hat=None,
                big_rows: int = BIG_ROWS, preinit: bool = False):
    """K^, V^ [B, l_q, d_kv] bf16 of one layer's quantized tokens (the family's docstring) from the stored
    residuals k, v ([B, 1, l_q, ...] plain layout, validate.common.recipes) and the previous layer's K^_prev,
    V^_prev [B, l_q, d_kv]; the big tiles from `big_rows` rows on (TUNED_BIG_ROWS: the variant "tuned"), the residual
    as the initial accumulator with `preinit` (predict_kernel's PREINIT)."""
    import torch

    batch, nq, kv_dim = k_prev.shape
    t = k.recipe
    assert v.recipe == t and k.nq == v.nq == nq and k.tensors["codes"].shape[1] == 1
    k_hat = torch.empty_like(k_prev) if k_hat is None else k_hat
    v_hat = torch.empty_like(v_prev) if v_hat is None else v_hat
    if nq == 0:
        return k_hat, v_hat
    interpret = interpreting()
    bm, bn, bk, warps, stages = tiles(t, kv_dim, batch * nq, interpret, big_rows)
    io = kernel_io(k, v, k_prev, v_prev, pred, k_hat, v_hat)
    assert all(x.is_contiguous() for xs in io.values() for x in xs)
    ce = {"D": kv_dim, "G": t.group, "BITS_A": t.planes[0], "BITS_B": t.planes[1], "MODE": MODES[t.mode],
          "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "UPCAST": interpret}
    # one program: BLOCK_M rows (sequence, token) x BLOCK_N output channels of K^ (then of V^)
    grid = (triton.cdiv(batch * nq, bm) * (kv_dim // bn),)
    for q, x1, x2, w, b, out, two in ((k, k_prev, k_prev, pred.w_k, pred.b_k, k_hat, False),
                                      (v, v_prev, k_hat, pred.w_v, pred.b_v, v_hat, True)):
        ts = q.tensors
        predict_kernel[grid](x1, x2, w, b, ts["codes"], ts["scale"], ts.get("zero", ts["scale"]), out, batch * nq,
                             TWO_INPUTS=two, PREINIT=preinit, **ce, num_warps=warps, num_stages=stages)
    return k_hat, v_hat
