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

Residual storage: the bytes of roofline's TensorQuant for the method (packing.py layout, one "head" of
d_kv channels per token). HIGGS (RHT + a 2-D grid of n = 2^(2b) points, one fp16 norm per
G = min(1024, d_kv) values) is replaced by a symmetric uniform grid of b bits per value with one fp16
scale per G-group, x = s (u - 2^(b-1)): the same bytes (b/8 per value + 2/G), no Hadamard transform
(roofline counts 2 d_kv log2 G vector FLOPs per token for it, 0.3% of the op's FLOPs at d_kv = 1024).
The "uniform" quantizer (asymmetric, fp16 scale and zero per group of 64) is the same layout plus zeros.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import triton
import triton.language as tl

from roofline.validation.families import aquakv as predicted
from validate.families.attention_fp16 import relative_rms
from validate.families.packing import MODES, QuantTensor, TensorRecipe, quantize, tensor_shapes
from validate.families.quant_attention import _affine, _channel_codes, _float, _operand, _repeat
from validate.registry import Case, register

KV_HEADS, HEAD_DIM, HEADS, HIDDEN = 8, 128, 24, 3072  # Llama-3.2-3B: d_kv = 8 x 128 = 1024
KV_DIM = KV_HEADS * HEAD_DIM
METHOD = "aquakv-2"
BATCHES = (1, 8)
CONTEXTS = (1024, 4096, 16384, 65536)
QUICK = ((1, 4096), (8, 65536))
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): the best of 8 configurations on an H200 (triton 3.6),
# 528 TFLOP/s at 130K rows; below BIG_ROWS the small tiles fill the SMs (214 vs 132 TFLOP/s at 896 rows)
GPU_TILES = {"big": (128, 256, 64, 8, 3), "small": (64, 128, 64, 4, 3)}
BIG_ROWS = 32768
CHECK_ROWS = 2048


@triton.jit
def _gemm(acc, x_ptr, w_ptr, toks, ok, cols, D: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr):
    """acc += x[toks, :] @ w[:, cols] for x [rows, D] and w [D, D] (bf16, row-major)."""
    kk = tl.arange(0, BLOCK_K)
    x_rows = x_ptr + toks[:, None] * D  # [BLOCK_M, 1]
    w_cols = w_ptr + cols[None, :]  # [1, BLOCK_N]
    for k0 in range(0, D, BLOCK_K):
        x = tl.load(x_rows + (k0 + kk)[None, :], mask=ok[:, None], other=0.0)  # [BLOCK_M, BLOCK_K]
        w = tl.load(w_cols + (k0 + kk).to(tl.int64)[:, None] * D)  # [BLOCK_K, BLOCK_N]
        acc = tl.dot(_operand(x, UPCAST), _operand(w, UPCAST), acc)
    return acc


