"""XQuant's grid, its storage and inputs, how a case runs on the GPU, the sm_90 compile specs and the
prediction (roofline.validation: the roofline op that counts the same work)."""

from __future__ import annotations

import numpy as np
import torch

from roofline.validation.results_file import Case
from validate.common.flash_decode import decode_attention, decode_splits
from validate.common.harness import eager_ms, graph_ms, input_sets
from validate.common.quantize import QuantTensor, quantize
from validate.common.recipes import PARTS, TensorRecipe, tensor_shapes
from validate.common.testing import relative_rms
from validate.model.families import xquant as predicted
from validate.ops.xquant import kernel as xkernel
from validate.ops.xquant import launch as xk
from validate.ops.xquant import reference as xref

HEADS, KV_HEADS, HEAD_DIM, LATENT = 32, 8, 128, 1024  # Llama-3.1-8B: d = 4096, g = 4
MHA_KV_HEADS, MHA_LATENT = 32, 4096  # Llama-2-7B
BITS, GROUP = 2, 128
BATCHES = (1, 8, 32)
# powers of two and a few between, multiples of G = 128 (no fp16 K window), the short end bracketing the
# modelled crossover (B L ~ 300 tokens); WINDOWED adds contexts whose last L mod 128 K latents are fp16
CONTEXTS = (128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 16384, 32768, 65536, 131072)
WINDOWED = (100, 4196)
MHA_GRID = tuple((1, n) for n in (128, 256, 512, 1024, 2048, 4096, 8192, 16384)) + ((8, 1024), (8, 8192))
# (e_b, B, L, GQA up-projection through U_kv^T)
ACC_GRID = ((4, 1, 4096, False), (4, 8, 32768, False), (16, 8, 32768, False), (4, 32, 131072, False),
            (16, 32, 131072, False), (16, 8, 16384, True))
QUICK = (("fused", 1, 512), ("fused", 1, 8192), ("fused", 8, 4096), ("fused", 32, 65536), ("materialized", 8, 4096),
         ("mha_fused", 1, 2048), ("materialized_cublas", 8, 4096))
# GQA variants over BATCHES x (CONTEXTS + WINDOWED); materialized_cublas (launch.cublas_decode) came after the
# committed fresh draw (validate/results/fresh/cases.json), so validate.fresh leaves it out of its templates (UNDRAWN)
GRID_VARIANTS = ("fused", "materialized", "materialized_cublas")
UNDRAWN = ("materialized_cublas",)
QUICK_ACC = ((4, 8, 32768, False),)
SPECS = {"fused": "xquant:bits=2", "materialized": "xquant:bits=2,fused=false",
         "materialized_cublas": "xquant:bits=2,fused=false", "mha_fused": "xquant:bits=2"}
CHECK_TOKENS = 2048


def acc_spec(acc_bits: int) -> str:
    """A one-delta-layer XQuant-CL config: layer 0 the base, layer 1 stores e-bit deltas."""
    return f"xquant:bits={BITS},cross_layer=true,high_precision_layers=1,accumulator_bits={acc_bits}"


def params(variant: str, batch: int, context: int, acc_bits: int | None = None, up: bool = False) -> dict:
    """A case's parameters; acc_update is MHA-CL (delta d wide) unless `up` (GQA-CL, delta 2 d/g wide)."""
    mha = variant == "mha_fused" or (variant == "acc_update" and not up)
    p = {"variant": variant, "method": SPECS.get(variant) or acc_spec(acc_bits), "bits": BITS, "group_size": GROUP,
         "batch": batch, "context": context, "num_heads": HEADS, "num_kv_heads": MHA_KV_HEADS if mha else KV_HEADS,
         "head_dim": HEAD_DIM, "latent": MHA_LATENT if mha else LATENT}
    if variant == "acc_update":
        p.update(accumulator_bits=acc_bits, up_projection=up, delta_width=2 * LATENT if up else HEADS * HEAD_DIM)
    return p


def recipes(p: dict) -> tuple[TensorRecipe, TensorRecipe | None]:
    if p["variant"] == "acc_update":
        return xk.recipes(p["bits"], p["group_size"], mha=True)  # XQuant-CL's delta: per-token groups, no window
    return xk.recipes(p["bits"], p["group_size"], p["variant"] == "mha_fused")


