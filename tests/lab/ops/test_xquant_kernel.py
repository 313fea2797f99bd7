"""xquant: fused and materialized XQuant decode and XQuant-CL's accumulator update.

The bytes each kernel allocates and reads equal roofline's (TensorLayout resident parts + the remat
op's weights; CL: delta + accumulator traffic); the Triton kernels (interpreted, small shapes with
windows and non-power-of-two contexts) match the float32 torch reference on the same dequantized
latents; every kernel compiles for sm_90 at the bench shapes within an H100's shared memory; the
crossover helpers recover a known two-regime curve and the roofline's own balance point.
"""

import math
import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import sympy  # noqa: E402
import torch  # noqa: E402

from roofline.catalogue import load_model  # noqa: E402
from roofline.methods import build_cache, parse_method  # noqa: E402
from roofline.units import L  # noqa: E402
from roofline.validation.results_file import Case  # noqa: E402
from validate.common.quantize import quantize  # noqa: E402
from validate.common.recipes import TensorRecipe  # noqa: E402
from validate.common.reference import attend  # noqa: E402
from validate.common.sm90 import H100_SHARED_BYTES, shared_bytes  # noqa: E402
from validate.common.testing import relative_rms  # noqa: E402
from validate.model.families import xquant as predicted  # noqa: E402
from validate.model.hardware import load_hardware  # noqa: E402
from validate.ops import get  # noqa: E402
from validate.ops.xquant import cases as fam  # noqa: E402
from validate.ops.xquant import launch as xk  # noqa: E402
from validate.ops.xquant import reference as xref  # noqa: E402

PARTS = ("data", "metadata", "window", "sinks")


def _at(expr, context: int) -> int:
    value = sympy.sympify(expr).subs(L, context)
    assert value.is_Integer, f"{expr} at L={context}: {value}"
    return int(value)


def roofline_bytes(model_name: str, spec: str, context: int, batch: int) -> dict[str, int]:
    """Resident parts of layer 0's tensors x batch, plus its remat op's weights."""
    layer = build_cache(parse_method(spec), load_model(model_name)).layers[0]
    out = dict.fromkeys(PARTS, 0)
    for tensor in layer.tensors:
        for part, value in tensor.resident.items():
            out[part] += batch * _at(value, context)
    (remat,) = layer.decode_ops
    return {**out, "weights": int(remat.weight_bytes)}


@pytest.mark.parametrize(("variant", "model_name"), [("fused", "Llama-3.1-8B"), ("materialized", "Llama-3.1-8B"),
                                                     ("mha_fused", "Llama-2-7B")])
@pytest.mark.parametrize(("context", "batch"), [(4096, 1), (1000, 3), (131072, 32), (37, 2)])
def test_physical_bytes_equal_roofline(variant, model_name, context, batch) -> None:
    p = fam.params(variant, batch, context)
    got = fam.layout_bytes(p)
    want = roofline_bytes(model_name, p["method"], context, batch)
    assert {k: got[k] for k in want} == want
    assert got["outliers"] == got["accumulator_read"] == got["accumulator_write"] == 0
    # Llama-3.1-8B at 2 bits: 2 x 1024 x (2 + 32/128) / 8 = 576 bytes per token, 2 x 1024^2 x 2 of weights
    if variant == "fused" and context == 4096:
        assert got == {**dict.fromkeys(got, 0), "data": 512 * 4096, "metadata": 64 * 4096, "weights": 4 << 20}


