
"""AQUA-KV (seed 001, docs/papers/aquakv.md): predictor sizes (Table 1), bit-widths (Tables 1, 2, 5, 10-14),
the 70B cache sizes (Table 2), decode FLOPs by hand, the "500x" overhead claim (§3.2), and bad configs."""

import math
from decimal import ROUND_HALF_UP, Decimal

import pytest
import sympy as sp

from roofline.analysis.compute_for_memory import context_for_overhead_ratio, predictor_overhead_ratio
from roofline.catalogue import load_model
from roofline.costmodel import build_graph
from roofline.errors import SpecError
from roofline.kv.builder import QuantPlan, standard_cache
from roofline.methods import build_cache, parse_method
from roofline.methods.aquakv import AquaKV, predictor_bytes, predictor_params
from roofline.specs import Model
from roofline.units import B, L

L3B = load_model("Llama-3.2-3B")
L70B = load_model("Llama-3.1-70B")
MIB, GIB = 1 << 20, 1 << 30
HIGGS_NORM = sp.Rational(16, 1024)  # one fp16 norm per 1024-value Hadamard group


def rounded(x, places: str) -> Decimal:
    """Round half up, as the paper prints (2.015625 -> 2.02, 5.05 -> 5.1); exact for sympy rationals."""
    x = sp.nsimplify(x)
    value = Decimal(int(x.p)) / Decimal(int(x.q)) if x.is_Rational else Decimal(repr(float(x)))
    return value.quantize(Decimal(places), rounding=ROUND_HALF_UP)


def bits(spec: str, model: Model = L3B) -> sp.Expr:
    return build_cache(parse_method(spec), model).asymptotic_bits()


def higgs(b: int, model: Model):
    """The HIGGS baseline: AQUA-KV's residual quantizer on K and V directly, every layer, no predictors."""
    q = AquaKV(bits=b).residual_quant(model.kv_dim)
    return standard_cache("higgs", model, QuantPlan(q, q))


# ---- Table 1: predictor sizes, Llama-3.2-3B (d_kv = 8 x 128 = 1024, 27 predicted layers, 2 B each) --------

def test_table1_linear_predictors_162_mib_by_hand() -> None:
    # K: 1024 x 1024 + 1024 bias, V: 2048 x 1024 + 1024 bias, per layer; x 27 layers x 2 B
    per_layer = 1024 * 1024 + 1024 + 2048 * 1024 + 1024
    cache = parse_method("aquakv-2").cache(L3B)
    assert cache.fixed_bytes["predictors"] == 27 * per_layer * 2 == 169_979_904
    assert round(cache.fixed_bytes["predictors"] / MIB) == 162  # Table 1 "Linear (162 MiB)"


@pytest.mark.parametrize(
    ("fields", "paper_mib", "ours_mib"),
    [
        ({"predictor": "linear"}, 162, 162.11),
        ({"predictor": "reduced_rank", "rank": 256}, 68, 67.61),  # K 2 x 1024 x 256, V 3 x 1024 x 256
        # 4-bit matrices (40.5 MiB) + one fp16 scale and zero per output row (GPTQ groupsize -1) + fp16 biases
        ({"predictor": "quantized"}, 41, 40.82),
    ],
)
def test_table1_predictor_sizes(fields: dict, paper_mib: int, ours_mib: float) -> None:
    total = 27 * predictor_bytes(AquaKV(**fields), 1024) / MIB
    assert round(total, 2) == ours_mib
    assert round(total) == paper_mib


def test_table1_mlp_540_mib_counts_the_matrices() -> None:
    # hidden = 2 d_kv for both predictors: K 1024x2048 + 2048x1024, V 2048x2048 + 2048x1024 = 10 d^2 per layer.
    # The matrices give Table 1's 540.0 MiB; biases and LayerNorm add 0.74 MiB (540.7 with them), which the
    # paper leaves out: Table 9 lists "MLP w/o LN" and "MLP" both at 540 MiB.
    params = predictor_params(AquaKV(predictor="mlp"), 1024)
    assert params["matrices"] == 10 * 1024 * 1024
    assert 27 * params["matrices"] * 2 / MIB == 540
    assert round(27 * predictor_bytes(AquaKV(predictor="mlp"), 1024) / MIB, 2) == 540.74


