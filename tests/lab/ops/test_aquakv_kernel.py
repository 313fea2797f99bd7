"""aquakv: the K^/V^ reconstruction kernel against its torch reference under the interpreter, the bytes it
is given against roofline's "aquakv_reconstruct" op and cache, its sm_90 shared memory, and the prediction."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run on the CPU

import pytest  # noqa: E402
import torch  # noqa: E402

from roofline.methods import parse_method  # noqa: E402
from roofline.units import L  # noqa: E402
from validate.common import quantize, recipes  # noqa: E402
from validate.common.sm90 import H100_SHARED_BYTES, shared_bytes  # noqa: E402
from validate.common.testing import relative_rms  # noqa: E402
from validate.model.families import aquakv as predicted  # noqa: E402
from validate.model.hardware import load_hardware  # noqa: E402
from validate.model.predict import _graph, op_work  # noqa: E402
from validate.ops.aquakv import cases as fam  # noqa: E402
from validate.ops.aquakv import kernel, reference, storage  # noqa: E402

SPECS = ["aquakv-2", "aquakv-3", "aquakv-4", "aquakv:buffer=16", "aquakv-2:sinks=0,buffer=32",
         "aquakv:quantizer=uniform,bits=4", "aquakv:quantizer=uniform,bits=2,group_size=32,buffer_mode=sliding"]

# (spec, batch, context, d_kv, bound vs the un-quantized K, V): l_q = 32, 2 x 96, 2 x 256, 288 rows;
# d_kv 96 is no power of two (G = 96, 32-channel tiles), 3-bit codes use two bit planes, the uniform case
# has two scale groups per 32-channel tile. Residual noise is 0.3 of a unit-variance K, V.
KERNEL_CASES = [
    ("aquakv:buffer=16", 1, 37, 64, 0.3),
    ("aquakv:bits=3,buffer=16", 2, 100, 96, 0.1),
    ("aquakv-2", 2, 300, 128, 0.3),
    ("aquakv:quantizer=uniform,bits=4,group_size=16,buffer=32", 1, 300, 128, 0.03),
]


def layer(spec: str, batch: int, context: int, kv_dim: int):
    """A layer encoded by AQUA-KV from K, V that its predictors explain up to a 0.3 noise."""
    g = torch.Generator().manual_seed(0)
    t = storage.storage(spec, kv_dim)
    pred = storage.Predictors.random(kv_dim, generator=g)
    k_prev, v_prev = (torch.randn(batch, context, kv_dim, generator=g).to(torch.bfloat16) for _ in range(2))
    k = k_prev.float() @ pred.w_k.float() + pred.b_k.float() + 0.3 * torch.randn(batch, context, kv_dim, generator=g)
    x = torch.cat([v_prev, k.to(torch.bfloat16)], dim=-1).float()
    v = x @ pred.w_v.float() + pred.b_v.float() + 0.3 * torch.randn(batch, context, kv_dim, generator=g)
    qk, qv = reference.encode(k, v, k_prev, v_prev, pred, t)
    mid = slice(qk.sinks, qk.sinks + qk.nq)
    return qk, qv, k_prev[:, mid].contiguous(), v_prev[:, mid].contiguous(), pred, k[:, mid], v[:, mid]


@pytest.mark.parametrize(("spec", "batch", "context", "kv_dim", "loose"), KERNEL_CASES)
def test_kernel_matches_reference(spec, batch, context, kv_dim, loose, capsys) -> None:
    qk, qv, k_prev, v_prev, pred, k_true, v_true = layer(spec, batch, context, kv_dim)
    assert qk.nq > 0
    # fp32 outputs: the same arithmetic as the reference, no rounding of the result
    out = [torch.full(k_prev.shape, float("nan")) for _ in range(2)]
    got32 = kernel.reconstruct(qk, qv, k_prev, v_prev, pred, *out)
    want32 = reference.reference(qk, qv, k_prev, v_prev, pred, dtype=torch.float32)
    # bf16 outputs, as on the GPU (the interpreter truncates fp32 -> bf16 where the GPU rounds to nearest)
    out = [torch.full(k_prev.shape, float("nan"), dtype=torch.bfloat16) for _ in range(2)]
    got = kernel.reconstruct(qk, qv, k_prev, v_prev, pred, *out)
    want = reference.reference(qk, qv, k_prev, v_prev, pred)
    assert all(torch.isfinite(x).all() for x in (*got32, *got))
    exact = [relative_rms(g, w) for g, w in zip(got32, want32, strict=True)]
    rounded = [relative_rms(g, w) for g, w in zip(got, want, strict=True)]
    truth = [relative_rms(g, w) for g, w in zip(got, (k_true, v_true), strict=True)]
    with capsys.disabled():
        print(f"\n  {spec} B={batch} L={context} d_kv={kv_dim} l_q={qk.nq}: fp32 K^ {exact[0]:.1e} V^ {exact[1]:.1e}; "
              f"bf16 K^ {rounded[0]:.1e} V^ {rounded[1]:.1e}; vs K, V {truth[0]:.3f} {truth[1]:.3f}")
    assert max(exact) < 1e-5
    assert max(rounded) < 1e-2
    assert max(truth) < loose


def test_dequantize_inverts_packing() -> None:
    t = storage.storage("aquakv:bits=3,buffer=0,sinks=0", 64)
    x = torch.randn(2, 1, 40, 64, generator=torch.Generator().manual_seed(3))
    stored, deq = quantize.quantize(x, t)
    torch.testing.assert_close(reference.dequantize(stored), deq[:, 0], rtol=0, atol=1e-6)


@pytest.mark.parametrize("spec", SPECS)
def test_storage_is_roofline_residual_quant(spec: str) -> None:
    for kv_dim in (256, 1024, 2048):
        q = parse_method(spec).residual_quant(kv_dim)
        t = storage.storage(spec, kv_dim)
        assert (t.bits, t.group, t.along, t.mode, t.sinks, t.window, t.window_mode) == (
            q.bits, q.group_size, q.group_along, q.mode, q.sinks, q.window, q.window_mode)
        assert t.meta_bytes == 2 + (2 if q.mode != "symmetric" else 0)


def predicted_group(spec: str, kv_dim_heads: int = fam.KV_HEADS):
    m = predicted.model(kv_dim_heads, fam.HEAD_DIM, fam.HEADS)
    graph = _graph(m, parse_method(spec), "decode")
    ops = [op for op in graph.ops if op.name == "aquakv_reconstruct"]
    assert len(ops) == 1 and ops[0].group == "full#2" and ops[0].count == m.num_layers - 1
    return m, graph.cache.layers[1], ops[0]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize(("batch", "context"), [(1, 1024), (3, 1000), (8, 65536), (2, 5003)])
def test_stored_layer_is_roofline_resident(spec: str, batch: int, context: int) -> None:
    _, group, _ = predicted_group(spec)
    want = dict.fromkeys(recipes.PARTS, 0)
    for tensor in group.tensors:
        for part, value in tensor.resident.items():
            want[part] += batch * int(value.subs(L, context))
    t = storage.storage(spec, fam.KV_DIM)
    got = dict.fromkeys(recipes.PARTS, 0)
    for _ in ("K", "V"):
        for part, shape, dtype in recipes.tensor_shapes(t, batch, 1, context, fam.KV_DIM).values():
            got[part] += torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
    assert got == want


@pytest.mark.parametrize(("spec", "batch", "context"), [("aquakv-2", 2, 300), ("aquakv-3", 1, 1000),
                                                        ("aquakv:quantizer=uniform,bits=4", 3, 517)])
def test_kernel_bytes_are_the_op_traffic(spec: str, batch: int, context: int) -> None:
    """What the launcher hands the kernel (read and written), by class, is the op's traffic exactly."""
    m, _, op = predicted_group(spec)
    k, v, k_prev, v_prev = storage.random_layer(storage.storage(spec, fam.KV_DIM), batch, context, fam.KV_DIM)
    pred = storage.Predictors.random(fam.KV_DIM)
    io = kernel.kernel_io(k, v, k_prev, v_prev, pred, torch.empty_like(k_prev), torch.empty_like(v_prev))
    got = {cls: sum(x.numel() * x.element_size() for x in xs) for cls, xs in io.items()}
    want = {cls: _at(expr, batch, context) for cls, expr in op.traffic.items()}
    assert got == want
    work = op_work(m, parse_method(spec), "aquakv_reconstruct", {"B": batch, "L": context})
    assert sum(got.values()) == work["bytes"]