@pytest.mark.parametrize(("acc_bits", "up"), [(4, False), (16, False), (4, True), (16, True)])
@pytest.mark.parametrize(("context", "batch"), [(4096, 1), (1000, 2)])
def test_accumulator_bytes_equal_roofline(acc_bits, up, context, batch) -> None:
    p = fam.params("acc_update", batch, context, acc_bits, up)
    model = load_model("Llama-3.1-8B" if up else "Llama-2-7B")
    layers = build_cache(parse_method(p["method"]), model).layers
    (layer,) = [g for g in layers if g.tensors[0].name == "dX"]
    (dx,), (remat,) = layer.tensors, layer.decode_ops
    got = fam.layout_bytes(p)
    assert got["data"] + got["metadata"] == batch * _at(dx.resident_bytes, context) and got["window"] == 0
    assert got["accumulator_read"] == batch * _at(remat.kv_read_bytes, context)  # accumulator_rw = 2
    assert got["accumulator_write"] == batch * _at(remat.kv_write_bytes, context)
    d, kv = model.hidden_size, model.kv_dim
    assert got["weights"] == int(remat.weight_bytes) - d * 2 * kv * 2  # U_kv^T beside W_kv (MHA: none)


def small_layer(batch, kv_heads, dim, latent, context, group, mha, bits, seed=0):
    g = torch.Generator().manual_seed(seed)
    spread = torch.exp(0.5 * torch.randn(1, 1, latent, generator=g))  # latent channels differ in range
    x_k = torch.randn(batch, context, latent, generator=g) * spread
    x_v = None if mha else torch.randn(batch, context, latent, generator=g)
    w = [torch.randn(latent, kv_heads * dim, generator=g) * latent ** -0.5 for _ in "kv"]
    layer = xk.build_layer(x_k, x_v, *w, kv_heads, bits, group)
    return layer, (x_k, x_v if x_v is not None else x_k), g


# (batch, q heads, kv heads, d_h, latent r, context, group G, MHA, bits, splits, block_n, r_block): GQA with
# K windows of 5, 4 and 12 tokens (37, 100, 300 mod 32), uneven splits, groups along R wider and narrower
# than G, 3-bit codes in two planes, and MHA (one X for K and V, no window)
SHAPES = [
    (2, 8, 2, 32, 64, 37, 32, False, 2, 2, 32, 32),
    (1, 8, 2, 32, 64, 100, 32, False, 4, 3, 16, 64),
    (1, 4, 1, 32, 64, 300, 32, False, 3, 4, 32, 16),
    (2, 4, 4, 16, 64, 45, 32, True, 2, 2, 16, 32),
]


@pytest.mark.parametrize(("batch", "heads", "kv_heads", "dim", "latent", "context", "group", "mha", "bits", "splits",
                          "block_n", "r_block"), SHAPES)
def test_fused_matches_reference(batch, heads, kv_heads, dim, latent, context, group, mha, bits, splits, block_n,
                                 r_block, capsys) -> None:
    layer, (x_k, x_v), g = small_layer(batch, kv_heads, dim, latent, context, group, mha, bits)
    q = torch.randn(batch, heads, dim, generator=g).to(torch.bfloat16)
    out, work = torch.full(q.shape, float("nan"), dtype=torch.bfloat16), {}
    xk.decode(q, layer, splits, out, work, block_n, r_block)
    for buf in ("m", "l", "acc"):  # every partial is rewritten: an unwritten one would poison the output
        work[buf].fill_(float("nan"))
    out.fill_(float("nan"))
    got = xk.decode(q, layer, splits, out, work, block_n, r_block)
    assert torch.isfinite(got).all()
    tight = relative_rms(got, xref.reference(q, layer))
    full = xk.XLayer(layer.xk, layer.xv, layer.wk, layer.wv, kv_heads, context, dequantized=(x_k, x_v))
    loose = relative_rms(got, xref.reference(q, full))
    with capsys.disabled():
        print(f"\n  fused {'MHA' if mha else 'GQA'} {bits}-bit B={batch} L={context} r={latent}: vs reference "
              f"{tight:.2e}, vs unquantized latents {loose:.3f}")
    assert tight < 1e-2
    assert loose < (0.9 if bits == 2 else 0.4)


