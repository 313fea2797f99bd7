"""The papers' headline claims, recomputed now by the library, each with a verdict decided by code (XQuant and
AQUA-KV here, SKVQ, InnerQ and ZACK in claims_skvq_innerq_zack, the papers' latency figures in claims_latency, the
shared vocabulary in verdicts).

`CLAIMS` pairs each quote of claim_quotes.QUOTES (seed, section, the paper's words, unit, what the computation
assumes: data) with a `compute` returning the values it needs (`computed` is reported) and a `judge` turning them
into a verdict and a one-sentence detail by an explicit tolerance; AQUA-KV's Table 2 gives one claim per row.
Re-derivations: docs/papers/{xquant,aquakv,innerq,zack,skvq}.md.
Verdicts: "holds" (the library's full model reproduces the claim), "holds only under stated assumptions" (only the
paper's own convention does; the detail names it), "does not hold", "not checkable by the model" (a measurement on
hardware the catalogue does not hold).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from roofline.accounting import kv_bytes
from roofline.analysis.claim_quotes import AQUAKV_TABLE2, AQUAKV_TABLE2_QUOTE, QUOTES
from roofline.analysis.claims_latency import LATENCY_CLAIMS, innerq_speedup, judge_innerq_speedup
from roofline.analysis.claims_skvq_innerq_zack import (
    innerq_bits,
    judge_089,
    judge_68,
    judge_innerq_bits,
    judge_skvq_1m,
    judge_skvq_7x,
    judge_skvq_fp8,
    judge_skvq_table4,
    llm_viewer_step_s,
    skvq_1m,
    skvq_7x,
    skvq_fp8,
    skvq_table4,
    zack_089,
    zack_68,
)
from roofline.analysis.compute_for_memory import (
    context_for_overhead_ratio,
    predictor_overhead_ratio,
    reference_step_ratio,
    remat_limit,
    remat_limit_paper,
)
from roofline.analysis.verdicts import (
    FACTOR_REL,
    FAILS,
    HOLDS,
    QUALIFIED,
    SEEDS,
    SPEEDUP_REL,
    UNCHECKABLE,
    VERDICTS,
    Claim,
    datasheet_hardware,
    preset_bits,
    tiered,
)
from roofline.catalogue import load_model
from roofline.lazy import sp
from roofline.methods import build_cache, parse_method
from roofline.methods.aquakv import AquaKV
from roofline.units import GIB


def xquant_saving(spec: str) -> Callable[[], dict[str, Any]]:
    """A `compute` for XQuant's memory saving of `spec` on Llama-2-7B (Tables 1 and 4): the ratio
    16 / bits, the bits, and the normalized size 1 / ratio rounded to two decimals as the tables print it."""
    def compute() -> dict[str, Any]:
        ratio = float(build_cache(parse_method(spec), load_model("Llama-2-7B")).compression_ratio())
        size = round(1 / ratio, 2)  # the normalized size as Tables 1 and 4 print it
        return {"computed": round(ratio, 3), "bits": 16 / ratio, "size": size, "from_size": 1 / size}
    return compute


def judge_saving(stated: float) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """A `judge` for a `stated` saving factor: HOLDS if the exact ratio is within FACTOR_REL of it,
    QUALIFIED if only 1 / (the printed normalized size), to one decimal, equals it, else FAILS."""
    def judge(v) -> tuple[str, str]:
        verdict = tiered(v["computed"] >= stated * (1 - FACTOR_REL), round(v["from_size"], 1) == stated)
        return verdict, (f"{v['bits']:.4f} bits against 16 is {v['computed']:.2f}x exactly; {stated}x is 1 / "
                         f"{v['size']:.2f}, the normalized size rounded to two decimals ({v['from_size']:.2f}x)")
    return judge


def xquant_vs_kivi(bits: int) -> Callable[[], dict[str, Any]]:
    """KIVI* (group 128) at `bits` over XQuant-4 bytes on MHA Llama-2-7B; also on GQA and against KIVI*-4bit."""
    def compute() -> dict[str, Any]:
        ratio = {(b, m): float(preset_bits(f"kivi:bits={b},group_size=128", m) / preset_bits("xquant-4", m))
                 for b in {bits, 4} for m in ("Llama-2-7B", "Llama-3.1-8B")}
        return {"computed": round(ratio[bits, "Llama-2-7B"], 3), "gqa": ratio[bits, "Llama-3.1-8B"],
                "vs4": ratio[4, "Llama-2-7B"]}
    return compute


def judge_2x(v) -> tuple[str, str]:
    """HOLDS if KIVI*-4 over XQuant-4 bytes on MHA Llama-2-7B is 2 within 2·SPEEDUP_REL, else FAILS;
    the detail adds the GQA Llama-3.1-8B ratio."""
    return tiered(abs(v["computed"] - 2) <= 2 * SPEEDUP_REL, False), (
        f"At equal bits X (d wide) is {v['computed']:.2f}x smaller than K and V (2d) on MHA Llama-2-7B; on GQA "
        f"Llama-3.1-8B the SVD latents make it {v['gqa']:.2f}x")


def judge_2x_kivi2(v) -> tuple[str, str]:
    """HOLDS if KIVI*-2bit is at least 2x (less SPEEDUP_REL) XQuant-4bit's bytes, else FAILS."""
    return tiered(v["computed"] >= 2 * (1 - SPEEDUP_REL), False), (
        f"KIVI*-2bit (2.25 bits over K and V) is only {v['computed']:.2f}x the size of XQuant-4bit; the 2x holds "
        f"against KIVI*-4bit ({v['vs4']:.2f}x)")