def test_predictors_for_70b_are_0_463_gib() -> None:
    # 79 predicted layers x (3 x 1024^2 + 2 x 1024) x 2 B (notes §5: 0.463 GiB, added to Table 2's AQUA rows)
    cache = parse_method("aquakv-2").cache(L70B)
    assert cache.fixed_bytes["predictors"] == 79 * 3_147_776 * 2
    assert rounded(sp.Rational(cache.fixed_bytes["predictors"], GIB), "0.001") == Decimal("0.463")


# ---- bit-widths ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("first", "paper", "b0"),
    [(16, "2.59", 16), (4, "2.16", 4 + HIGGS_NORM), (3, "2.13", 3 + HIGGS_NORM), (2, "2.09", 2 + HIGGS_NORM)],
)
def test_table1_first_layer_bits_within_0_1(first: int, paper: str, b0) -> None:
    # (b_0 + 27 x 2.015625) / 28. Table 1/9 print every row with both predictors ~0.07 bits above this
    # (notes §5: the best fit is "one more layer at +2 bits", 2/28 = 0.071; not reproduced). The same default
    # config (first layer HIGGS-4) is 2.09 in Table 2 / Table 10, which our formula gives.
    ours = bits(f"aquakv-2:first_layer_bits={first}")
    assert ours == (b0 + 27 * (2 + HIGGS_NORM)) / 28
    assert 0.06 < float(Decimal(paper) - Decimal(repr(float(ours)))) < 0.1


@pytest.mark.parametrize(
    ("spec", "paper"),
    # Table 1 AQUA-KV (Quant): uniform 2-bit gs64, fp16 scale + zero: (4.5 + 27 x 2.5) / 28 = 2.571;
    # AQUA-KV (QuaRot) as uniform gs1024: (4.03125 + 27 x 2.03125) / 28 = 2.103. Same +0.07 offset.
    [("aquakv-2:quantizer=uniform,group_size=64", "2.64"), ("aquakv-2:quantizer=uniform,group_size=1024", "2.17")],
)
def test_table1_other_backbones_within_0_1(spec: str, paper: str) -> None:
    assert 0.06 < float(Decimal(paper) - Decimal(repr(float(bits(spec))))) < 0.1


@pytest.mark.parametrize(
    ("spec", "model", "expected"),
    [
        ("aquakv-2", "Llama-3.2-3B", "2.09"),  # Table 2 / Table 10
        ("aquakv-3", "Llama-3.2-3B", "3.05"),  # paper 3.06: (4.0156 + 27 x 3.0156) / 28 = 3.0513 (0.01 off)
        ("aquakv-4", "Llama-3.2-3B", "4.02"),
        ("aquakv-2", "Llama-3.1-8B", "2.08"),  # Table 11
        ("aquakv-3", "Llama-3.1-8B", "3.05"),
        ("aquakv-2", "Llama-3.1-70B", "2.04"),  # Table 12
        ("aquakv-3", "Llama-3.1-70B", "3.03"),
        ("aquakv:bits=1.5,grid_dim=4", "Llama-3.2-3B", "1.60"),  # Table 5, d = 4, n = 64
        ("aquakv:bits=1,grid_dim=8", "Llama-3.2-3B", "1.12"),  # Table 5 prints 1.11 (formula 1.1228)
    ],
)
def test_table2_and_appendix_bits(spec: str, model: str, expected: str) -> None:
    assert rounded(bits(spec, load_model(model)), "0.01") == Decimal(expected)


@pytest.mark.parametrize(("model", "expected"), [("Llama-3.1-70B", ("2.02", "3.02", "4.02")),
                                                  ("Qwen2.5-7B", ("2.03", "3.03", "4.03"))])
def test_higgs_bits_norm_group_is_min_1024_dkv(model: str, expected: tuple) -> None:
    # Table 2 HIGGS 2.02/3.02/4.02 (G = 1024); Table 14 Qwen2.5-7B (d_kv = 512, so G = 512): 2.03/3.03/4.03
    m = load_model(model)
    assert tuple(str(rounded(higgs(b, m).asymptotic_bits(), "0.01")) for b in (2, 3, 4)) == expected


# ---- Table 2: cache GiB for Llama-3.1-70B at 2^17 tokens, batch 1, predictors included ------------------