@pytest.mark.parametrize(("batch", "heads", "kv_heads", "dim", "latent", "context", "group", "mha", "bits", "splits",
                          "block_n", "r_block"), [SHAPES[0], SHAPES[2], SHAPES[3]])
def test_shared_matches_reference(batch, heads, kv_heads, dim, latent, context, group, mha, bits, splits, block_n,
                                  r_block) -> None:
    # shared_kernel: every KV head of a program (all of them: 2 GQA, 4 MHA; 1 where H_kv is 1) from one dequantized
    # latent tile, the query rows block-diagonal; NaN-filled partials and output must all be rewritten
    layer, _, g = small_layer(batch, kv_heads, dim, latent, context, group, mha, bits, seed=2)
    q = torch.randn(batch, heads, dim, generator=g).to(torch.bfloat16)
    work = {}
    xk.decode(q, layer, splits, None, work, block_n, r_block, variant="shared", heads_per_program=kv_heads)
    for buf in ("m", "l", "acc"):
        work[buf].fill_(float("nan"))
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16)
    got = xk.decode(q, layer, splits, out, work, block_n, r_block, variant="shared", heads_per_program=kv_heads)
    assert torch.isfinite(got).all()
    assert relative_rms(got, xref.reference(q, layer)) < 1e-2
    # the same partials as fused_kernel's up to accumulation order
    assert relative_rms(got, xk.decode(q, layer, splits, None, {}, block_n, r_block)) < 2e-3
    with pytest.raises(ValueError, match="heads_per_program"):
        xk.decode(q, layer, splits, None, {}, block_n, r_block, variant="shared", heads_per_program=3)


@pytest.mark.parametrize(("batch", "heads", "kv_heads", "dim", "latent", "context", "group", "mha", "bits", "splits",
                          "block_n", "r_block"), SHAPES)
def test_materialized_matches_reference(batch, heads, kv_heads, dim, latent, context, group, mha, bits, splits,
                                        block_n, r_block) -> None:
    layer, _, g = small_layer(batch, kv_heads, dim, latent, context, group, mha, bits, seed=1)
    shape = (batch, kv_heads, context, dim)
    kv = (torch.full(shape, float("nan"), dtype=torch.bfloat16), torch.full(shape, float("nan"), dtype=torch.bfloat16))
    k, v = xk.materialize(layer, kv, block_n, r_block)
    assert torch.isfinite(k).all() and torch.isfinite(v).all()
    k_ref, v_ref = xref.remat_reference(layer)
    assert relative_rms(k, k_ref) < 1e-2 and relative_rms(v, v_ref) < 1e-2
    q = torch.randn(batch, heads, dim, generator=g).to(torch.bfloat16)
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16)
    got = xk.materialized_decode(q, layer, splits, out, kv, block_n=block_n, r_block=r_block)
    # tight against attention over the bf16 K, V it wrote; the bf16 rounding of K, V adds ~3e-3 per hop
    assert relative_rms(got, attend(q, k, v)) < 1e-2
    assert relative_rms(got, xref.reference(q, layer)) < 2e-2


def test_rope_and_remat_reference_by_hand() -> None:
    # one KV head, d_h = 2, latent 2, identity weights: k_t = rotate(x_t, t * theta^0), v_t = x_t
    x = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]]])
    eye = torch.eye(2)
    layer = xk.XLayer(None, None, eye, eye, 1, 3, dequantized=(x, x))
    k, v = xref.remat_reference(layer)
    c1, s1, c2, s2 = np.cos(1.0), np.sin(1.0), np.cos(2.0), np.sin(2.0)
    want = torch.tensor([[1.0, 0.0], [c1, s1], [-2 * s2, 2 * c2]], dtype=torch.float32)
    torch.testing.assert_close(k[0, 0], want)
    torch.testing.assert_close(v[0, 0], x[0])
    q = torch.tensor([[[1.0, 0.0]]])
    torch.testing.assert_close(xref.reference(q, layer), attend(q, k, v))


