"""The papers' headline claims as data: per claim id, its seed, section, the paper's words, the unit of the computed
value and what the computation assumes; and AQUA-KV's Table 2 cache-size column, row by row.

claims.py holds the computations and the verdicts; quotes and re-derivations: docs/papers/*.md.
"""

from __future__ import annotations

QUOTES: dict[str, dict[str, str]] = {
    "skvq-1m-context": dict(
        paper="skvq", section="Abstract; §1; App. C",
        statement="it is possible to process context lengths of up to 1M on an 80GB memory GPU for a 7b model",
        unit="tokens (batch 1)",
        assumptions="Llama-2-7B on A100-80GB (80 GiB): (a) the planner's budget (0.9 utilization, 1 GiB reserve, "
        "prefill activations, 16-token pages) with SKVQ K2V2 g128 fp16 metadata, window 128, 5 sinks; (b) 2-bit KV "
        "with no metadata or windows, weights + KV filling the whole GPU. Table 5 stops at 200k tokens."),
    "skvq-7x-decode": dict(
        paper="skvq", section="§1; App. C, Table 5",
        statement="in the case of batch size 128 and sequence length 200k, the theoretical 7x speedup can be "
        "achieved", unit="x (fp16 / 2-bit decode step)",
        assumptions="Llama-2-7B, A100-80GB, B = 128, L = 200,000: our roofline (K and V read, SKVQ K2V2 metadata, "
        "windows, dequantization) and LLM-Viewer's (KV counted once, no metadata, 2,039 GB/s)."),
    "skvq-fp8-50pct": dict(
        paper="skvq", section="§4.3",
        statement="if we use FP8, then average bits is 2+8*2/32=2.5, which is 50% smaller", unit="fraction smaller",
        assumptions="SKVQ 2-bit, group 32, scale and zero in fp16 vs fp8; asymptotic bits (windows excluded)."),
    "skvq-table4-bits": dict(
        paper="skvq", section="§4.3, Tables 3-4",
        statement="Avg Bits 2.125 / 2.25 / 2.5 for group size 128 / 64 / 32", unit="bits per element",
        assumptions="SKVQ K2V2 with Mistral-7B's shapes (the bits do not depend on them), asymptotic bits (window "
        "excluded), with FP8 (E4M3) scale and zero: the last of SKVQ's components in Table 3; fp16 for contrast."),
    "xquant-7.7x": dict(
        paper="xquant", section="Abstract; §1; §4.1, Table 1",
        statement="Relative to the FP16 baseline, XQuant achieves under 0.1 perplexity degradation, while using "
        "7.7x less memory", unit="x (fp16 / XQuant bytes)",
        assumptions="xquant-4 on Llama-2-7B: X per token at 4 bits, group 128, fp16 scale and zero; residual window "
        "excluded."),
    "xquant-cl-10x": dict(
        paper="xquant", section="Abstract; §4.3, Table 4",
        statement="XQuant-CL attains up to 10x memory savings relative to the FP16 baseline with only 0.01 "
        "perplexity degradation", unit="x (fp16 / XQuant bytes)",
        assumptions="xquant-cl-3 on Llama-2-7B: 3-bit deltas, first 3 layers at 4 bits (Table 4), group 128 fp16 "
        "scale and zero; accumulator not counted."),
    "xquant-cl-12.5x": dict(
        paper="xquant", section="Abstract; §4.3, Table 4",
        statement="XQuant-CL results in only 0.1 perplexity degradation in 2-bit with 12.5x memory savings",
        unit="x (fp16 / XQuant bytes)",
        assumptions="xquant-cl-2 on Llama-2-7B: 2-bit deltas, first 3 layers at 4 bits, group 128 fp16 scale and "
        "zero."),
    "xquant-2x-x-vs-kv": dict(
        paper="xquant", section="§1; §3.1, Fig. 2",
        statement="we quantize and cache the input embedding X, which requires 2x less memory than using standard "
        "KV caching", unit="x (KV bytes / X bytes)",
        assumptions="KIVI* (4-bit, group 128) against XQuant-4, asymptotic bits, Llama-2-7B (MHA)."),
    "xquant-2x-vs-kivi2": dict(
        paper="xquant", section="§4.2, Table 3",
        statement="XQuant-4bit ... outperforms KIVI*-2bit while using 2x less memory",
        unit="x (KIVI*-2bit bytes / XQuant-4bit bytes)",
        assumptions="KIVI* 2-bit group 128 against XQuant-4 on Llama-2-7B, asymptotic bits with fp16 scale and "
        "zero."),
    "xquant-remat-2.3k": dict(
        paper="xquant", section="§3.4, Eq. 3",
        statement="Solving this equation for P=378, d=4K, and e=2 gives a maximum sequence length of 2.3K",
        unit="tokens",
        assumptions="Eq. 3 as printed: ridge 378, d = 4096, e = 2, batch 1, remat FLOPs only, weights overlapped, "
        "no metadata."),
    "xquant-remat-40.6k": dict(
        paper="xquant", section="§3.4, Eq. 4",
        statement="Solving this equation for P=378, d=4K, g=4, and e=2 gives a maximum sequence length of 40.6K",
        unit="tokens",
        assumptions="Eq. 4 as printed (one latent's traffic, e/8·l·d/g): ridge 378, d = 4096, g = 4, e = 2, "
        "batch 1."),
    "xquant-h100-ridge": dict(
        paper="xquant", section="§3.4",
        statement="we assume the NVIDIA H100 GPU as our hardware target, which has a ridge point of P = 756 TFLOPs "
        "/ 2 TB/s = 378", unit="tokens (Llama-2-7B / Llama-3.1-8B)",
        assumptions="The catalogue form of Eq. 3-4 (XQuant 2-bit from the op graph: metadata, every layer weight), "
        "batch 1, dense bf16 peak over datasheet bandwidth."),
    "aquakv-15gb": dict(
        paper="aquakv", section="§1, footnote 1",
        statement="For the popular Llama 3.2 3B model ... the 16-bit cache takes up 15 GB per sequence",
        unit="bytes", assumptions="bf16 K and V of every layer at 2^17 = 131,072 tokens, batch 1."),
    "aquakv-42.9gb": dict(
        paper="aquakv", section="§1, footnote 1",
        statement="For Llama 3.1 70B and Qwen 2.5 72B, it is 42.9 GB per sequence", unit="bytes",
        assumptions="bf16 K and V at 131,072 tokens, batch 1; computed is Llama-3.1-70B, the verdict needs "
        "Qwen2.5-72B too."),
    "aquakv-500x": dict(
        paper="aquakv", section="§3.2",
        statement="inferencing AQUA-KV predictors for a token requires at least 500x less floating point "
        "operations than running the base model for the same token",
        unit="x (base FLOPs / predictor FLOPs per new token, 1 token of context)",
        assumptions="Llama-3.1-70B, linear predictors (MAC = 2 FLOPs), base = one bf16 decode step at batch 1 with "
        "attention; per new token, and per reference decode step (Alg. 4: every cached token re-predicted)."),
    "innerq-table3-bits": dict(
        paper="innerq", section="§5.2, Table 3",
        statement="Per-number effective bit-width: KIVI 3, TurboQuant 3.75, InnerQ_Base 3.5, InnerQ_Hybrid 3.25, "
        "InnerQ_Small 3", unit="bits per element",
        assumptions="The five presets on Llama-3.1-8B, asymptotic bits (fp16 windows excluded, as the table)."),
    "innerq-2.7x": dict(
        paper="innerq", section="Abstract; §1; §5.3, Table 4",
        statement="InnerQ achieves an average speedup of 2.7x relative to a non-quantized FP16 cache",
        unit="x (FP16 / InnerQ_Base attention time, mean over Table 4's lengths)",
        assumptions="A kernel measurement: one layer of Llama-3.1-8B, batch 1, the seven lengths 512..32768, Jetson "
        "Xavier NX (catalogue: Jetson-Xavier-NX-8GB, datasheet ceilings); the planner's attention ops of fp16 and "
        "innerq-base, also with K and V read once per query head (GQA expanded), as Table 4's FP16 row implies."),
    "zack-kvquant-z-0.89": dict(
        paper="zack", section="§6.1; §6.3, Table 8",
        statement="KVQuant 0.75, KVQuant-Z 0.89 (Llama-3.1 8B, IMDb)", unit="overall compression rate",
        assumptions="Stack zack (uniform p = 0.56) + kvquant-4 on Llama-3.1-8B, asymptotic bits, kept dims stored "
        "exactly (§6.1 pads only the kernel's tiles to 16; padded storage shown too); the paper's accounting: "
        "KVQuant at exactly 4 bits."),
    "zack-68pct": dict(
        paper="zack", section="Abstract; §1; §6.1; §6.3, Tables 8-11",
        statement="state-of-the-art eviction-based and quantization-based methods ... further reduce KV size by "
        "up to 68%", unit="fraction of KVQuant's bytes removed",
        assumptions="Stack zack + kvquant-4 on Llama-3.1-8B against kvquant-4 alone, ZACK at the rate the best rows "
        "imply (0.92 vs 0.75), kept dims stored exactly (padded storage shown too); accuracy (the 99% "
        "constraint) is not modelled."),
}