def remat_paper(model: str) -> Callable[[], dict[str, Any]]:
    """A `compute` for XQuant's rematerialization limit l* (tokens) of `model` from §3.4's Eq. 3 (MHA)
    or Eq. 4 (GQA) as printed (`remat_limit_paper`)."""
    def compute() -> dict[str, Any]:
        r = remat_limit_paper(load_model(model))
        return {"computed": round(r["limit_tokens"]), "equation": r["equation"]}
    return compute


def judge_remat(stated_k: float) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """A `judge`: HOLDS if l* in thousands of tokens, rounded to one decimal, equals `stated_k`,
    else FAILS."""
    def judge(v) -> tuple[str, str]:
        return tiered(round(v["computed"] / 1000, 1) == stated_k, False), (
            f"{v['equation']} as printed (P = 378, d = 4096, e = 2, batch 1) solves to l* = {v['computed']:,} "
            f"tokens, {v['computed'] / 1000:.2f}K")
    return judge


def xquant_ridge() -> dict[str, Any]:
    """Catalogue ridges (FLOP/byte) of H100-SXM and H100-PCIe and XQuant-2's remat limits l* (tokens,
    batch 1) on Llama-2-7B and Llama-3.1-8B there, keyed (hardware, "ridge") and (hardware, model)."""
    out: dict[str, Any] = {}
    for hw in ("H100-SXM", "H100-PCIe"):
        for model in ("Llama-2-7B", "Llama-3.1-8B"):
            r = remat_limit(load_model(model), datasheet_hardware(hw), 2, 1)
            out[hw, "ridge"], out[hw, model] = r["ridge_flops_per_byte"], round(r["limit_tokens"])
    return {**out, "computed": f"{out['H100-SXM', 'Llama-2-7B']:,} / {out['H100-SXM', 'Llama-3.1-8B']:,} on H100-SXM"}


def judge_ridge(v) -> tuple[str, str]:
    """HOLDS if H100-SXM's catalogue ridge is §3.4's 378 FLOP/byte within FACTOR_REL, QUALIFIED if only
    H100-PCIe's is, else FAILS."""
    sxm, pcie = v["H100-SXM", "ridge"], v["H100-PCIe", "ridge"]
    return tiered(abs(sxm - 378) <= FACTOR_REL * 378, abs(pcie - 378) <= FACTOR_REL * 378), (
        f"756 TFLOP/s over 2 TB/s is the H100 PCIe (catalogue ridge {pcie:.1f}: limits "
        f"{v['H100-PCIe', 'Llama-2-7B']:,} / {v['H100-PCIe', 'Llama-3.1-8B']:,}); the SXM part's ridge {sxm:.1f} "
        f"cuts them to {v['H100-SXM', 'Llama-2-7B']:,} / {v['H100-SXM', 'Llama-3.1-8B']:,} tokens")


def bf16_cache_bytes(*models: str) -> Callable[[], dict[str, Any]]:
    """A `compute` for the bf16 K and V bytes of each of `models` at 131,072 tokens, batch 1
    (AQUA-KV §1, footnote 1); `computed` is the first model's."""
    def compute() -> dict[str, Any]:
        sizes = [int(kv_bytes(load_model(m), "bf16", 131_072)) for m in models]
        return {"computed": sizes[0], "sizes": dict(zip(models, sizes, strict=True))}
    return compute