def footprint_gib(cache) -> Decimal:
    """Resident bytes at L = 131,072 (sinks and buffer included) plus fixed bytes (predictors, codebooks)."""
    return rounded(sp.Rational(cache.resident_bytes.subs(L, 131_072) + cache.fixed_total, GIB), "0.1")


TABLE2 = [
    # (row, cache builder, ours, paper)
    ("16-bit", lambda: parse_method("bf16").cache(L70B), "40.0", "40"),
    ("AQUA-KV 2.09", lambda: parse_method("aquakv-2").cache(L70B), "5.6", "5.7"),  # see the next test
    ("HIGGS 2.02", lambda: higgs(2, L70B), "5.1", "5.1"),
    ("KIVI 2.25", lambda: parse_method("kivi:bits=2,group_size=128").cache(L70B), "5.6", "5.6"),
    # our KVQuant is 2.35 bits at d_kv = 1024 (int32 row pointer per token): 5.9; paper 5.6 (2.33 bits would
    # give 5.8 — the notes list this row as a paper inconsistency)
    ("KVQuant 2.33", lambda: parse_method("kvquant-2").cache(L70B), "5.9", "5.6"),
    ("AQUA-KV 3.06", lambda: parse_method("aquakv-3").cache(L70B), "8.1", "8.1"),
    ("HIGGS 3.02", lambda: higgs(3, L70B), "7.6", "7.6"),
    # KIVI-3 is 3 + 32/128 = 3.25 bits (8.1 GiB); the paper's "3.05" bits and 7.7 GiB look like typos (+0.4)
    ("KIVI 3.05", lambda: parse_method("kivi:bits=3,group_size=128").cache(L70B), "8.1", "7.7"),
    # 3.35 bits here vs the paper's 3.33 (8.3 GiB, which the notes reproduce from 3.33): +0.1
    ("KVQuant 3.33", lambda: parse_method("kvquant-3").cache(L70B), "8.4", "8.3"),
    # paper 10.9 (-0.4 here); it would fit a 70B layer 0 kept in bf16 (10.88), which the paper does not say
    ("AQUA-KV 4.02", lambda: parse_method("aquakv-4").cache(L70B), "10.5", "10.9"),
    # paper 10.6 (-0.5 here), the same as KIVI-4.25's; 4.02 bits x 2.5 GiB is 10.05: likely a copy error
    ("HIGGS 4.02", lambda: higgs(4, L70B), "10.1", "10.6"),
    ("KIVI 4.25", lambda: parse_method("kivi:bits=4,group_size=128").cache(L70B), "10.6", "10.6"),
    ("KVQuant 4.33", lambda: parse_method("kvquant-4").cache(L70B), "10.9", "10.8"),  # 4.35 vs 4.33 bits: +0.1
]


@pytest.mark.parametrize(("row", "build", "ours", "paper"), TABLE2, ids=[r[0] for r in TABLE2])
def test_table2_cache_gib_70b(row: str, build, ours: str, paper: str) -> None:
    assert footprint_gib(build()) == Decimal(ours)


def test_table2_aqua_rows_use_the_3b_bit_width() -> None:
    # Table 2's bits column is Llama-3.2-3B's (notes §8.6); its 70B size is those bits x 40 GiB / 16 + the 70B
    # predictors: 2.09 -> 5.225 + 0.463 = 5.69 -> 5.7 (the 70B's own 2.04 bits give 5.6, the test above)
    b3 = rounded(bits("aquakv-2", L3B), "0.01")
    bf16_bytes = build_cache(parse_method("bf16"), L70B).resident_bytes.subs(L, 131_072)
    size = bf16_bytes * sp.Rational(str(b3)) / 16 + parse_method("aquakv-2").cache(L70B).fixed_total
    assert (b3, rounded(sp.Rational(size, GIB), "0.1")) == (Decimal("2.09"), Decimal("5.7"))


# ---- decode and prefill FLOPs by hand (Llama-3.2-1B: 16 layers, d_kv = 8 x 64 = 512) ------------------------

def predictor_op(spec: str, phase: str = "decode"):
    graph = build_graph(load_model("Llama-3.2-1B"), parse_method(spec), phase)
    (op,) = [op for op in graph.ops if op.name.startswith("aquakv")]
    return op


