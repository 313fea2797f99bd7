"""xquant materialized_cublas: dequant_kernel + one batched torch.bmm + rope_kernel + flash-decoding (interpreted,
small shapes) against the float32 reference; the prediction's pieces (bytes, FLOPs, the GEMM's tile wave factor)
derived by hand; the grid, the fresh draw's template pool and the kernel count; the sm_90 compiles."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from roofline.validation.results_file import Case  # noqa: E402
from validate import fresh  # noqa: E402
from validate.common.reference import attend  # noqa: E402
from validate.common.sm90 import H100_SHARED_BYTES, shared_bytes  # noqa: E402
from validate.common.testing import relative_rms  # noqa: E402
from validate.model.families import xquant as predicted  # noqa: E402
from validate.model.fixed_costs import kernels  # noqa: E402
from validate.model.hardware import load_hardware  # noqa: E402
from validate.ops import get  # noqa: E402
from validate.ops.xquant import cases as fam  # noqa: E402
from validate.ops.xquant import launch as xk  # noqa: E402
from validate.ops.xquant import reference as xref  # noqa: E402


def _layer(batch, kv_heads, dim, latent, context, group, seed):
    g = torch.Generator().manual_seed(seed)
    spread = torch.exp(0.5 * torch.randn(1, 1, latent, generator=g))  # latent channels differ in range
    x_k = torch.randn(batch, context, latent, generator=g) * spread
    x_v = torch.randn(batch, context, latent, generator=g)
    w = [torch.randn(latent, kv_heads * dim, generator=g) * latent ** -0.5 for _ in "kv"]
    return xk.build_layer(x_k, x_v, *w, kv_heads, 2, group), g


# (batch, q heads, kv heads, d_h, latent, context, G, splits, block_n, r_block): an fp16 K window of 4 tokens
# (100 mod 32) and a partial V block, no window at all (64 = 2 G), one sequence with a 13-token window
@pytest.mark.parametrize(("batch", "heads", "kv_heads", "dim", "latent", "context", "group", "splits", "block_n",
                          "r_block"), [(2, 8, 2, 32, 64, 100, 32, 3, 16, 32), (1, 4, 2, 16, 64, 64, 32, 1, 32, 64),
                                       (1, 8, 1, 32, 32, 45, 32, 2, 16, 32)])
def test_cublas_path_matches_reference(batch, heads, kv_heads, dim, latent, context, group, splits, block_n,
                                       r_block) -> None:
    layer, g = _layer(batch, kv_heads, dim, latent, context, group, seed=context)
    rows = batch * context
    x = torch.full((2, rows, latent), float("nan"), dtype=torch.bfloat16)  # unwritten rows would stay NaN
    xk.dequantize(layer, x, block_n, r_block)
    for plane, want in zip(x, layer.dequantized, strict=True):  # bf16 rounding only
        assert torch.isfinite(plane).all() and relative_rms(plane.view(batch, context, latent), want) < 5e-3
    kv = torch.full((2, rows, kv_heads * dim), float("nan"), dtype=torch.bfloat16)
    k, v = xk.cublas_remat(layer, xk.stacked_weights(layer), x, kv, block_n=block_n, r_block=r_block)
    # views of kv, no copy: token t of KV head h of sequence b at row b L + t, columns h d_h ..
    assert k.data_ptr() == kv[0].data_ptr() and k.stride() == (context * kv_heads * dim, dim, kv_heads * dim, 1)
    k_ref, v_ref = xref.remat_reference(layer)
    assert relative_rms(k, k_ref) < 1e-2 and relative_rms(v, v_ref) < 1e-2
    q = torch.randn(batch, heads, dim, generator=g).to(torch.bfloat16)
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16)
    got = xk.cublas_decode(q, layer, xk.stacked_weights(layer), splits, out, x, kv, block_n=block_n, r_block=r_block)
    assert torch.isfinite(got).all() and relative_rms(got, attend(q, k, v)) < 1e-2
    # K, V rounded to bf16 twice (after the GEMM, after RoPE; the interpreter truncates) ~3e-3 a hop
    assert relative_rms(got, xref.reference(q, layer)) < 2e-2


def test_dequantize_takes_gqa_latents_only() -> None:
    layer, _ = _layer(1, 2, 16, 64, 64, 32, seed=0)
    with pytest.raises(ValueError, match="GQA"):
        xk.dequantize(xk.XLayer(layer.xk, None, layer.wk, layer.wv, 2, 64))


def test_cublas_ops_by_hand() -> None:
    # Llama-3.1-8B GQA latents r = 1024 (= H_kv d_h), 2-bit codes, groups of 128 with an fp16 scale and zero, per token
    # and sequence: codes 2 x 1024 x 2/8 = 512 B, scales and zeros 2 x 1024 / 128 x 4 = 64 B; bf16 x^K, x^V 4096 B
    b, n = 8, 4096
    p = fam.params("materialized_cublas", b, n)
    dequant, gemm, rope = (predicted.work_of(op, p) for op in predicted.cublas_ops(p))
    tokens = b * n
    assert dequant == {"bytes": tokens * (512 + 64 + 4096), "flops": tokens * 2 * 1024 * 2}  # a u + c per element
    # x^K, x^V read, K, V written (bf16), W_k and W_v once; two GEMMs of 2 r (H_kv d_h) FLOPs a token
    assert gemm == {"bytes": tokens * (4096 + 4096) + 2 * 1024 * 1024 * 2, "flops": tokens * 2 * 2 * 1024 * 1024}
    assert rope == {"bytes": tokens * 2 * 2048, "flops": tokens * 3 * 1024}  # K read and written, 3 FLOPs an element
    # the same work as materialized's remat kernel, plus the traffic between the three kernels: x^K, x^V written and
    # read back (2 x 4096 B), K read and rewritten by RoPE (2 x 2048 B)
    whole, mat = predicted.work(p), predicted.work(fam.params("materialized", b, n))
    assert whole["flops"] == mat["flops"] and whole["bytes"] - mat["bytes"] == tokens * (2 * 4096 + 2 * 2048)


def test_gemm_wave_factor_by_hand() -> None:
    hw = load_hardware("H100-SXM")
    per_sm = hw.measured.gemm_flops_per_s["bf16"] / 132  # 132 SMs: one SM's share of the measured GEMM ceiling
    # b1 L128: M = 128 rows, N = 1024 = 4 tiles of 256, K and V: 8 CTAs, one each on 8 SMs; each a 128 x 256 x 1024 tile
    p = fam.params("materialized_cublas", 1, 128)
    assert predicted.gemm_tiles(p) == 8
    pred = predicted.predict_params(p, hw)
    assert pred["parts"]["gemm"]["compute_s"] == pytest.approx(2 * 128 * 256 * 1024 / per_sm, rel=1e-9)
    # b32 L128K: 2 x 32768 x 4 = 262,144 CTAs in 1986 waves of 132 (the last one 8 CTAs short): 1986 x 132 / 262,144
    # = 1.00003 x the FLOPs at the device's rate
    p = fam.params("materialized_cublas", 32, 131072)
    assert predicted.gemm_tiles(p) == 262144
    pred = predicted.predict_params(p, hw)
    flops = 32 * 131072 * 4 * 1024 ** 2
    assert pred["parts"]["gemm"]["compute_s"] == pytest.approx(1986 * 132 / 262144 * flops / (132 * per_sm), rel=1e-9)
    assert pred["gemm_ceiling_fraction"] == pytest.approx(flops / pred["parts"]["gemm"]["time_s"]
                                                          / hw.measured.gemm_flops_per_s["bf16"])
    # every kernel its own roofline plus the per-kernel time; the attention as materialized's
    mat = predicted.predict_params(fam.params("materialized", 32, 131072), hw)
    assert pred["parts"]["attention"]["time_s"] == pytest.approx(mat["parts"]["attention"]["time_s"])
    assert pred["time_s"] == pytest.approx(sum(r["time_s"] for r in pred["parts"].values()))


def test_grid_quick_draw_and_kernels() -> None:
    family = get("xquant")
    full = [c for c in family.cases(False) if c.params["variant"] == "materialized_cublas"]
    mat = [c for c in family.cases(False) if c.params["variant"] == "materialized"]
    assert [(c.params["batch"], c.params["context"]) for c in full] == [(c.params["batch"], c.params["context"])
                                                                         for c in mat]
    assert len(full) == 3 * 18 and full[0].name == "materialized_cublas_b1_l128"
    assert {c.params["method"] for c in full} == {"xquant:bits=2,fused=false"}
    assert [c.name for c in family.cases(True) if c.params["variant"] == "materialized_cublas"] == [
        "materialized_cublas_b8_l4096"]
    assert not [c for c in fresh._grid(family) if c.params["variant"] == "materialized_cublas"]
    # dequant (middle; + TAIL with an fp16 window) + GEMM + rope + split + reduce
    assert kernels("xquant", fam.params("materialized_cublas", 1, 128)) == 5
    assert kernels("xquant", fam.params("materialized_cublas", 1, 4196)) == 6
    assert kernels("xquant", fam.params("materialized_cublas", 1, 100)) == 5
    case = Case("xquant", "x", fam.params("materialized_cublas", 1, 4196))
    pred = family.predict(case, load_hardware("H100-SXM"))
    assert pred["kernels"] == 6 and pred["extra_kernel_s"] > 0  # the TAIL launch beyond the four ops it times


def test_cublas_kernels_fit_h100_shared_memory() -> None:
    results = shared_bytes(fam.cublas_sm90_specs())
    assert [r["kernel"] for r in results] == ["dequant_kernel"] * 2 + ["rope_kernel"]
    assert all(0 <= r["shared"] <= H100_SHARED_BYTES for r in results)


def test_committed_prediction_is_this_model() -> None:
    import json

    from validate.fresh import load_cases
    from validate.ops.xquant import cublas_predict

    assert [c.as_dict() for c in load_cases(cublas_predict.CASES)] == [c.as_dict() for c in cublas_predict.grid_cases()]
    doc = json.loads(cublas_predict.OUT.read_text())
    for name, device in doc["devices"].items():
        hw = load_hardware(name)
        rows = {r["case"]: r for r in device["rows"]}
        assert len(rows) == 54
        for case in [c for c in cublas_predict.grid_cases() if c.name in ("materialized_cublas_b8_l4096",
                                                                           "materialized_cublas_b1_l4196")]:
            pred = get("xquant").predict(case, hw)
            assert rows[case.name]["predicted_ms"] == pytest.approx(pred["time_s"] * 1e3, rel=1e-9)