def judge_gb(stated: float) -> Callable[[dict[str, Any]], tuple[str, str]]:
    """A `judge`: HOLDS if every size is `stated` in GB (1e9 bytes, one decimal), QUALIFIED if only in GiB,
    else FAILS."""
    def judge(v) -> tuple[str, str]:
        gb, gib = ([round(n / unit, 1) == stated for n in v["sizes"].values()] for unit in (1e9, GIB))
        sizes = "; ".join(f"{m} {n:,} B = {n / 1e9:.2f} GB ({n / GIB:.1f} GiB)" for m, n in v["sizes"].items())
        return tiered(all(gb), all(gib)), f"bf16 K and V at 131,072 tokens: {sizes}"
    return judge


def aquakv_500x() -> dict[str, Any]:
    """AQUA-KV §3.2's "500x" on Llama-3.1-70B: base over predictor FLOPs per new token at context 1
    (`computed`), the context where it reaches 500 (`from`, tokens), and the reference decode's predictor over
    model FLOPs per step at 1,024 and 131,072 tokens (`step`)."""
    model, config = load_model("Llama-3.1-70B"), AquaKV()
    short, from_ctx = predictor_overhead_ratio(model, config, 1), context_for_overhead_ratio(model, config, 500)
    step = {ctx: reference_step_ratio(model, config, ctx) for ctx in (1024, 131_072)}
    return {"computed": round(short, 1), "from": from_ctx, "max_ctx": model.max_position_embeddings, "step": step}


def judge_500x(v) -> tuple[str, str]:
    """HOLDS if the ratio is 500 at short context, QUALIFIED if it reaches 500 within the model's
    maximum context, else FAILS."""
    (lo_ctx, lo), (hi_ctx, hi) = v["step"].items()
    return tiered(v["computed"] >= 500, v["from"] <= v["max_ctx"]), (
        f"Per new token, Llama-3.1-70B's decode FLOPs are {v['computed']:.0f}x its linear predictors' (6 d_kv^2 x 79 "
        f"layers) at short context and reach 500x only from {v['from']:,} tokens, when attention adds enough FLOPs; "
        f"it does not hold for the reference decode (Alg. 4), which re-predicts every cached token each step: the "
        f"predictors cost {lo:.1f}x ({lo_ctx:,} tokens) to {hi:.0f}x ({hi_ctx:,}) the model's own FLOPs")


def gib(text: str) -> Decimal:
    """A GiB figure rounded half up to one decimal, as Table 2 prints it."""
    return Decimal(text).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)


def table2_row(method: str, bits: str, printed: str) -> Callable[[], dict[str, Any]]:
    """Table 2's size from the row's own bits column (x 40 GiB / 16, + predictors for AQUA-KV); AQUA-KV rows also
    from the library's aquakv-N on the 70B, and with layer 0 in bf16 (what the 4.02 row's size would fit)."""
    def compute() -> dict[str, Any]:
        model = load_model("Llama-3.1-70B")
        full = sp.Rational(kv_bytes(model, "bf16", 131_072), GIB)  # 40 GiB
        aqua = build_cache(parse_method(f"aquakv-{round(float(bits))}"), model) if method == "AQUA-KV" else None
        predictors = sp.Rational(aqua.fixed_total, GIB) if aqua else 0
        size = float(full * sp.Rational(bits) / 16 + predictors)
        out = {"computed": round(size, 2), "size": size, "full": float(full), "predictors": float(predictors),
               "row": (method, bits, printed), "printed": printed,
               "implied_bits": float((sp.Rational(printed) - predictors) * 16 / full)}
        if aqua is not None:
            own = aqua.asymptotic_bits()
            bf16_first = build_cache(parse_method(f"aquakv-{round(float(bits))}:first_layer_bits=16"), model)
            out.update(own_bits=float(own), own=float(full * own / 16 + predictors),
                       bf16_first=float(full * bf16_first.asymptotic_bits() / 16 + predictors))
        return out
    return compute


def judge_table2(v) -> tuple[str, str]:
    """HOLDS if the bits column gives the printed GiB (rounded half up to one decimal); for AQUA-KV rows
    HOLDS needs the 70B's own bits to give it and the bits column alone makes it QUALIFIED; else FAILS."""
    printed = gib(v["printed"])
    by_column = gib(f"{v['size']:.6f}") == printed
    plus = f" + {v['predictors']:.3f} GiB of predictors" if v["predictors"] else ""
    text = f"The bits column gives {v['size']:.2f} GiB ({v['full']:.0f} GiB x bits / 16{plus})"
    if not by_column:
        same_size = [f"{m} {b}" for m, b, g in AQUAKV_TABLE2 if g == v["printed"] and (m, b, g) != v["row"]]
        text += f"; the printed {v['printed']} would need {v['implied_bits']:.2f} bits"
        text += f" (it is the size printed for {' and '.join(same_size)})" if same_size else ""
    if "own" not in v:
        return (HOLDS if by_column else FAILS), text
    text += f"; the 70B's own {v['own_bits']:.4f} bits give {v['own']:.2f}"
    if not by_column:
        text += f", and a layer 0 kept in bf16 {v['bf16_first']:.2f}, which the paper does not state"
    return tiered(gib(f"{v['own']:.6f}") == printed, by_column), text