def test_decode_reference_predicts_every_cached_token() -> None:
    # K predictor 2 L d^2 + V predictor 2 L (2d) d = 6 L d^2 per layer, in the 15 layers after layer 0
    op = predictor_op("aquakv:sinks=0,buffer=0")
    assert (op.name, op.count) == ("aquakv_reconstruct", 15)
    assert op.matmul_flops == 6 * 512**2 * B * L
    # weights once per step, whatever the batch: (3 x 512^2 + 2 x 512) x 2 B
    assert op.traffic["weights"] == (3 * 512**2 + 2 * 512) * 2
    # with the defaults only quantized tokens are predicted: at L = 1000, 4 sinks and 996 mod 128 = 100 buffered
    default = predictor_op("aquakv-2")
    assert default.matmul_flops.subs({B: 1, L: 1000}) == 6 * 512**2 * 896


def test_decode_reference_attention_reads_reconstructed_bf16() -> None:
    graph = build_graph(load_model("Llama-3.2-1B"), parse_method("aquakv:sinks=0,buffer=0"), "decode")
    attention = [op for op in graph.ops if op.name == "attention" and op.count == 15]
    assert attention[0].traffic["kv_read"] == B * L * 2 * 512 * 2


def test_decode_incremental_encodes_one_token_per_step() -> None:
    # 6 d^2 per layer per step; the block buffer (128) reads the weights once per flush
    op = predictor_op("aquakv-2:decode=incremental")
    assert (op.name, op.count, op.matmul_flops) == ("aquakv_encode", 15, 6 * 512**2 * B)
    assert op.traffic["weights"] == sp.Rational((3 * 512**2 + 2 * 512) * 2, 128)


def test_prefill_encodes_the_prompt() -> None:
    from roofline.units import P

    op = predictor_op("aquakv:sinks=0,buffer=0", "prefill")
    assert op.matmul_flops == 6 * 512**2 * B * P


# ---- §3.2 "at least 500x less floating point operations" (Llama-3.1-70B) -----------------------------------

def test_predictor_overhead_ratio_70b_by_hand() -> None:
    predictor = 6 * 1024**2 * 79  # 497,025,024 FLOPs per new token
    # base model at L = 1: 2 x (attention 12,079,595,520 + MLP 56,371,445,760 + lm_head 1,050,673,152)
    # + attention 4 x 64 heads x 128 x 80 layers x L; vector: norms 4 x 8192 x 161, RoPE 3 x 9216 x 80,
    # residual adds 2 x 8192 x 80, SwiGLU 5 x 28672 x 80, softmax 5 x 64 x 80 x L, and the flash-decoding
    # reduce merging one split's partials (3 x 64 heads x 128 per layer at L = 1)
    matmul = 2 * (12_079_595_520 + 56_371_445_760 + 1_050_673_152) + 4 * 64 * 128 * 80
    vector = (4 * 8192 * 161 + 3 * 9216 * 80 + 2 * 8192 * 80 + 5 * 28672 * 80 + 5 * 64 * 80
              + 3 * 64 * 128 * 80)
    ratio = predictor_overhead_ratio(L70B, AquaKV(), 1)
    assert ratio == pytest.approx((matmul + vector) / predictor, rel=1e-12)
    # 279.7x; the notes' 284x counts the 1.05 G embedding parameters as FLOPs too (2 x 70.55 G / 497.0 M)
    assert round(ratio, 1) == 279.7


def test_500x_holds_only_from_41k_tokens_on_70b() -> None:
    # base(L) = 139,023,695,872 + 2,647,040 L + 1,966,080 ceil(L / 2048) (the flash-decoding reduce:
    # 3 x 64 heads x 128 x 80 layers per split); with ceil = 21 near the crossing,
    # base(L) >= 500 x 497,025,024  <=>  L >= (248,512,512,000 - 139,023,695,872 - 41,287,680) / 2,647,040
    context = context_for_overhead_ratio(L70B, AquaKV(), 500)
    assert context == math.ceil((248_512_512_000 - 139_023_695_872 - 21 * 1_966_080) / 2_647_040) == 41_348
    assert predictor_overhead_ratio(L70B, AquaKV(), context - 1) < 500 <= predictor_overhead_ratio(
        L70B, AquaKV(), context)


# ---- presets and bad configs ----------------------------------------------------------------------------