@triton.jit
def predict_kernel(x1_ptr, x2_ptr, w_ptr, bias_ptr, codes_ptr, scale_ptr, zero_ptr, out_ptr, rows,
                   D: tl.constexpr, TWO_INPUTS: tl.constexpr, G: tl.constexpr, BITS_A: tl.constexpr,
                   BITS_B: tl.constexpr, MODE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, UPCAST: tl.constexpr):
    """out = x1 @ w[:D] (+ x2 @ w[D:2D]) + bias + a*u + c, one [BLOCK_M, BLOCK_N] tile per program."""
    pid = tl.program_id(0)
    # the D / BLOCK_N programs of one row block run side by side: its x rows are read once from DRAM
    pid_m = pid // (D // BLOCK_N)
    pid_n = pid % (D // BLOCK_N)
    toks = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)  # [BLOCK_M] rows (sequence, token)
    ok = toks < rows
    c0 = pid_n * BLOCK_N
    cols = c0 + tl.arange(0, BLOCK_N)  # [BLOCK_N] output channels
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc = _gemm(acc, x1_ptr, w_ptr, toks, ok, cols, D, BLOCK_K, UPCAST)
    if TWO_INPUTS:
        acc = _gemm(acc, x2_ptr, w_ptr + D * D, toks, ok, cols, D, BLOCK_K, UPCAST)
    acc += tl.load(bias_ptr + cols).to(tl.float32)[None, :]
    # the residual: GT = groups of G channels in the tile (1 when a group spans several tiles)
    GT: tl.constexpr = BLOCK_N // G if BLOCK_N > G else 1
    gi = tl.arange(0, GT)
    a, c = _affine(scale_ptr, zero_ptr, toks[:, None] * (D // G) + c0 // G + gi[None, :], ok[:, None], MODE,
                   1 << (BITS_A + BITS_B - 1))  # [BLOCK_M, GT]
    u = _channel_codes(codes_ptr, toks, ok, c0, BLOCK_N, D, BITS_A, BITS_B)  # [BLOCK_M, BLOCK_N]
    acc += _repeat(a, BLOCK_N // GT) * _float(u) + _repeat(c, BLOCK_N // GT)
    tl.store(out_ptr + toks[:, None] * D + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=ok[:, None])


def storage(spec: str, kv_dim: int) -> TensorRecipe:
    """The residual's storage for an AQUA-KV SPEC: roofline's AquaKV.residual_quant(d_kv) (HIGGS b bits + one
    fp16 norm per min(hadamard_group, d_kv) channels, stored here as a symmetric uniform grid of the same bytes;
    or uniform b bits + fp16 scale and zero per group_size channels; sinks and a block buffer in fp16)."""
    from roofline.methods import parse_method

    config = parse_method(spec)
    if config.method != "aquakv":
        raise ValueError(f"method: {spec!r} is not aquakv")
    if config.predictor != "linear" or config.decode != "reference":
        raise ValueError(f"method {spec!r}: the kernel runs linear predictors in the reference decode only")
    if float(config.bits) != int(config.bits):
        raise ValueError(f"bits: {config.bits} is not a whole number of bits per packed value")
    return TensorRecipe(config.residual_quant(kv_dim))


@dataclass
class Predictors:
    """One layer's linear predictors, x @ W + b: w_k [d_kv, d_kv], w_v [2 d_kv, d_kv] (rows: V^_prev, then
    K^), biases [d_kv]; all bf16."""

    w_k: object
    b_k: object
    w_v: object
    b_v: object

    @classmethod
    def random(cls, kv_dim: int, device="cpu", generator=None) -> Predictors:
        import torch

        def randn(*shape, scale=1.0):
            return (torch.randn(*shape, device=device, generator=generator) * scale).to(torch.bfloat16)

        return cls(randn(kv_dim, kv_dim, scale=kv_dim ** -0.5), randn(kv_dim, scale=0.1),
                   randn(2 * kv_dim, kv_dim, scale=(2 * kv_dim) ** -0.5), randn(kv_dim, scale=0.1))


def kernel_io(k: QuantTensor, v: QuantTensor, k_prev, v_prev, pred: Predictors, k_hat, v_hat) -> dict[str, list]:
    """The tensors the two launches read and write, by roofline traffic class: `reconstruct` passes the
    kernel these and no other pointer (zeros only where stored), so the physical-bytes test counts them."""
    meta = [t for q in (k, v) for t in (q.tensors["codes"], q.tensors["scale"], q.tensors.get("zero")) if t is not None]
    return {"weights": [pred.w_k, pred.b_k, pred.w_v, pred.b_v], "kv_read": meta,
            "act_read": [k_prev, v_prev, k_hat], "act_write": [k_hat, v_hat]}


def tiles(t: TensorRecipe, kv_dim: int, rows: int, interpret: bool) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): GPU_TILES by rows on a GPU, 32-wide under the
    interpreter; BLOCK_N and BLOCK_K divide d_kv and BLOCK_N is a multiple or a divisor of G."""
    bm, bn, bk, warps, stages = (32, 32, 32, 4, 1) if interpret else GPU_TILES["big" if rows >= BIG_ROWS else "small"]
    while bn > 16 and (kv_dim % bn or (bn % t.group and t.group % bn)):
        bn //= 2
    while bk > 16 and kv_dim % bk:
        bk //= 2
    if kv_dim % bn or kv_dim % bk or (bn % t.group and t.group % bn):
        raise ValueError(f"kv_dim: {kv_dim} channels in groups of {t.group} fit no tile of 16..256 channels")
    return bm, bn, bk, warps, stages


def reconstruct(k: QuantTensor, v: QuantTensor, k_prev, v_prev, pred: Predictors, k_hat=None, v_hat=None):
    """K^, V^ [B, l_q, d_kv] bf16 of one layer's quantized tokens (module docstring) from the stored
    residuals k, v ([B, 1, l_q, ...] packing layout) and the previous layer's K^_prev, V^_prev [B, l_q, d_kv]."""
    import torch

    batch, nq, kv_dim = k_prev.shape
    t = k.recipe
    assert v.recipe == t and k.nq == v.nq == nq and k.tensors["codes"].shape[1] == 1
    k_hat = torch.empty_like(k_prev) if k_hat is None else k_hat
    v_hat = torch.empty_like(v_prev) if v_hat is None else v_hat
    if nq == 0:
        return k_hat, v_hat
    interpret = os.environ.get("TRITON_INTERPRET", "0") == "1"
    bm, bn, bk, warps, stages = tiles(t, kv_dim, batch * nq, interpret)
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
                             TWO_INPUTS=two, **ce, num_warps=warps, num_stages=stages)
    return k_hat, v_hat