@pytest.mark.parametrize(("acc_bits", "width", "tokens", "batch", "variant"),
                         [(16, None, 37, 2, None), (4, None, 37, 2, "elements"), (4, None, 37, 2, "words"),
                          (16, 64, 50, 1, None), (4, 64, 50, 1, None)])
def test_accumulator_update_matches_reference(acc_bits, width, tokens, batch, variant) -> None:
    g = torch.Generator().manual_seed(3)
    d = 128
    rec = TensorRecipe.make(2, 32, along="channels")
    delta, deq = quantize(torch.randn(batch, 1, tokens, width or d, generator=g), rec)
    u_t = None if width is None else (torch.randn(width, d, generator=g) * width ** -0.5).to(torch.bfloat16)
    if acc_bits == 16:
        acc = torch.randn(batch, tokens, d, generator=g).to(torch.bfloat16)
    else:
        acc = torch.randint(0, 256, (batch, tokens, d // 2), generator=g, dtype=torch.uint8)
    want = xref.acc_reference(deq[:, 0], acc.clone(), u_t, step=0.25)
    got = xk.acc_update(delta, acc, u_t, step=0.25, block_t=16, block_d=64, r_block=32, variant=variant)
    assert got is acc  # in place
    if acc_bits == 16:
        assert relative_rms(got, want) < 1e-2
    else:  # codes: the same rounding in the kernel and the reference
        assert (got != want).float().mean() < 1e-3


def _codes(acc: torch.Tensor) -> torch.Tensor:
    a = acc.to(torch.int32)
    return torch.stack([a & 15, a >> 4], -1).flatten(-2)


@pytest.mark.parametrize(("step", "group", "d", "tokens", "tiles"),
                         [(0.25, 32, 128, 37, (16, 64, 4)), (2.0 ** -6, 128, 1024, 21, (None, None, None)),
                          (0.05, 32, 256, 45, (8, 128, 2)), (0.0123, 128, 1024, 21, (None, None, None))])
def test_accumulator_words_kernel(step, group, d, tokens, tiles) -> None:
    # acc_words.acc4_words_kernel (prmt emulated under the interpreter) against acc_reference, on deltas of a few
    # steps (codes mostly in range, some clamped at 0 and 15) and partial token blocks; default tiles: launch.ACC4_*
    g = torch.Generator().manual_seed(5)
    rec = TensorRecipe.make(2, group, along="channels")
    delta, deq = quantize(torch.randn(2, 1, tokens, d, generator=g) * 4 * step, rec)
    acc = torch.randint(0, 256, (2, tokens, d // 2), generator=g, dtype=torch.uint8)
    before, want = _codes(acc), _codes(xref.acc_reference(deq[:, 0], acc.clone(), step=step))
    block_t, block_d, step_t = tiles
    assert xk.acc_variant(delta, acc, None, block_d or xk.ACC4_BLOCK_D) == "words"
    ce = xk.acc4_constexprs(rec, d, block_t or xk.ACC4_BLOCK_T, block_d or xk.ACC4_BLOCK_D, step_t)
    got = _codes(xk.acc_update(delta, acc, step=step, block_t=block_t, block_d=block_d, variant="words"))
    assert ce["BLOCK_T"] > ce["STEP_T"] and tokens % ce["BLOCK_T"]  # several steps, a partial last block
    clamped = ((want == 0) | (want == 15)).float().mean()
    assert 0.02 < clamped < 0.5 and (want != before).float().mean() > 0.5
    if math.log2(step).is_integer():  # every sum exact in fp32: the same floor as the reference's
        assert torch.equal(got, want)
    else:  # floor((x + delta)/step + 8.5) vs u + floor(delta/step + 0.5): ties within ~1e-5 may differ by one code
        assert (got - want).abs().max() <= 1 and (got != want).float().mean() < 1e-3


def test_accumulator_variant_choice() -> None:
    g = torch.Generator().manual_seed(6)
    two, three = TensorRecipe.make(2, 128, along="channels"), TensorRecipe.make(3, 128, along="channels")
    delta = quantize(torch.randn(1, 1, 8, 1024, generator=g), two)[0]
    acc4, acc16 = torch.zeros(1, 8, 512, dtype=torch.uint8), torch.zeros(1, 8, 1024, dtype=torch.bfloat16)
    assert xk.acc_variant(delta, acc4, None, xk.ACC4_BLOCK_D) == "words"
    assert xk.acc_variant(delta, acc16, None, xk.ACC4_BLOCK_D) == "elements"
    assert xk.acc_variant(delta, acc4, torch.zeros(1024, 1024), xk.ACC4_BLOCK_D) == "elements"
    assert xk.acc_variant(quantize(torch.randn(1, 1, 8, 1024, generator=g), three)[0], acc4, None, 1024) == "elements"
    with pytest.raises(ValueError, match="variant"):
        xk.acc_update(delta, acc4, variant="bytes")


def test_accumulator_update_default_up_tiles() -> None:
    # launch.ACC_UP_* (128 tokens x 256 channels, latent steps of 64): 130 tokens leave a partial second block
    g = torch.Generator().manual_seed(4)
    rec = TensorRecipe.make(2, 32, along="channels")
    delta, deq = quantize(torch.randn(1, 1, 130, 64, generator=g), rec)
    u_t = (torch.randn(64, 256, generator=g) * 0.125).to(torch.bfloat16)
    acc = torch.randn(1, 130, 256, generator=g).to(torch.bfloat16)
    want = xref.acc_reference(deq[:, 0], acc.clone(), u_t, step=0.25)
    assert relative_rms(xk.acc_update(delta, acc, u_t, step=0.25), want) < 1e-2


def test_every_kernel_fits_h100_shared_memory() -> None:
    results = shared_bytes(fam.sm90_specs())
    assert [r["kernel"] for r in results] == (["fused_kernel"] * 3 + ["remat_kernel"] * 2 + ["acc_update_kernel"] * 2
                                              + ["acc4_words_kernel"])
    for r in results:
        assert 0 <= r["shared"] <= H100_SHARED_BYTES, r


def test_shared_kernel_fits_h100_shared_memory() -> None:
    from validate.ops.xquant.structure import shared_specs

    specs = shared_specs()
    results = shared_bytes([specs["shared"], specs["mha_shared"]])
    assert [r["kernel"] for r in results] == ["shared_kernel"] * 2
    for r in results:
        assert 0 < r["shared"] <= H100_SHARED_BYTES, r


def test_grid_work_and_prediction() -> None:
    family = get("xquant")
    full, quick = family.cases(quick=False), family.cases(quick=True)
    assert 4 <= len(quick) < len(full) and len({c.name for c in full}) == len(full)
    variants = {c.params["variant"] for c in full}
    assert variants == {"fused", "materialized", "materialized_cublas", "mha_fused", "acc_update"}
    hw = load_hardware("H100-SXM").model_copy(update={"measured": None})
    for case in quick:
        pred = family.predict(case, hw)
        assert predicted.work(case.params) == {"bytes": pred["bytes"], "flops": pred["flops"]}
        # one kernel per op (attention, its split-K reduce, the remat): the sum of each op's max; a structured op's
        # compute composition is replaced by the contention of its warps (validate.model.contention), so only
        # its DRAM time stays a floor there
        floor = pred["memory_s"] if pred.get("contention_s") else max(pred["compute_s"], pred["memory_s"])
        assert pred["time_s"] >= floor * (1 - 1e-12)
    p = fam.params("fused", 32, 131072)
    pred = family.predict(Case("xquant", "x", p), hw)
    # remat 4 L (d/g)^2 + attention 2 H L 2 d_h per sequence, on the tensor cores; with the kernel's sm_90 structure
    # its warps' contention outweighs the wgmma time: at the datasheet's issue rates the lone chain's waits on its
    # pipelined copies dominate (the delay: "latency"), at the H100's measured, slower dispatch rate the issue station
    # does ("issue", as nvidia-h100-compare.txt says of this case); without the structure: compute
    assert pred["flops"] > 32 * 131072 * (4 * 1024 ** 2 + 2 * 32 * 256)
    assert pred["bound"] == "latency" and predicted.predict_params(p, hw, structure=False)["bound"] == "compute"
    assert family.predict(Case("xquant", "x", p), load_hardware("H100-SXM"))["bound"] == "issue"
    p = fam.params("materialized", 8, 4096)
    mat = family.predict(Case("xquant", "x", p), hw)
    assert {"remat", "attention"} <= set(mat["parts"]) and mat["parts"]["attention"]["bound"] == "memory"
    # the remat reads the latents and Sigma B^T as the kernel allocates them and writes bf16 K, V
    physical = sum(v for k, v in fam.layout_bytes(p).items())
    assert mat["parts"]["remat"]["bytes"] == physical + 8 * 4096 * (2 * 1024 * 2)


def test_measured_crossover_recovers_two_lines() -> None:
    ls = np.array([64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384])
    memory, compute = 8e-6 + 1e-10 * ls, 1e-6 + 4e-9 * ls  # meet at L = 7e-6 / 3.9e-9
    fit = predicted.measured_crossover(ls, np.maximum(memory, compute))
    assert fit["context"] == pytest.approx(7e-6 / 3.9e-9, rel=1e-6)
    assert fit["compute_line"]["s_per_token"] == pytest.approx(4e-9)


def test_predicted_crossover_is_the_roofline_balance() -> None:
    hw = load_hardware("H100-SXM").model_copy(update={"measured": None})
    for batch in (1, 8, 32):
        p = fam.params("fused", batch, 4096)
        lx = predicted.predicted_crossover(p, hw)["compute_eq_memory"]

        def balance(n: int, p: dict = p) -> float:
            # the same op(s), evaluated one point at a time (the layouts' roofline: no kernel structure)
            row = predicted.predict_params({**p, "context": n}, hw, structure=False)
            return row["compute_s"] - row["memory_s"]

        # compute reaches memory at lx and stays there (L mod 128 windows make it saw-toothed below)
        assert balance(lx) >= 0 > balance(lx - 1) if lx > 1 else balance(1) >= 0
        assert all(balance(n) >= 0 for n in (lx + 1, lx + 127, 2 * lx + 5, 4096, 131072))
    # one sequence: the 4 MiB of Sigma B^T against 4 L (d/g)^2 FLOPs; a few hundred tokens
    assert 200 < predicted.predicted_crossover(fam.params("fused", 1, 4096), hw)["compute_eq_memory"] < 400


def test_crossover_over_a_results_file() -> None:
    hw = load_hardware("H100-SXM").model_copy(update={"measured": None})
    rows = []
    for batch in (1, 2):
        for n in (100, 128, 256, 384, 512, 1024, 2048, 4096, 8192):  # 100: an fp16 window, left out of the fit
            p = fam.params("fused", batch, n)
            ms = 1e3 * max(10e-6 * batch, 2.5e-8 * batch * n)  # a flat floor, then 25 ns per token and sequence
            rows.append({"family": "xquant", "name": fam.case_name(p), "params": p, "ms": ms})
    out = predicted.crossover({"env": {}, "cases": rows}, hw)
    assert set(out) == {1, 2}
    for batch, row in out.items():
        assert row["measured"] == pytest.approx(400, rel=1e-6) and row["fit"]["points"] == 8
        want = predicted.predicted_crossover(fam.params("fused", batch, 4096), hw)["compute_eq_memory"]
        assert row["predicted"] == want