def test_presets_are_the_paper_defaults() -> None:
    for b in (2, 3, 4):
        config = parse_method(f"aquakv-{b}")
        assert (config.bits, config.grid_dim, config.first_layer_bits, config.predictor, config.quantizer,
                config.sinks, config.buffer) == (b, 2, 4, "linear", "higgs", 4, 128)


@pytest.mark.parametrize(
    ("spec", "model", "needle"),
    [
        ("aquakv:predictor=reduced_rank,rank=1024", L3B, "rank: 1024 must be below d_kv = 1024"),
        ("aquakv-2", Model.model_validate({**L3B.model_dump(), "name": "one-layer", "num_layers": 1}),
         "num_layers: aquakv predicts layer i from layer i-1"),
        ("aquakv:first_layer_bits=8", L3B, "first_layer_bits"),
        ("aquakv:bits=2.3", L3B, "bits: 2.3 x grid_dim 2 is not a whole number"),
    ],
)
def test_bad_configs_name_the_field(spec: str, model: Model, needle: str) -> None:
    with pytest.raises(SpecError) as err:
        build_cache(parse_method(spec), model)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


# ---- the reference decode's reconstructed layer (§3.3 "materialize a single layer at a time", Alg. 4) --------

def test_reference_decode_workspace_is_one_bf16_layer() -> None:
    # K^ and V^ of every token of one layer in bf16: 131,072 x 2 x 1024 x 2 B = 0.5 GiB on Llama-3.1-70B, about
    # a tenth of its compressed cache (5.14 GiB); the incremental lower bound keeps no such copy
    assert build_cache(parse_method("aquakv-2"), L70B).workspace_bytes.subs(L, 131_072) == 536_870_912 == GIB // 2
    assert build_cache(parse_method("aquakv-2:decode=incremental"), L70B).workspace_bytes == 0


def test_reference_decode_workspace_is_in_the_memory_budget() -> None:
    from roofline.catalogue import load_hardware
    from roofline.planner import plan_method
    from roofline.planner.memory import sequence_kv_expr
    from roofline.specs import Workload

    # Llama-3.1-8B (32 layers, d_kv 1024) at 32,768 tokens: 4 sinks + a full 127-token buffer in bf16,
    # 32,637 quantized tokens at 2048 x (4 + 1/64) / 8 = 1,028 B (layer 0) + 31 x 2048 x (2 + 1/64) / 8 = 516 B,
    # and one reconstructed layer, 32,768 x 2 x 1024 x 2 B
    l8b = load_model("Llama-3.1-8B")
    need = 131 * 2 * 1024 * 2 * 32 + 32_637 * (1028 + 31 * 516) + 32_768 * 4096
    data = plan_method(l8b, load_hardware("H100-SXM"), Workload(batch=16, context_tokens=32_768),
                       parse_method("aquakv-2")).data
    assert data["kv_bytes_per_sequence"] == need == 707_000_448
    assert data["max_batch"] == int(data["memory"]["kv_pool_bytes"] // need)
    assert data["memory"]["kv_parts_bytes"]["workspace"] == 16 * 32_768 * 4096
    # with two pipeline stages each holds half the layers but a whole reconstructed layer per sequence
    cache = build_cache(parse_method("aquakv-2"), l8b)
    half = sequence_kv_expr(l8b, Workload(context_tokens=32_768, pp=2), cache).subs(L, 32_768)
    assert half == (need - 32_768 * 4096) // 2 + 32_768 * 4096


def test_reference_step_re_predicts_every_cached_token() -> None:
    from roofline.analysis.compute_for_memory import reference_step_ratio
    from roofline.methods.aquakv import reference_predictor_flops

    # 70B at 131,072 tokens: 4 sinks, (131,072 - 4) mod 128 = 124 buffered, 130,944 re-predicted per step at
    # 6 x 1024^2 x 79 = 497,025,024 FLOPs each; over base(L) = 139,023,695,872 + 2,647,040 L + 1,966,080 x 64
    flops = reference_predictor_flops(L70B, AquaKV(), 131_072)
    assert flops == 130_944 * 497_025_024
    base = 139_023_695_872 + 2_647_040 * 131_072 + 1_966_080 * 64
    assert reference_step_ratio(L70B, AquaKV(), 131_072) == pytest.approx(flops / base, rel=1e-9)
    assert round(flops / base) == 134