def dequantize(q: QuantTensor):
    """Residuals [B, l_q, d_kv] fp32 from the stored codes and metadata: x = a*u + c (packing.py)."""
    import torch

    t = q.recipe
    codes = q.tensors["codes"][:, 0].to(torch.int64)  # [B, l_q, d_kv*b/8]
    a_bits, c_bits = t.planes
    dim = codes.shape[-1] * 8 // (a_bits + c_bits)
    split = dim * a_bits // 8
    u = _unpack(codes[..., :split], a_bits)
    if c_bits:
        u = u | (_unpack(codes[..., split:], c_bits) << a_bits)
    s = q.tensors["scale"][:, 0].float().repeat_interleave(t.group, dim=-1)
    if t.mode == "symmetric":
        return s * (u - 2 ** (t.storage_bits - 1))
    return s * u + q.tensors["zero"][:, 0].float().repeat_interleave(t.group, dim=-1)


def _unpack(byte, width: int):
    """Inverse of packing._pack_plane along the last dim: code k of byte w (bits k*width..) -> w*8/width + k."""
    import torch

    shifts = torch.arange(8 // width, device=byte.device) * width
    return ((byte[..., None] >> shifts) & ((1 << width) - 1)).flatten(-2)


def reference(k: QuantTensor, v: QuantTensor, k_prev, v_prev, pred: Predictors, dtype=None):
    """The kernel's result in fp32 torch on the same inputs, K^ and V^ stored in `dtype` (bf16 by default);
    V's predictor reads K^ as stored."""
    import torch

    dtype = torch.bfloat16 if dtype is None else dtype
    k_hat = (k_prev.float() @ pred.w_k.float() + pred.b_k.float() + dequantize(k)).to(dtype)
    x = torch.cat([v_prev.float(), k_hat.float()], dim=-1)
    v_hat = (x @ pred.w_v.float() + pred.b_v.float() + dequantize(v)).to(dtype)
    return k_hat, v_hat


def encode(k, v, k_prev, v_prev, pred: Predictors, t: TensorRecipe) -> tuple[QuantTensor, QuantTensor]:
    """AQUA-KV's encoding (Alg. 2) of a layer's K, V [B, L, d_kv] given the previous layer's K^, V^ of the
    same tokens: the quantized tokens store K - f_K(K^_prev) and V - f_V([V^_prev; K^]); the sinks and
    the buffer store K, V themselves in fp16."""
    import torch

    sinks, nq, _ = t.split(k.shape[1])
    mid = slice(sinks, sinks + nq)
    pk = k_prev[:, mid].float() @ pred.w_k.float() + pred.b_k.float()
    xk = k.float().clone()
    xk[:, mid] -= pk
    qk, deq_k = quantize(xk[:, None], t)
    k_hat = (pk + deq_k[:, 0, mid]).to(torch.bfloat16)
    pv = torch.cat([v_prev[:, mid], k_hat], dim=-1).float() @ pred.w_v.float() + pred.b_v.float()
    xv = v.float().clone()
    xv[:, mid] -= pv
    qv, _ = quantize(xv[:, None], t)
    return qk, qv


def random_layer(t: TensorRecipe, batch: int, context: int, kv_dim: int, device="cpu", generator=None):
    """Random stored residuals k, v (codes and positive metadata, never zeros; no sinks or buffer: the
    kernel never reads them) and bf16 K^_prev, V^_prev [B, l_q, d_kv]."""
    import torch

    _, nq, _ = t.split(context)
    out = []
    for _ in range(2):
        tensors = {}
        for name, (part, shape, dtype) in tensor_shapes(t, batch, 1, context, kv_dim).items():
            if part == "data":
                tensors[name] = torch.randint(0, 256, shape, dtype=torch.uint8, device=device, generator=generator)
            elif part == "metadata":
                tensors[name] = (0.05 + 0.1 * torch.rand(shape, device=device, generator=generator)).to(dtype)
        out.append(QuantTensor(t, tensors, min(context, t.sinks), nq, context - nq - min(context, t.sinks)))
    prev = [torch.randn(batch, nq, kv_dim, device=device, generator=generator).to(torch.bfloat16) for _ in range(2)]
    return out[0], out[1], prev[0], prev[1]


def sm90_specs(kv_dim: int = KV_DIM, method: str = METHOD) -> list[dict]:
    """validate.sm90 compile specs of the K and V launches, small and big tiles, at the bench shape
    (Llama-3.2-3B, d_kv = 1024). "divisible": the arguments the JIT sees as multiples of 16 on a GPU."""
    t = storage(method, kv_dim)
    sig = {"x1_ptr": "*bf16", "x2_ptr": "*bf16", "w_ptr": "*bf16", "bias_ptr": "*bf16", "codes_ptr": "*u8",
           "scale_ptr": "*fp16", "zero_ptr": "*fp16", "out_ptr": "*bf16", "rows": "i32"}
    specs = []
    for rows in (BIG_ROWS - 1, BIG_ROWS):
        bm, bn, bk, warps, stages = tiles(t, kv_dim, rows, interpret=False)
        ce = {"D": kv_dim, "G": t.group, "BITS_A": t.planes[0], "BITS_B": t.planes[1], "MODE": MODES[t.mode],
              "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "UPCAST": False}
        specs += [{"module": __name__, "kernel": "predict_kernel", "signature": sig, "num_warps": warps,
                   "num_stages": stages, "constexprs": {**ce, "TWO_INPUTS": two}, "divisible": list(sig)}
                  for two in (False, True)]
    return specs


def _check(t: TensorRecipe, kv_dim: int, rows: int) -> float:
    """Relative RMS of the kernel against the torch reference on random rows, with the tiles of `rows`."""
    check = BIG_ROWS if rows >= BIG_ROWS else CHECK_ROWS
    k, v, k_prev, v_prev = random_layer(t, 1, check + t.sinks + t.window, kv_dim, "cuda")
    pred = Predictors.random(kv_dim, "cuda")
    got = reconstruct(k, v, k_prev, v_prev, pred)
    want = reference(k, v, k_prev, v_prev, pred)
    error = max(relative_rms(g, w) for g, w in zip(got, want, strict=True))
    if error > 1e-2:
        raise AssertionError(f"kernel differs from the torch reference: relative RMS {error:.3g}")
    return error


def _run(case: Case) -> dict:
    import torch

    from validate.harness import eager_ms, graph_ms, rotation_count

    p = case.params
    kv_dim = p["num_kv_heads"] * p["head_dim"]
    t = storage(p["method"], kv_dim)
    rows = p["batch"] * t.split(p["context"])[1]
    error = _check(t, kv_dim, rows)

    def make():
        k, v, k_prev, v_prev = random_layer(t, p["batch"], p["context"], kv_dim, "cuda")
        return k, v, k_prev, v_prev, Predictors.random(kv_dim, "cuda"), torch.empty_like(k_prev), \
            torch.empty_like(v_prev)

    probe = make()
    set_bytes = sum(x.numel() * x.element_size() for xs in kernel_io(*probe).values() for x in xs)
    sets = [probe] + [make() for _ in range(rotation_count(set_bytes) - 1)]
    return {"ms": graph_ms(reconstruct, sets), **predicted.work(case.params), "eager_ms": eager_ms(reconstruct, sets),
            "rows": rows, "rotation": len(sets), "check_rel_rms": error, "tiles": list(tiles(t, kv_dim, rows, False))}


@register
class AquaKVReconstruct:
    name = "aquakv"

    def cases(self, quick: bool) -> list[Case]:
        grid = QUICK if quick else [(b, n) for b in BATCHES for n in CONTEXTS]
        return [Case(self.name, f"{METHOD}_b{b}_l{n}", {"method": METHOD, "batch": b, "context": n, "num_heads": HEADS,
                                                        "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM})
                for b, n in grid]

    def run(self, case: Case) -> dict:
        return _run(case)

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)
