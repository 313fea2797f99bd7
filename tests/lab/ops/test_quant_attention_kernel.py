"""quant_attention: fused-dequant decode attention over a KV cache laid out as roofline counts it.

Bytes allocated equal roofline's resident bytes part by part, in the plain and the tiled layouts alike
(the tiled one only moves bits: same codes, same metadata); the Triton kernels (interpreted, small
shapes: the fast kernel (tiled_*.py) for tiled caches, plain.py's for plain ones) match the torch
reference on the same dequantized values and full-precision attention within what the bit-width allows;
every variant compiles for sm_90 within an H100's shared memory.
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import functools  # noqa: E402
import json  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from roofline.catalogue import load_model  # noqa: E402
from roofline.methods import build_cache, parse_method  # noqa: E402
from roofline.units import L  # noqa: E402
from validate.common import quantize, recipes, tiling  # noqa: E402
from validate.common.recipes import layout_bytes  # noqa: E402
from validate.common.reference import attend  # noqa: E402
from validate.common.sm90 import H100_SHARED_BYTES, shared_bytes  # noqa: E402
from validate.common.testing import relative_rms  # noqa: E402
from validate.model.families.quant_attention import work as case_work  # noqa: E402
from validate.model.hardware import load_hardware  # noqa: E402
from validate.ops.quant_attention import cache as qcache  # noqa: E402
from validate.ops.quant_attention import tiled_launch  # noqa: E402
from validate.ops.quant_attention.cases import QuantAttention  # noqa: E402
from validate.ops.quant_attention.kernel import attention, sm90_spec  # noqa: E402
from validate.ops.quant_attention.reference import reference  # noqa: E402

LLAMA3 = load_model("Llama-3.1-8B")
LAYOUT_SPECS = ["kivi-2", "kivi-4", "kivi-sink-2", "kivi:bits=2,group_size=128", "innerq-base", "innerq-hybrid",
                "innerq-small", "skvq-k2v2", "skvq-k2v2-fp8", "skvq-k2v1.5", "skvq:group_size=32"]


@functools.cache
def roofline_layer(spec: str):
    return build_cache(parse_method(spec), LLAMA3).layers[0]


def roofline_parts(spec: str, context: int, batch: int) -> dict[str, int]:
    layer = roofline_layer(spec)
    assert layer.kv_heads == LLAMA3.num_kv_heads and layer.count == LLAMA3.num_layers
    parts = dict.fromkeys(recipes.PARTS, 0)
    for tensor in layer.tensors:
        for part, value in tensor.resident.items():
            exact = value.subs(L, context)
            assert exact.is_Integer, f"{spec} {tensor.name} {part} at L={context}: {exact}"
            parts[part] += batch * int(exact)
    return parts


@pytest.mark.parametrize("spec", LAYOUT_SPECS)
@pytest.mark.parametrize(("context", "batch"), [(37, 1), (129, 3), (1000, 2), (4096, 1), (5003, 4), (131072, 32)])
def test_layout_bytes_equal_roofline_resident(spec: str, context: int, batch: int) -> None:
    params = {"method": spec, "batch": batch, "context": context, "num_kv_heads": LLAMA3.num_kv_heads,
              "head_dim": LLAMA3.head_dim}
    assert layout_bytes(params) == roofline_parts(spec, context, batch)


@pytest.mark.parametrize("spec", LAYOUT_SPECS)
def test_allocated_tensors_are_the_layout(spec: str) -> None:
    batch, heads, context, dim = 2, 2, 300, 128
    cache = qcache.random_cache(recipes.recipe(spec), batch, heads, context, dim, generator=torch.Generator())
    allocated = dict.fromkeys(recipes.PARTS, 0)
    for tensor in (cache.k, cache.v):
        shapes = recipes.tensor_shapes(tensor.recipe, batch, heads, context, dim)
        assert set(tensor.tensors) == set(shapes)
        for name, (part, shape, dtype) in shapes.items():
            got = tensor.tensors[name]
            assert (tuple(got.shape), got.dtype) == (shape, dtype) and got.is_contiguous(), name
            allocated[part] += got.numel() * got.element_size()
    params = {"method": spec, "batch": batch, "context": context, "num_kv_heads": heads, "head_dim": dim}
    assert allocated == layout_bytes(params)


def test_packing_is_dense_and_exact() -> None:
    # 3-bit codes along tokens: a 2-bit plane (4 per byte) then a 1-bit plane (8 per byte): 3 bytes per 8 codes
    t = recipes.TensorRecipe.make(bits=3, group=32, along="tokens")
    u = torch.randint(0, 8, (64, 5), generator=torch.Generator().manual_seed(0))
    packed = quantize.pack(u, t, dim=0)
    assert packed.shape == (24, 5) and packed.dtype == torch.uint8
    w, i, col = packed.to(torch.int64), torch.arange(64).view(64, 1), torch.arange(5)
    low = (w[i // 4, col] >> (2 * (i % 4))) & 3
    high = (w[16 + i // 8, col] >> (i % 8)) & 1
    assert torch.equal(low | (high << 2), u)


def _plain_codes(t: quantize.QuantTensor, dim: int) -> torch.Tensor:
    """Codes u [B, H, nq, D] of a plain-layout tensor (quantize.pack's bit planes)."""
    a, c = t.recipe.planes
    raw = t.tensors["codes"].to(torch.int64)
    tokens = t.recipe.along == "tokens"
    axis, split = (2, t.nq * a // 8) if tokens else (3, dim * a // 8)

    def plane(x, width):
        n = 8 // width
        bits = (x.unsqueeze(axis + 1) >> (torch.arange(n) * width).view(*([1] * (axis + 1)), n, *([1] * (3 - axis))))
        bits = bits & ((1 << width) - 1)
        return bits.movedim(axis + 1, axis + 1).flatten(axis, axis + 1)

    low, high = raw.narrow(axis, 0, split), raw.narrow(axis, split, raw.shape[axis] - split)
    return plane(low, a) | (plane(high, c) << a if c else 0)


@pytest.mark.parametrize("spec", ["kivi-2", "kivi-4", "innerq-base", "innerq-hybrid", "skvq-k2v2", "skvq-k2v2-fp8",
                                  "skvq-k2v1.5", "skvq:k_bits=4,v_bits=4,group_size=32", "kivi:bits=2,group_size=128"])
@pytest.mark.parametrize("rows", [32, 64])
def test_tiled_layout_moves_bits_only(spec: str, rows: int) -> None:
    # the same codes and metadata as the plain layout, in the same tensors: only bit positions differ
    r = recipes.recipe(spec)
    g = torch.Generator().manual_seed(2)
    k, v = torch.randn(2, 2, 1000, 128, generator=g), torch.randn(2, 2, 1000, 128, generator=g)
    tiled, plain = qcache.build_cache(k, v, r, tiled=rows), qcache.build_cache(k, v, r, tiled=False)
    if rows == 64 and tiled.k.tiling is None:
        return  # a group along tokens shorter than 64 tokens: plain
    assert tiled.k.tiling is not None and tiled.v.tiling is not None and plain.k.tiling is None
    for x, (a, b) in zip("kv", ((tiled.k, plain.k), (tiled.v, plain.v)), strict=True):
        assert all(a.tensors[n].shape == b.tensors[n].shape and a.tensors[n].dtype == b.tensors[n].dtype
                   for n in b.tensors), x
        u = tiling.unpack_tiled(a.tensors["codes"], a.recipe, a.tiling, a.nq, 128)
        assert torch.equal(u, _plain_codes(b, 128)), x
        where = tiling.meta_positions(a.tiling, a.recipe, a.nq, 128).reshape(-1)
        for name in ("scale", "zero"):
            if name in b.tensors:
                moved = a.tensors[name].reshape(4, -1)[:, where].view(torch.uint8)
                assert torch.equal(moved, b.tensors[name].reshape(4, -1).view(torch.uint8)), (x, name)
    torch.testing.assert_close(tiled.dequantized[0], plain.dequantized[0], rtol=0, atol=0)
    torch.testing.assert_close(tiled.dequantized[1], plain.dequantized[1], rtol=0, atol=0)


def test_presets_take_the_fast_kernel() -> None:
    # every preset of the bench grid is stored tiled at head_dim 128; a 3-bit K grouped along tokens is not
    for spec in QuantAttention().cases(True):
        tk, tv = qcache.cache_tilings(recipes.recipe(spec.params["method"]), 128)
        assert tk is not None and tv is not None, spec.name
    assert qcache.cache_tilings(recipes.recipe("kivi:bits=3"), 128) == (None, None)


def test_splits_fill_whole_waves() -> None:
    # 64 (sequence, KV head) pairs, 4 resident programs on each of 132 SMs: 8 splits (512 programs), not 9
    assert tiled_launch.choose_splits(64, 65536, 132, 128, 4) == 8
    assert tiled_launch.choose_splits(256, 16384, 132, 128, 4) == 2
    assert tiled_launch.choose_splits(8, 131072, 132, 128, 4) == 64  # at most MAX_SPLITS
    assert tiled_launch.choose_splits(8, 300, 132, 128, 4) == 2  # each split at least one step
    assert tiled_launch.resident(117, 30720, 4) == 4 and tiled_launch.resident(168, 29184, 2) == 6


def test_reorder_folded_into_query_and_output_is_exact() -> None:
    g = torch.Generator().manual_seed(1)
    k, v = torch.randn(1, 2, 40, 64, generator=g), torch.randn(1, 2, 40, 64, generator=g)
    q = torch.randn(1, 8, 64, generator=g)
    pk, pv = qcache.reorder_index(k), qcache.reorder_index(v)
    assert not torch.equal(pk, torch.arange(64).expand_as(pk))
    permuted = attend(qcache.permute_channels(q, pk), qcache.permute_channels(k, pk),
                              qcache.permute_channels(v, pv))
    torch.testing.assert_close(qcache.unpermute_channels(permuted, pv), attend(q, k, v))


# (spec, batch, kv heads, context, head_dim, bound on relative RMS vs full precision). Random Gaussian K, V
# and a flat softmax are the hard case for low bits (an all-zero output scores 1.0): 2-bit codes leave
# ~0.4 relative error per element, and the output ~0.7; bounds sit ~25% above what each case measures.
KERNEL_CASES = [
    ("kivi:bits=2,residual=32", 2, 2, 100, 64, 0.9),  # K 96 quantized, V 68: a mixed tail
    ("kivi:bits=4,residual=32,sinks=3", 1, 2, 75, 64, 0.15),
    ("innerq:sinks=4,window=8", 2, 2, 100, 64, 0.55),  # K3/V3 symmetric, inner groups
    ("innerq-hybrid:sinks=4,window=8", 1, 2, 300, 128, 0.7),
    ("innerq:k_bits=4,v_bits=4,v_mode=hybrid,sinks=4,window=8", 1, 2, 100, 64, 0.2),
    ("skvq:group_size=32,window=16", 2, 2, 37, 64, 0.9),
    ("skvq:k_bits=4,v_bits=4,meta_dtype=fp8,group_size=32,window=16", 1, 2, 300, 128, 0.2),
    ("skvq:k_bits=4,v_bits=1.5,group_size=32,window=16", 1, 2, 100, 64, 0.75),  # ternary V in 2-bit slots
    ("innerq:sinks=4,window=8", 1, 2, 10, 64, 0.01),  # nothing quantized yet: sinks and window only
    # the presets at head_dim 128 (tiled, the fast kernel): several middle steps per split, leftovers in the tail
    ("kivi-2", 1, 2, 700, 128, 0.85),
    ("kivi-4", 2, 2, 600, 128, 0.15),
    ("innerq-base", 1, 2, 700, 128, 0.6),
    ("skvq-k2v2", 1, 2, 600, 128, 2.3),  # one 2-bit group of 128 channels per token: coarse on Gaussian data
    ("kivi:bits=3", 1, 2, 300, 128, 0.35),  # 3-bit K along tokens: plain layout, quant_attention's kernel
]


@pytest.mark.parametrize(("spec", "batch", "kv_heads", "context", "dim", "loose"), KERNEL_CASES)
def test_kernel_matches_reference(spec, batch, kv_heads, context, dim, loose, capsys) -> None:
    g = torch.Generator().manual_seed(0)
    spread = torch.exp(0.5 * torch.randn(1, kv_heads, 1, dim, generator=g))  # key channels differ in range
    k = torch.randn(batch, kv_heads, context, dim, generator=g) * spread
    v = torch.randn(batch, kv_heads, context, dim, generator=g)
    q = torch.randn(batch, 4 * kv_heads, dim, generator=g).to(torch.bfloat16)
    cache = qcache.build_cache(k, v, recipes.recipe(spec))
    out, work = torch.full(q.shape, float("nan")), {}
    attention(q, cache, num_splits=3, out=out, work=work)
    for buf in ("m", "l", "acc"):  # every partial is rewritten: unwritten ones would poison the output
        work[buf].fill_(float("nan"))
    out.fill_(float("nan"))
    got = attention(q, cache, num_splits=3, out=out, work=work)
    assert torch.isfinite(out).all()
    if "hybrid" in spec:  # both kinds of group occur, so both branches of the flag are exercised
        flags = torch.signbit(cache.v.tensors["scale"])
        assert flags.any() and not flags.all()
    tight = relative_rms(got, reference(q, cache))
    full = relative_rms(got, attend(q, k, v))
    with capsys.disabled():
        print(f"\n  {spec} B={batch} Hkv={kv_heads} L={context} D={dim}: vs reference {tight:.2e}, "
              f"vs full precision {full:.3f}")
    assert tight < 1e-3
    assert full < loose


def test_every_variant_fits_an_h100_sm() -> None:
    # KIVI: K outer (token groups) / V outer (channel groups); InnerQ hybrid: K inner 3-bit symmetric /
    # V inner hybrid; SKVQ fp8: K inner asymmetric / V outer, fp8 metadata; the tail kernel of one
    specs = [sm90_spec("kivi-2"), sm90_spec("kivi-2", tail=True), sm90_spec("innerq-hybrid"),
             sm90_spec("skvq-k2v2-fp8"), sm90_spec("kivi:bits=3")]  # the last: plain storage, quant_decode_kernel
    results = shared_bytes(specs)
    shared = [(s["constexprs"]["TAIL"], r["shared"]) for s, r in zip(specs, results, strict=True)]
    print("\n  sm_90 shared bytes (tail?, bytes):", shared)
    assert all(0 < r["shared"] <= H100_SHARED_BYTES for r in results)


def test_kivi_launches_qall_capped_at_128_registers() -> None:
    # KIVI (K grouped along tokens) launches variant qall-r128 by default, the other presets VAR 0 uncapped
    # (validate/notes/2026-11-23-kivi-kernel-variants.md: 11-14 % faster on an H100 and an H200); the compile specs
    # (structure.py, validate/chains.py)
    # describe that launch, the tail part uncapped (fast_decode launches it without a cap)
    for method in ("kivi-2", "kivi-4"):
        tk, tv = qcache.cache_tilings(recipes.recipe(method), 128)
        assert tiled_launch.launch_defaults(tk, tv) == (4, 128, 2, 1)  # QALL is VAR bit 1
        middle, tail = sm90_spec(method), sm90_spec(method, tail=True)
        assert (middle["constexprs"]["VAR"], middle["maxnreg"], middle["num_warps"]) == (1, 128, 4)
        assert (tail["constexprs"]["VAR"], tail["maxnreg"], tail["num_warps"]) == (1, None, 4)
    for method in ("innerq-base", "innerq-hybrid", "skvq-k2v2"):
        spec = sm90_spec(method)
        assert (spec["constexprs"]["VAR"], spec["maxnreg"]) == (0, None), method


def test_kivi_grid_cases_file_is_the_grids_kivi_cases() -> None:
    # the draw file `validate bench --cases` re-times the launched KIVI kernel with: 2 methods x 3 batches x 4 contexts
    from validate.fresh import load_cases
    from validate.ops.quant_attention.kivi_grid_predict import CASES, OUT

    got = load_cases(CASES)
    assert len(got) == 2 * 3 * 4 and len({c.name for c in got}) == 24
    assert got == [c for c in QuantAttention().cases(False) if c.params["method"] in ("kivi-2", "kivi-4")]
    predicted = json.loads(OUT.read_text())["devices"]
    assert all([r["case"] for r in d["rows"]] == [c.name for c in got] for d in predicted.values())


def test_swapped_replaces_both_copies_of_a_chain() -> None:
    # kivi_variants.swapped (the variants' and kivi_grid_predict's old-kernel predictions): the step's chain
    # (kernel_structure) and the fixed costs' (fixed_costs.chains) are two cached copies of chains.json; both change
    from validate.model import fixed_costs
    from validate.model import kernel_structure as ks
    from validate.ops.quant_attention.kivi_variants import swapped

    key, chain = "quant_attention/kivi-2", {"pass": 1.0, "step": 1.0, "warps": 4, "ldl_cycles": 29.1}
    committed = fixed_costs.chains()["kernels"][key], ks.kernels("chains")["kernels"][key]
    with swapped("kivi-2", ks.kernels("quant_attention")["kernels"]["kivi-2"], chain):
        assert fixed_costs.chains()["kernels"][key] is chain and ks.kernels("chains")["kernels"][key] is chain
    assert (fixed_costs.chains()["kernels"][key], ks.kernels("chains")["kernels"][key]) == committed


def test_cases_grid_and_quick() -> None:
    family = QuantAttention()
    full, quick = family.cases(False), family.cases(True)
    assert len(full) == 5 * 3 * 4 and len(quick) == 5
    assert {c.params["method"] for c in quick} == {c.params["method"] for c in full}
    for case in full:
        json.dumps(case.as_dict())
        assert sum(layout_bytes(case.params).values()) > 0  # every grid point packs into whole bytes


@pytest.mark.parametrize("case", QuantAttention().cases(True), ids=lambda c: c.name)
def test_kernel_bytes_are_the_roofline_op(case) -> None:
    # the roofline "attention" op reads the cache once (the layout) plus the query; with its flash-decoding
    # reduce companion, the fp32 split partials (max, sum, head_dim accumulators per query head, one split per
    # 2048 cached tokens) are written and read once, and the output is written
    p = case.params
    work = case_work(case.params)
    splits = max(1, -(-p["context"] // 2048))
    partials = p["batch"] * p["num_heads"] * splits * (p["head_dim"] + 2) * 4
    activations = 2 * p["batch"] * p["num_heads"] * p["head_dim"] * 2 + 2 * partials  # bf16 q in, out
    assert work["bytes"] == sum(layout_bytes(p).values()) + activations
    predicted = QuantAttention().predict(case, load_hardware("H200"))
    assert predicted["bytes"] == work["bytes"] and predicted["time_s"] > 0


@pytest.mark.parametrize(("spec", "batch", "kv_heads", "context"),
                         [("kivi-2", 3, 1, 1500), ("kivi-4", 2, 2, 600), ("innerq-hybrid", 1, 2, 1000),
                          ("skvq-k2v2-fp8", 2, 1, 900)])
def test_rows_kernel_matches_reference(spec, batch, kv_heads, context) -> None:
    # the rows kernel (issue 14 step 1, not the default: slower on an H200, validate/notes/2026-11-22-rows-kernel.md)
    # on the same layouts
    from validate.ops.quant_attention.rows_launch import rows_decode

    g = torch.Generator().manual_seed(0)
    k = torch.randn(batch, kv_heads, context, 128, generator=g) * torch.exp(0.5 * torch.randn(1, kv_heads, 1, 128,
                                                                                               generator=g))
    q = torch.randn(batch, 4 * kv_heads, 128, generator=g).to(torch.bfloat16)
    cache = qcache.build_cache(k, torch.randn(batch, kv_heads, context, 128, generator=g), recipes.recipe(spec))
    qs = q if cache.perm_k is None else qcache.permute_channels(q, cache.perm_k).contiguous()
    out, work = torch.full(q.shape, float("nan")), {}
    rows_decode(qs, cache, 3, out, work)
    for buf in ("m", "l", "acc"):
        work[buf].fill_(float("nan"))
    out.fill_(float("nan"))
    got = rows_decode(qs, cache, 3, out, work)
    got = got if cache.perm_v is None else qcache.unpermute_channels(got, cache.perm_v)
    assert torch.isfinite(got).all() and work["num_splits"] == 3
    assert relative_rms(got, reference(q, cache)) < 1e-3


def test_rows_kernel_fits_an_h100_sm() -> None:
    from validate.ops.quant_attention import rows_launch

    r = recipes.recipe("innerq-base")
    tk, tv = qcache.cache_tilings(r, 128)
    spec = {"module": "validate.ops.quant_attention.rows", "kernel": "rows_decode_kernel",
            "signature": rows_launch.signature(r), "constexprs": rows_launch.plan(r, tk, tv, 32, 8, 128, emu=False),
            "num_warps": rows_launch.NUM_WARPS, "num_stages": rows_launch.NUM_STAGES}
    assert 0 < shared_bytes([spec])[0]["shared"] <= H100_SHARED_BYTES


@pytest.mark.parametrize(("spec", "context"), [("kivi-2", 420), ("kivi-4", 400)])
def test_kivi_variants_match_reference(spec, context) -> None:
    # KIVI variants of the fast kernel (kivi_variants.py, validate/notes/2026-11-23-kivi-kernel-variants.md): the same
    # attention as the old kernel (VAR
    # 0) and as LAUNCH's default (variant None), 2 middle programs of one step each (256 quantized tokens) and the tail
    from validate.ops.quant_attention.kivi_variants import VARIANTS

    g = torch.Generator().manual_seed(0)
    k = torch.randn(1, 2, context, 128, generator=g) * torch.exp(0.5 * torch.randn(1, 2, 1, 128, generator=g))
    q = torch.randn(1, 8, 128, generator=g).to(torch.bfloat16)
    cache = qcache.build_cache(k, torch.randn(1, 2, context, 128, generator=g), recipes.recipe(spec))
    want = reference(q, cache)
    for name, var in [*((n, v) for n, (v, _) in VARIANTS.items()), ("launched", None)]:
        out = torch.full(q.shape, float("nan"))
        work = {}
        got = tiled_launch.fast_decode(q, cache, 2, out, work, variant=var)
        assert torch.isfinite(got).all() and work["num_splits"] == 2, name
        assert relative_rms(got, want) < 1e-3, name