# AQUA-KV Table 2, "Cache size GiB, 70B" (Llama 3.1 70B, 2^17 tokens, batch 1, including predictors), with the
# row's "Quant. bits" column (Llama 3.2 3B's for AQUA-KV, docs/papers/aquakv.md §6): (method, bits, GiB).
AQUAKV_TABLE2: tuple[tuple[str, str, str], ...] = (
    ("Uncompressed", "16", "40"),
    ("AQUA-KV", "2.09", "5.7"), ("HIGGS", "2.02", "5.1"), ("KIVI", "2.25", "5.6"), ("KVQuant", "2.33", "5.6"),
    ("AQUA-KV", "3.06", "8.1"), ("HIGGS", "3.02", "7.6"), ("KIVI", "3.05", "7.7"), ("KVQuant", "3.33", "8.3"),
    ("AQUA-KV", "4.02", "10.9"), ("HIGGS", "4.02", "10.6"), ("KIVI", "4.25", "10.6"), ("KVQuant", "4.33", "10.8"),
)
AQUAKV_TABLE2_QUOTE = dict(
    paper="aquakv", section="§4.2, Table 2", unit="GiB",
    assumptions="The row's bits column x 40 GiB (bf16 K and V of Llama-3.1-70B at 131,072 tokens) / 16, plus "
    "0.463 GiB of bf16 linear predictors for AQUA-KV; sinks and buffer excluded, as the caption's total does. "
    "AQUA-KV rows also by the library's aquakv-N on the 70B (its own bits).")