def _at(expr, batch: int, context: int) -> int:
    from roofline.units import B

    value = expr.subs({B: batch, L: context})
    assert value.is_Integer
    return int(value)


def test_shared_memory_fits_h100() -> None:
    results = shared_bytes(fam.sm90_specs())
    assert len(results) == 4
    for r in results:
        assert 0 < r["shared"] <= H100_SHARED_BYTES, r


def test_grid_and_prediction() -> None:
    family = fam.AquaKVReconstruct()
    full = family.cases(quick=False)
    assert len(full) == 8 and {c.params["context"] for c in full} == {1024, 4096, 16384, 65536}
    assert len(family.cases(quick=True)) < len(full)
    hw = load_hardware("H100-SXM").model_copy(update={"measured": None})
    case = full[-1]  # batch 8, 65,536 tokens: l_q = 65,408 rows
    pred = family.predict(case, hw)
    rows = 8 * (65536 - 4 - (65532 % 128))
    assert pred["flops"] > 6 * fam.KV_DIM ** 2 * rows and pred["bound"] == "compute"
    assert pred["time_s"] == pytest.approx(pred["compute_s"]) and pred["compute_s"] > pred["memory_s"]
    assert predicted.work(case.params) == {"bytes": pred["bytes"], "flops": pred["flops"]}