COMPUTATIONS: tuple[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], tuple[str, str]]], ...] = (
    ("skvq-1m-context", skvq_1m, judge_skvq_1m),
    ("skvq-7x-decode", skvq_7x, judge_skvq_7x),
    ("skvq-fp8-50pct", skvq_fp8, judge_skvq_fp8),
    ("skvq-table4-bits", skvq_table4, judge_skvq_table4),
    ("xquant-7.7x", xquant_saving("xquant-4"), judge_saving(7.7)),
    ("xquant-cl-10x", xquant_saving("xquant-cl-3"), judge_saving(10)),
    ("xquant-cl-12.5x", xquant_saving("xquant-cl-2"), judge_saving(12.5)),
    ("xquant-2x-x-vs-kv", xquant_vs_kivi(4), judge_2x),
    ("xquant-2x-vs-kivi2", xquant_vs_kivi(2), judge_2x_kivi2),
    ("xquant-remat-2.3k", remat_paper("Llama-2-7B"), judge_remat(2.3)),
    ("xquant-remat-40.6k", remat_paper("Llama-3.1-8B"), judge_remat(40.6)),
    ("xquant-h100-ridge", xquant_ridge, judge_ridge),
    ("aquakv-15gb", bf16_cache_bytes("Llama-3.2-3B"), judge_gb(15.0)),
    ("aquakv-42.9gb", bf16_cache_bytes("Llama-3.1-70B", "Qwen2.5-72B"), judge_gb(42.9)),
    ("aquakv-500x", aquakv_500x, judge_500x),
    ("innerq-table3-bits", innerq_bits, judge_innerq_bits),
    ("innerq-2.7x", innerq_speedup, judge_innerq_speedup),
    ("zack-kvquant-z-0.89", zack_089, judge_089),
    ("zack-68pct", zack_68, judge_68),
)
if {c[0] for c in COMPUTATIONS} != set(QUOTES):
    raise ValueError(f"claims: quotes and computations differ on {set(QUOTES) ^ {c[0] for c in COMPUTATIONS}}")


def table2_claims() -> tuple[Claim, ...]:
    """One claim per row of AQUA-KV's Table 2 cache-size column."""
    def claim_id(method: str, bits: str) -> str:
        return f"aquakv-table2-{method.lower().replace('-', '')}-{bits}"

    return tuple(Claim(claim_id(m, b), statement=f"{m} {b} bits: cache size {g} GiB (Llama 3.1 70B, 2^17 tokens, "
                       "batch 1, including predictors)", compute=table2_row(m, b, g), judge=judge_table2,
                       **AQUAKV_TABLE2_QUOTE) for m, b, g in AQUAKV_TABLE2)


CLAIMS: tuple[Claim, ...] = tuple(Claim(i, compute=c, judge=j, **QUOTES[i]) for i, c, j in COMPUTATIONS) + \
    table2_claims() + LATENCY_CLAIMS


def evaluate(claim: Claim) -> dict[str, Any]:
    """The claim recomputed now: its quote fields with its seed file, `computed`, verdict and detail.
    Raises ValueError if the judge returns a verdict outside VERDICTS."""
    values = claim.compute()
    verdict, detail = claim.judge(values)
    if verdict not in VERDICTS:
        raise ValueError(f"verdict: {verdict!r} of {claim.id} is not one of {VERDICTS}")
    return {"id": claim.id, "seed": SEEDS[claim.paper], "section": claim.section, "statement": claim.statement,
            "computed": values["computed"], "unit": claim.unit, "assumptions": claim.assumptions,
            "verdict": verdict, "detail": detail}


def claims() -> list[dict[str, Any]]:
    """Every claim of CLAIMS, recomputed now."""
    return [evaluate(claim) for claim in CLAIMS]


__all__ = ["CLAIMS", "FAILS", "HOLDS", "QUALIFIED", "SEEDS", "UNCHECKABLE", "VERDICTS", "Claim", "claims",
           "evaluate", "judge_skvq_1m", "llm_viewer_step_s", "tiered"]