def _shapes(p: dict) -> list[tuple[str, tuple, object]]:
    """(part, shape, dtype) of every tensor a case's kernel reads or writes, for the whole batch."""
    batch, context = p["batch"], p["context"]
    rk, rv = recipes(p)
    if p["variant"] == "acc_update":
        d = p["num_heads"] * p["head_dim"]
        acc = ((batch, context, d // 2), torch.uint8) if p["accumulator_bits"] == 4 else ((batch, context, d),
                                                                                          torch.bfloat16)
        out = [(part, s, t) for part, s, t in tensor_shapes(rk, batch, 1, context, p["delta_width"]).values()]
        out += [("accumulator_read", *acc), ("accumulator_write", *acc)]
        return out + ([("weights", (p["delta_width"], d), torch.bfloat16)] if p["up_projection"] else [])
    out = []
    for rec in filter(None, (rk, rv)):
        out += list(tensor_shapes(rec, batch, 1, context, p["latent"]).values())
    kv_dim = p["num_kv_heads"] * p["head_dim"]
    return out + [("weights", (p["latent"], kv_dim), torch.bfloat16)] * 2


def layout_bytes(p: dict) -> dict[str, int]:
    """Bytes by part of what the case's kernel allocates and reads (the batch): latent codes (data),
    scales and zeros (metadata), fp16 window, remat weights; for acc_update, the delta, the accumulator
    read and written, U_kv^T."""
    out = dict.fromkeys((*PARTS, "weights", "accumulator_read", "accumulator_write"), 0)
    for part, shape, dtype in _shapes(p):
        out[part] += int(np.prod(shape)) * torch.empty((), dtype=dtype).element_size()
    return out


def random_tensor(rec: TensorRecipe, batch: int, context: int, width: int, device) -> QuantTensor:
    """Random stored latent (codes any byte, scales in [0.01, 0.06), zeros and window ~ N(0, 0.1)): a timing
    input, never zeros, without quantizing a full-size fp32 tensor first."""
    tensors = {}
    for name, (_, shape, dtype) in tensor_shapes(rec, batch, 1, context, width).items():
        if name == "codes":
            tensors[name] = torch.randint(0, 256, shape, dtype=dtype, device=device)
        elif name == "scale":
            tensors[name] = (torch.rand(shape, device=device) * 0.05 + 0.01).to(dtype)
        else:
            tensors[name] = (torch.randn(shape, device=device) * 0.1).to(dtype)
    sinks, nq, recent = rec.split(context)
    return QuantTensor(rec, tensors, sinks, nq, recent)


def random_weights(p: dict, device):
    shape = (p["latent"], p["num_kv_heads"] * p["head_dim"])
    return tuple((torch.randn(shape, device=device) * p["latent"] ** -0.5).to(torch.bfloat16) for _ in range(2))


def random_layer(p: dict, weights, device):
    rk, rv = recipes(p)
    x_k = random_tensor(rk, p["batch"], p["context"], p["latent"], device)
    x_v = random_tensor(rv, p["batch"], p["context"], p["latent"], device) if rv else None
    return xk.XLayer(x_k, x_v, *weights, p["num_kv_heads"], p["context"])


def check(p: dict, device="cuda") -> float:
    """Relative RMS of the case's kernel against the float32 torch reference on really quantized random
    latents (one sequence, <= CHECK_TOKENS tokens); raises above 2e-2."""

    g = torch.Generator(device=device).manual_seed(0)
    n, r = min(p["context"], CHECK_TOKENS), p["latent"]
    spread = torch.exp(0.5 * torch.randn(1, 1, r, device=device, generator=g))
    x_k = torch.randn(1, n, r, device=device, generator=g) * spread
    x_v = None if p["variant"] == "mha_fused" else torch.randn(1, n, r, device=device, generator=g)
    w = [torch.randn(r, p["num_kv_heads"] * p["head_dim"], device=device, generator=g) * r ** -0.5 for _ in "kv"]
    layer = xk.build_layer(x_k, x_v, *w, p["num_kv_heads"], p["bits"], p["group_size"])
    q = torch.randn(1, p["num_heads"], p["head_dim"], device=device, generator=g).to(torch.bfloat16)
    if p["variant"] == "materialized_cublas":
        got = xk.cublas_decode(q, layer, xk.stacked_weights(layer), 4)
    else:
        got = xk.materialized_decode(q, layer, 4) if p["variant"] == "materialized" else xk.decode(q, layer)
    error = relative_rms(got, xref.reference(q, layer))
    if error > 2e-2:
        raise AssertionError(f"kernel differs from the torch reference: relative RMS {error:.3g}")
    return error


def _bench(set_bytes: int, make, call, extra: dict | None = None) -> dict:
    sets = input_sets(make, set_bytes)
    out = {"ms": graph_ms(call, sets), "eager_ms": eager_ms(call, sets), "rotation": len(sets)}
    for name, fn in (extra or {}).items():
        out[name] = graph_ms(fn, sets)
    return out


def _set_bytes(p: dict) -> int:
    """Bytes of one input set (what rotates to defeat L2): all but the weights, which every set shares."""
    return sum(v for k, v in layout_bytes(p).items() if k != "weights")


def _run_attention(p: dict) -> dict:

    error = check(p)
    batch, heads, dim, context = p["batch"], p["num_heads"], p["head_dim"], p["context"]
    weights = random_weights(p, "cuda")
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    out, work = torch.empty(batch, heads, dim, dtype=torch.bfloat16, device="cuda"), {}
    if p["variant"] != "materialized":
        def make():
            return torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda"), random_layer(p, weights, "cuda")

        timed = _bench(_set_bytes(p), make, lambda q, layer: xk.decode(q, layer, None, out, work))
        return {**timed, "check_rel_rms": error}
    splits = decode_splits(batch * p["num_kv_heads"], context, sms, 128)
    shape = (batch, p["num_kv_heads"], context, dim)

    def make_kv():
        q = torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda")
        kv = tuple(torch.empty(shape, dtype=torch.bfloat16, device="cuda") for _ in "kv")
        return q, random_layer(p, weights, "cuda"), kv

    def remat(q, layer, kv):
        return xk.materialize(layer, kv)

    def attention(q, layer, kv):
        return decode_attention(q, *kv, splits, out=out)

    kv_bytes = 2 * 2 * batch * p["num_kv_heads"] * context * dim
    timed = _bench(_set_bytes(p) + kv_bytes, make_kv,
                   lambda q, layer, kv: xk.materialized_decode(q, layer, splits, out, kv),
                   {"remat_ms": remat, "attention_ms": attention})
    return {**timed, "num_splits": splits, "check_rel_rms": error}


def _run_cublas(p: dict) -> dict:
    """launch.cublas_decode timed as _run_attention times materialized (graph replays over rotated input sets, each
    with its own bf16 latents x and K, V buffer kv), split into remat_ms (dequant_ms + gemm_ms + rope_ms, each also
    timed alone) and attention_ms; gemm_kernels: the CUDA kernels one torch.bmm call ran (the tile cuBLAS chose)."""
    error = check(p)
    batch, heads, dim, context, kv_heads = p["batch"], p["num_heads"], p["head_dim"], p["context"], p["num_kv_heads"]
    weights = random_weights(p, "cuda")
    w = torch.stack(weights).contiguous()  # launch.stacked_weights' [2, r, H_kv d_h], shared by the sets
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    splits = decode_splits(batch * kv_heads, context, sms, 128)
    out, rows = torch.empty(batch, heads, dim, dtype=torch.bfloat16, device="cuda"), batch * context

    def make():
        q = torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda")
        x = torch.empty(2, rows, p["latent"], dtype=torch.bfloat16, device="cuda")
        kv = torch.empty(2, rows, kv_heads * dim, dtype=torch.bfloat16, device="cuda")
        return q, random_layer(p, weights, "cuda"), x, kv

    def remat(q, layer, x, kv):
        return xk.cublas_remat(layer, w, x, kv)

    def attention(q, layer, x, kv):
        return decode_attention(q, *xk.kv_views(kv, batch, kv_heads), splits, out=out)

    parts = {"remat_ms": remat, "attention_ms": attention,
             "dequant_ms": lambda q, layer, x, kv: xk.dequantize(layer, x),
             "gemm_ms": lambda q, layer, x, kv: torch.bmm(x, w, out=kv),
             "rope_ms": lambda q, layer, x, kv: xk.rope_(kv[0], context, kv_heads)}
    buffers = 2 * 2 * rows * (p["latent"] + kv_heads * dim)  # x and kv: bf16, two planes each
    timed = _bench(_set_bytes(p) + buffers, make, lambda q, layer, x, kv: xk.cublas_decode(
        q, layer, w, splits, out, x, kv), parts)
    return {**timed, "num_splits": splits, "check_rel_rms": error, "gemm_kernels": _gemm_kernels(p, w)}


def _gemm_kernels(p: dict, w) -> list[str] | None:
    """Names of the CUDA kernels of one torch.bmm at the case's shape (torch.profiler; None where it fails): cuBLAS's
    kernel name carries its tile, which families.xquant.GEMM_TILE assumes."""
    try:
        from torch.profiler import ProfilerActivity, profile

        x = torch.ones(2, p["batch"] * p["context"], p["latent"], dtype=torch.bfloat16, device="cuda")
        kv = torch.empty(2, x.shape[1], w.shape[2], dtype=torch.bfloat16, device="cuda")
        torch.bmm(x, w, out=kv)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.bmm(x, w, out=kv)
            torch.cuda.synchronize()
        return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
    except Exception:  # the profiler is a diagnostic here, never a reason to lose the case
        return None


def check_acc(p: dict, u_t, device="cuda") -> float:
    """The accumulator update against acc_reference on a really quantized delta (<= CHECK_TOKENS tokens):
    relative RMS (bf16) or the fraction of 4-bit codes that differ; raises above 1e-2."""
    n, d = min(p["context"], CHECK_TOKENS), p["num_heads"] * p["head_dim"]
    delta, deq = quantize(torch.randn(1, 1, n, p["delta_width"], device=device), recipes(p)[0])
    if p["accumulator_bits"] == 4:
        acc = torch.randint(0, 256, (1, n, d // 2), dtype=torch.uint8, device=device)
    else:
        acc = torch.randn(1, n, d, device=device).to(torch.bfloat16)
    want = xref.acc_reference(deq[:, 0], acc.clone(), u_t, step=0.05)
    got = xk.acc_update(delta, acc, u_t, step=0.05)
    error = (got != want).float().mean().item() if p["accumulator_bits"] == 4 else relative_rms(got, want)
    if error > 1e-2:
        raise AssertionError(f"accumulator update differs from the torch reference: {error:.3g}")
    return error


def _run_acc(p: dict) -> dict:

    batch, context, d = p["batch"], p["context"], p["num_heads"] * p["head_dim"]
    rec, _ = recipes(p)
    u_t = (torch.randn(p["delta_width"], d, device="cuda") * p["delta_width"] ** -0.5).to(torch.bfloat16) \
        if p["up_projection"] else None
    error = check_acc(p, u_t)

    def make():
        delta = random_tensor(rec, batch, context, p["delta_width"], "cuda")
        if p["accumulator_bits"] == 4:
            return delta, torch.randint(0, 256, (batch, context, d // 2), dtype=torch.uint8, device="cuda")
        return delta, torch.randn(batch, context, d, device="cuda").to(torch.bfloat16)

    timed = _bench(_set_bytes(p), make, lambda delta, acc: xk.acc_update(delta, acc, u_t, step=0.05))
    return {**timed, "check_error": error}


def case_name(p: dict) -> str:
    if p["variant"] == "acc_update":
        return f"acc{p['accumulator_bits']}{'_up' if p['up_projection'] else ''}_b{p['batch']}_l{p['context']}"
    return f"{p['variant']}_b{p['batch']}_l{p['context']}"


class XQuantFamily:
    name = "xquant"
    undrawn = UNDRAWN  # validate.fresh: not a template of its draws

    def cases(self, quick: bool) -> list[Case]:
        if quick:
            grid = [params(v, b, n) for v, b, n in QUICK] + [params("acc_update", b, n, e, up)
                                                            for e, b, n, up in QUICK_ACC]
        else:
            grid = [params(v, b, n) for v in GRID_VARIANTS for b in BATCHES for n in CONTEXTS + WINDOWED]
            grid += [params("mha_fused", b, n) for b, n in MHA_GRID]
            grid += [params("acc_update", b, n, e, up) for e, b, n, up in ACC_GRID]
        return [Case(self.name, case_name(p), p) for p in grid]

    def run(self, case: Case) -> dict:
        p = case.params
        runs = {"acc_update": _run_acc, "materialized_cublas": _run_cublas}
        timed = runs.get(p["variant"], _run_attention)(p)
        return {**timed, **predicted.work(p)}

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)


def sm90_specs() -> list[dict]:
    """validate.common.sm90 compile specs of every kernel at the bench shapes (d_h 128, latents 1024 / 4096)."""

    ints = ("context", "nq_k", "win_k")
    lat = {**dict.fromkeys(("kc", "vc"), "*u8"), **dict.fromkeys(("ks", "kz", "kw", "vs", "vz"), "*fp16"),
           "wk": "*bf16", "wv": "*bf16", "log2_theta": "fp32", **dict.fromkeys(ints, "i32")}
    sigs = {"fused_kernel": {**lat, "q_ptr": "*bf16", **dict.fromkeys(("m_ptr", "l_ptr", "acc_ptr"), "*fp32"),
                             "qk_scale": "fp32", **dict.fromkeys(("chunk", "num_mid", "num_parts"), "i32")},
            "remat_kernel": {**lat, "k_out": "*bf16", "v_out": "*bf16"}}
    specs = []
    for variant, kernel, tail in (("fused", "fused_kernel", False), ("fused", "fused_kernel", True),
                                  ("mha_fused", "fused_kernel", False), ("materialized", "remat_kernel", False),
                                  ("materialized", "remat_kernel", True)):
        p = params(variant, 1, 4096)
        remat = kernel == "remat_kernel"
        r_block, stages = (xk.REMAT_R_BLOCK, xk.REMAT_STAGES) if remat else (xk.R_BLOCK, xk.NUM_STAGES)
        ce = {**xk.constexprs(recipes(p)[0], p["latent"], p["num_kv_heads"], HEAD_DIM, xk.BLOCK_N, r_block, False),
              "TAIL": tail, "PACKED": False, "EMU": False}
        if kernel == "fused_kernel":
            group = HEADS // p["num_kv_heads"]
            ce.update(GROUP=group, GROUP_PAD=max(16, 1 << (group - 1).bit_length()))
        specs.append({"module": xkernel.__name__, "kernel": kernel, "signature": sigs[kernel], "constexprs": ce,
                      "num_warps": xk.NUM_WARPS, "num_stages": stages})
    acc = {"dc": "*u8", "ds": "*fp16", "dz": "*fp16", "u_ptr": "*bf16", "step": "fp32", "inv_step": "fp32",
           "tokens": "i32"}
    for bits, up in ((4, False), (16, True)):
        p = params("acc_update", 1, 4096, bits, up)
        tiles = ((xk.ACC_UP_BLOCK_T, xk.ACC_UP_BLOCK_D, xk.ACC_UP_R_BLOCK, xk.ACC_UP_WARPS, xk.ACC_UP_STAGES) if up
                 else (xk.BLOCK_T, xk.BLOCK_D, xk.R_BLOCK, xk.NUM_WARPS, xk.NUM_STAGES))
        ce = xk.acc_constexprs(recipes(p)[0], HEADS * HEAD_DIM, p["delta_width"], up, bits, *tiles[:3], False)
        specs.append({"module": xkernel.__name__, "kernel": "acc_update_kernel", "constexprs": ce,
                      "num_warps": tiles[3], "signature": {**acc, "acc_ptr": "*u8" if bits == 4 else "*bf16"},
                      "num_stages": tiles[4]})
    p = params("acc_update", 1, 4096, 4, False)  # the 4-bit update's default kernel (launch.acc_variant: "words")
    specs.append({"module": "validate.ops.xquant.acc_words", "kernel": "acc4_words_kernel",
                  "constexprs": xk.acc4_constexprs(recipes(p)[0], HEADS * HEAD_DIM, xk.ACC4_BLOCK_T, xk.ACC4_BLOCK_D,
                                                   xk.ACC4_STEP_T, False),
                  "signature": {"dw_ptr": "*i16", "ds": "*fp16", "dz": "*fp16", "aw_ptr": "*i32", "inv_step": "fp32",
                                "tokens": "i32"}, "num_warps": xk.ACC4_WARPS, "num_stages": 3})
    return specs


def cublas_sm90_specs() -> list[dict]:
    """validate.common.sm90 compile specs of the cuBLAS path's Triton kernels as launch.dequantize (middle, TAIL)
    and launch.rope_ launch them at the bench shapes."""
    p = params("materialized_cublas", 1, 4096)
    ce = xk.constexprs(recipes(p)[0], p["latent"], p["num_kv_heads"], HEAD_DIM, xk.DEQ_BLOCK_N, xk.DEQ_R_BLOCK, False)
    ce = {k: ce[k] for k in ("K_TOKENS", "LAT", "BLOCK_N", "R", "BITS_A", "BITS_B", "G")}
    sig = {**dict.fromkeys(("kc", "vc"), "*u8"), **dict.fromkeys(("ks", "kz", "kw", "vs", "vz"), "*fp16"),
           "x_out": "*bf16", **dict.fromkeys(("context", "nq_k", "win_k"), "i32")}
    specs = [{"module": xkernel.__name__, "kernel": "dequant_kernel", "signature": sig,
              "constexprs": {**ce, "TAIL": tail}, "num_warps": xk.DEQ_WARPS, "num_stages": 3} for tail in (False, True)]
    return specs + [{"module": xkernel.__name__, "kernel": "rope_kernel",
                     "signature": {"k_ptr": "*bf16", "log2_theta": "fp32", "rows": "i32", "context": "i32"},
                     "constexprs": {"KV_HEADS": p["num_kv_heads"], "HEAD_DIM": HEAD_DIM, "BLOCK_T": xk.ROPE_BLOCK_T},
                     "num_warps": xk.ROPE_WARPS, "num_stages": 3}]