# ---- latency claims (claims_latency.py): the papers' timed or roofline latencies, and the tables they print ----

LATENCY_QUOTES: dict[str, dict[str, str]] = {
    "zack-tbt-cocktail": dict(
        paper="zack", section="§3 (setup, Tables 2-3, 10); §6.3, Fig. 14",
        statement="For IMDb, arXiv, Cocktail, and HumanEval, ZACK reduces TBT by 23%-47%, 25%-54%, 57%-61%, and "
        "25%-45%, respectively, compared to the baseline", unit="fraction of TBT removed (Cocktail)",
        assumptions="Cocktail (Table 3: prompt 16.2K, output 159 tokens on average), A100 80 GiB (p4de), 16 "
        "concurrent clients read as a decode batch of 16, vLLM's fp16 PagedAttention as the baseline; ZACK at Table "
        "10's Cocktail rate (Mistral-v0.3 7B 0.58 on one GPU, Llama-3.1 70B 0.59 at TP 4) stored exactly; TBT = the "
        "planner's mean TPOT over the 159 generated tokens. Queueing and prefill interference are not modelled."),
    "zack-ttft-cocktail": dict(
        paper="zack", section="§6.3, Fig. 13",
        statement="For IMDb, arXiv, Cocktail, and HumanEval, ZACK reduces TTFT by 17%-33%, 34%-42%, 37%-48%, and "
        "18%-29%, respectively, compared to the baseline", unit="fraction of TTFT removed (Cocktail)",
        assumptions="As zack-tbt-cocktail; TTFT = the planner's prefill of one 16,200-token prompt (vLLM prefills "
        "an arriving prompt on its own), queueing not modelled."),
    "skvq-table5-latency": dict(
        paper="skvq", section="App. C, Table 5",
        statement="LLaMA-7B memory and latency analysis with roof line model. The hardware platform is A100 80G, we "
        "assume flash-attention is used (Inference Time, ms: FP16 / KV4 / KV2 at batch 1, 64, 128 and 32k, 128k, "
        "200k tokens)", unit="ms (decode step: FP16 / KV2, full model, 128 x 200k)",
        assumptions="Llama-2-7B on A100-80GB (datasheet 2,039 GB/s), a decode step at each printed (batch, length), "
        "k = 1,000 tokens; LLM-Viewer's convention (llm_viewer_step_s: KV counted once, no metadata) for all 27 "
        "cells and the planner's full model (fp16 and SKVQ K2V2 with metadata and windows) for FP16 and KV2."),
    "innerq-table4-vs-kivi": dict(
        paper="innerq", section="Abstract; §5.3, Table 4, Fig. 4",
        statement="We also compare the latency of InnerQ with prominent KV cache quantization methods KIVI [14] and "
        "TurboQuant [23] and observe an average speedup of 1.3x and 1.2x, respectively",
        unit="x (KIVI / InnerQ_Base time, mean over Table 4's lengths)",
        assumptions="One layer of Llama-3.1-8B, batch 1, the seven lengths 512..32768, NVIDIA Jetson Xavier NX "
        "(the paper does not say 8 or 16 GB; both modules have the same GPU and 59.7 GB/s): the planner's attention "
        "ops (attention + split-K reduce) of kivi-2 and innerq-base/-hybrid/-small, datasheet ceilings; also with K "
        "and V read once per query head (GQA expanded: §5.3's kernel multiplies 'a quantized matrix and an FP16 "
        "vector', and the FP16 row's time is that traffic at 59.7 GB/s)."),
    "aquakv-latency-overhead": dict(
        paper="aquakv", section="§5 (Inference time); App. H, Fig. 6",
        statement="our implementation introduces an average inference overhead of 60% for shorter sequences (fewer "
        "than 10k tokens), and an average overhead of 18% for longer sequences (10k to 32k tokens)",
        unit="fraction over bf16 (mean TPOT, reference decode: <10K / 10-32K)",
        assumptions="Llama-3.2-3B, batch 1, one A100 (80 GB: the 70B's bf16 weights need two), generation from 1 to "
        "32,768 tokens; the bf16 baseline is Hugging Face Transformers, AQUA-KV adds PyTorch predictors and custom "
        "HIGGS CUDA kernels. The planner's mean TPOT of aquakv-2 (reference decode, Alg. 4, and the incremental "
        "lower bound) over bf16 on [1, 10,000) and [10,000, 32,768]."),
    "xquant-remat-crossover": dict(
        paper="xquant", section="§1; §3.4, Eq. 3-4",
        statement="we can overlap the KV cache recomputation with loading the model weights ... We can solve for "
        "the maximum amount that we can reconstruct without compute becoming the bottleneck",
        unit="x (XQuant-2 / fp16 decode step at the paper's l*: Llama-2-7B / Llama-3.1-8B)",
        assumptions="H100 PCIe (the paper's 756 TFLOP/s / 2 TB/s), batch 1, XQuant-2 fused (remat inside "
        "attention), the planner's op-by-op step (each kernel max(compute, memory)) at l* = 2,281 / 40,627 tokens; "
        "and the step with every op overlapped (max of summed compute and summed memory), the paper's assumption."),
}

