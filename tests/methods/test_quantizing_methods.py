"""Quantized-KV family: the seeds' bit-width tables, exact bytes by hand, and bad configs (issue 3)."""

import math

import pytest
import sympy as sp

from roofline.catalogue import load_model
from roofline.errors import SpecError
from roofline.kv.builder import LayerOverride
from roofline.methods import build_cache, parse_method
from roofline.methods.kivi import Kivi
from roofline.units import L

LLAMA3 = load_model("Llama-3.1-8B")
LLAMA2 = load_model("Llama-2-7B")
GIB = 1 << 30


def bits(spec: str, model=LLAMA3) -> sp.Expr:
    return parse_method(spec).cache(model).asymptotic_bits()


# InnerQ Table 3 (seed 002, §5.2): per-number effective bit-width, G = 32, d_h = 128, fp16 scale/zero, fp32 norms
@pytest.mark.parametrize(
    ("spec", "expected"),
    [("kivi-2", 3), ("turboquant", sp.Rational(15, 4)), ("innerq-base", sp.Rational(7, 2)),
     ("innerq-hybrid", sp.Rational(13, 4)), ("innerq-small", 3)],
)
def test_innerq_table3_effective_bits(spec: str, expected) -> None:
    assert bits(spec) == expected


# SKVQ Table 4 (seed 004): K2V2, window 128, average bits 2.125 / 2.25 / 2.5 for G = 128 / 64 / 32;
# they reproduce only with fp8 scale and zero (docs/papers/skvq.md §3)
@pytest.mark.parametrize(("group", "expected"), [(128, "2.125"), (64, "2.25"), (32, "2.5")])
def test_skvq_table4_average_bits(group: int, expected: str) -> None:
    assert bits(f"skvq:group_size={group},meta_dtype=fp8") == sp.Rational(expected)


def test_skvq_section_4_3_fp16_vs_fp8_metadata() -> None:
    # §4.3: "2+16*2/32=3, but if we use FP8, then average bits is 2+8*2/32=2.5"
    assert bits("skvq:group_size=32,meta_dtype=fp16") == 3
    assert bits("skvq:group_size=32,meta_dtype=fp8") == sp.Rational(5, 2)


def test_skvq_ternary_values_occupy_two_bits() -> None:
    # K2V1.5 stores ternary codes in 2-bit slots (SKVQ code, quant.cuh): same bytes as K2V2
    at = {L: 100_000}
    k2v15 = parse_method("skvq-k2v1.5").cache(LLAMA3).resident_bytes.subs(at)
    k2v2 = parse_method("skvq-k2v2").cache(LLAMA3).resident_bytes.subs(at)
    assert k2v15 == k2v2


# XQuant Tables 1 and 4, KIVI* rows (seed 000): KIVI with G = 128, normalized to fp16
@pytest.mark.parametrize(("b", "expected"), [(4, 0.27), (3, 0.20), (2, 0.14)])
def test_xquant_kivi_star_normalized_sizes(b: int, expected: float) -> None:
    assert round(float(bits(f"kivi:bits={b},group_size=128", LLAMA2) / 16), 2) == expected


@pytest.mark.parametrize(("b", "expected"), [(3, 0.21), (2, 0.15)])
def test_xquant_kivi_star_first_three_layers_at_4_bits(b: int, expected: float) -> None:
    cfg = Kivi(bits=b, group_size=128, overrides=(LayerOverride(start=0, stop=3, k_bits=4, v_bits=4),))
    assert round(float(cfg.cache(LLAMA2).asymptotic_bits() / 16), 2) == expected


# AQUA-KV Table 2 (seed 001): KIVI 2.25 bits -> 5.6 GiB, 4.25 bits -> 10.6 GiB, Llama-3.1-70B at 131,072 tokens
@pytest.mark.parametrize(("b", "gib"), [(2, 5.6), (4, 10.6)])
def test_aquakv_table2_kivi_cache_sizes(b: int, gib: float) -> None:
    model = load_model("Llama-3.1-70B")
    cache = parse_method(f"kivi:bits={b},group_size=128").cache(model)
    assert cache.asymptotic_bits() == b + sp.Rational(1, 4)
    size = cache.baseline_elements.subs(L, 131_072) * cache.asymptotic_bits() / 8
    assert round(float(size) / GIB, 1) == gib


def test_kvquant_within_skvq_table2_range() -> None:
    # SKVQ Table 2: KVQuant nuq2 + 1% outliers "2.32-2.35" average bits
    for model in (LLAMA2, LLAMA3):
        assert 2.32 <= round(float(bits("kvquant-2", model)), 2) <= 2.35