def test_tuned_variant_tiles_and_result() -> None:
    """The variant "tuned" is the same kernel with the 128 x 256 tiles from kernel.TUNED_BIG_ROWS rows on: 3,968
    rows (batch 1, 4K context) get the big tiles, 3,072 keep the small ones; under the interpreter (32-wide tiles)
    it computes what the launched kernel and the reference compute."""
    t = storage.storage(fam.METHOD, fam.KV_DIM)
    assert kernel.tiles(t, fam.KV_DIM, 3968, False, kernel.TUNED_BIG_ROWS)[:2] == (128, 256)
    assert kernel.tiles(t, fam.KV_DIM, 3072, False, kernel.TUNED_BIG_ROWS)[:2] == (64, 128)
    assert kernel.tiles(t, fam.KV_DIM, 3968, False)[:2] == (64, 128)  # the launched kernel: big from 32,768 rows
    qk, qv, k_prev, v_prev, pred, _, _ = layer("aquakv-2", 2, 300, 128)
    got = kernel.reconstruct(qk, qv, k_prev, v_prev, pred, big_rows=kernel.TUNED_BIG_ROWS)
    old = kernel.reconstruct(qk, qv, k_prev, v_prev, pred)
    want = reference.reference(qk, qv, k_prev, v_prev, pred)
    assert all(torch.equal(g, o) for g, o in zip(got, old, strict=True))
    assert max(relative_rms(g, w) for g, w in zip(got, want, strict=True)) < 1e-2


@pytest.mark.parametrize(("spec", "batch", "context", "kv_dim"), [("aquakv-2", 2, 300, 128),
                                                                  ("aquakv:quantizer=uniform,bits=4,group_size=16,buffer=32",
                                                                   1, 300, 128)])
def test_preinit_variant_matches_reference(spec: str, batch: int, context: int, kv_dim: int) -> None:
    """The variant "preinit" (the residual as the GEMM's initial accumulator) computes the reference's K^, V^ (fp32
    outputs: the same sums in another order) under the interpreter."""
    qk, qv, k_prev, v_prev, pred, _, _ = layer(spec, batch, context, kv_dim)
    out = [torch.full(k_prev.shape, float("nan")) for _ in range(2)]
    got = kernel.reconstruct(qk, qv, k_prev, v_prev, pred, *out, big_rows=kernel.TUNED_BIG_ROWS, preinit=True)
    want = reference.reference(qk, qv, k_prev, v_prev, pred, dtype=torch.float32)
    assert max(relative_rms(g, w) for g, w in zip(got, want, strict=True)) < 1e-5