# InnerQ Table 4, "Total" rows (us; Jetson Xavier NX, one layer of Llama 3.1-8B, batch 1), by sequence length.
INNERQ_TABLE4_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384, 32768)
INNERQ_TABLE4_TOTAL_US: dict[str, tuple[int, ...]] = {
    "fp16": (153, 295, 582, 1174, 2320, 4638, 9516),
    "kivi": (79, 146, 278, 543, 1074, 2142, 4331),
    "turboquant": (75, 140, 267, 516, 1017, 2027, 4046),
    "innerq-base": (64, 118, 220, 420, 822, 1633, 3276),
    "innerq-hybrid": (63, 112, 210, 406, 801, 1591, 3180),
    "innerq-small": (62, 110, 208, 403, 795, 1575, 3136),
}
INNERQ_TABLE4_FP16_KEY_US = (76, 147, 291, 576, 1148, 2291, 4593)  # "Key Cache (Equation (3))", Baseline (FP16)

# SKVQ Table 5 "Inference Time" (ms; LLM-Viewer's roofline, LLaMA-7B, A100 80G): (batch, k tokens) -> FP16, KV4, KV2.
SKVQ_TABLE5_MS: dict[tuple[int, int], tuple[float, float, float]] = {
    (1, 32): (10.6, 7.5, 7.0), (1, 128): (23.1, 10.8, 8.7), (1, 200): (32.5, 13.3, 10.0),
    (64, 32): (274.1, 76.6, 43.7), (64, 128): (1100, 286.4, 154.8), (64, 200): (1700, 443, 238.1),
    (128, 32): (541.8, 146.8, 81.0), (128, 128): (2100, 566.4, 303.1), (128, 200): (3300, 881.1, 469.7),
}