# ---- exact bytes at finite context, by hand ----------------------------------------------------------

def test_kivi_bytes_at_4096_by_hand() -> None:
    # keys: 4096 = 32 blocks of R = 128 all flushed -> 4096 x 1024 ch x 2 bits + (4096/32 groups x 1024) x 4 B
    # values: last 128 fp16, 3968 quantized per token in groups of 32 channels
    k = 4096 * 1024 * 2 // 8 + (4096 // 32) * 1024 * 4
    v = 3968 * 1024 * 2 // 8 + 3968 * (1024 // 32) * 4 + 128 * 1024 * 2
    cache = parse_method("kivi-2").cache(LLAMA3)
    assert cache.resident_bytes.subs(L, 4096) == 32 * (k + v)
    assert cache.effective_bits().subs(L, 4096) == sp.Rational(3 + sp.Rational(109, 32), 2)  # (3 + 3.40625)/2


def test_innerq_bytes_at_4096_by_hand() -> None:
    # 32 sinks + 96 recent in fp16; 3968 tokens at 3 bits + one fp16 scale per 32 elements (K and V alike)
    per_tensor = 128 * 1024 * 2 + 3968 * 1024 * 3 // 8 + 3968 * 1024 // 32 * 2
    cache = parse_method("innerq-base").cache(LLAMA3)
    assert cache.resident_bytes.subs(L, 4096) == 32 * 2 * per_tensor


def test_kivi_block_flush_drops_exact_bytes_but_not_reserved() -> None:
    # KIVI's key residual fills to R = 128 and is then quantized at once: bytes at L = 128 fall below L = 127,
    # while the reservation a sequence needs (the peak over its life) never falls
    cache = parse_method("kivi-2").cache(LLAMA3)
    assert cache.resident_bytes.subs(L, 128) < cache.resident_bytes.subs(L, 127)
    assert cache.reserved_bytes.subs(L, 128) >= cache.reserved_bytes.subs(L, 127)


def test_dequant_flops_inner_vs_outer_grouping() -> None:
    # per quantized element: outer grouping 2 FLOPs (scale and zero per element); InnerQ's inner grouping
    # applies them once per group of 32 per query head (GQA group 4): 2 x 4 / 32 for asym, 1 x 4 / 32 for sym
    big = {L: 10**6}
    kivi = parse_method("kivi:bits=2,residual=0").cache(LLAMA3).layers[0]
    (k_kivi, v_kivi) = kivi.tensors
    assert k_kivi.dequant_flops.subs(big) / (10**6 * 1024) == 2       # keys grouped along tokens: outer for QK
    inner = parse_method("innerq:sinks=0,window=0").cache(LLAMA3).layers[0]
    (k_in, v_in) = inner.tensors
    assert k_in.dequant_flops.subs(big) / (10**6 * 1024) == sp.Rational(1 * 4, 32)


# ---- bad configs: clear errors naming the field ---------------------------------------------------------

@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("kivi:bits=0", "bits"),
        ("kivi:bits=17", "bits"),
        ("kivi:group_size=48,residual=96", "group_size: 48 does not divide the 1024 channels of V"),
        ("kivi:residual=100", "residual: 100 is not a multiple of group_size 32"),
        ("innerq:group_size=48", "group_size: 48 does not divide the 1024 channels of K"),
        ("kvquant:bits=1", "bits"),
        ("skvq:meta_dtype=fp4", "meta_dtype"),
        ("innerq:v_mode=weird", "v_mode"),
        ("kivi-3", "unknown method or preset 'kivi-3'"),
        ("kivi:colour=red", "colour: Extra inputs are not permitted"),
    ],
)
def test_bad_method_configs(spec: str, needle: str) -> None:
    with pytest.raises(SpecError) as err:
        build_cache(parse_method(spec), LLAMA3)
    assert needle in str(err.value)
    assert "\n" not in str(err.value)


def test_every_preset_builds_for_every_architecture_kind() -> None:
    from roofline.methods import presets

    for name in presets():
        for model_name in ("Llama-3.1-8B", "Gemma-2-9B", "Mixtral-8x7B", "Qwen2.5-7B"):
            cache = parse_method(name).cache(load_model(model_name))
            value = float(cache.effective_bits().subs(L, 50_000))
            assert 0 < value <= 16.5 and math.isfinite(value)  # eviction scores can add a little
