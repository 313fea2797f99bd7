"""SGLang: how it sizes and logs the KV pool (max_total_num_tokens).

Rules, each read from SGLang's source (file @ commit, function; research notes in docs/engines.md):
- budget: rest = free memory after loading - free before x (1 - mem_fraction_static), i.e. about
  total x mem_fraction_static - weights - non-torch memory; activations and CUDA graphs are not profiled,
  they live in the (1 - mem_fraction_static) reserve
  (python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py@001ccef, profile_max_num_token).
- default mem_fraction_static (ServerArgs._handle_gpu_memory_settings, PR sglang#10975, ~v0.5.4), in MiB:
  reserved = 512 + max(chunked_prefill_size, 2048) x 1.5 + cuda_graph_max_bs x 2 + tp x pp / 8 x 1024,
  at least 10 GiB on GPUs over 60 GiB; fraction = (total - reserved) / total. chunked_prefill_size 8192 and
  cuda_graph_max_bs 256 are assumed (both depend on the GPU in SGLang).
- cell size: MHA/GQA 2 x H_kv/attn_tp (>= 1) x head_dim x bytes per token per layer; MLA (576) x bytes,
  replicated; DeepSeek-V3.2 (NSA, fp8): 656 + indexer 132 B (calculate_mla_kv_cache_dim; NSATokenToKVPool;
  verified against PR sglang#11309's logs). attn_tp = tp / dp with DP attention.
- tokens: max_total_num_tokens = floor(rest / cell_size) floored to the page (default page 1; NSA 64)
  (profile_max_num_token, init_memory). The pool allocates one more page per layer ("K size" in the log).
- hybrid SWA (gpt-oss, Gemma-3, Llama-4 chunked): full_tokens = rest / (F n_full + r S n_swa), swa_tokens =
  r full_tokens with swa_full_tokens_ratio r = 0.8 (set_num_tokens_hybrid_swa; r from the docs, inferred).
- sliding windows: SGLang 0.5.17 honours a model's window only where its implementation passes one to its attention
  (srt/models/*.py calling RadixAttention with sliding_window_size, or an architecture of
  configs/model_config.py is_hybrid_swa_model): WINDOWED_ARCHITECTURES. Any other runs its windowed layers over the
  whole context and keeps the whole context in the pool: Mistral-7B-v0.1 and Phi-3 through llama.py's LlamaAttention
  (srt/models/llama.py:209-217 passes no window; mistral.py:30 MistralForCausalLM(LlamaForCausalLM)). `as_run`.
- Mamba / Gated DeltaNet: mamba memory = rest x 0.9 / 1.9 (mamba_full_memory_ratio 0.9, handle_max_mamba_cache,
  docs PR sglang#15337), max_mamba_cache_size = floor(that / state per request); the rest holds full-attention KV.
"""

from __future__ import annotations

from roofline.accounting import indexer_bytes_per_token_layer
from roofline.engines.base import (
    GIB,
    BudgetParts,
    Capacity,
    EngineOptions,
    check_heads,
    check_model_len,
    kv_heads_per_rank,
    largest_fitting,
    model_dtype_bytes,
    refuse,
    stage_kinds,
    state_bytes_per_rank,
)
from roofline.specs import Model

KV_DTYPES = {"auto": None, "bf16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
NSA_PAGE = 64
NSA_MLA_BYTES = 656
SWA_RATIO = 0.8
MAMBA_RATIO = 0.9
SRC = "model_runner_kv_cache_mixin.py@001ccef"
# SGLang 0.5.17's EntryClass architectures whose attention takes the model's window or chunk (srt/models: afmoe,
# cohere2_moe, commandr, exaone4, exaone_moe, gemma2, gemma3_causal / gemma3_mm, gemma3n, gemma4, gpt_oss,
# iquest_loopcoder, jet_nemotron, laguna, mellum, mimo_v2, nemotron_h, olmo2, step3p5; llama4 / mllama4's chunked
# attention through is_hybrid_swa_model)
WINDOWED_ARCHITECTURES = frozenset({
    "AfmoeForCausalLM", "Cohere2MoeForCausalLM", "CohereForCausalLM", "Cohere2ForCausalLM", "Exaone4ForCausalLM",
    "ExaoneMoEForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration",
    "Gemma3nForCausalLM", "Gemma3nForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
    "GptOssForCausalLM", "IQuestLoopCoderForCausalLM", "JetNemotronForCausalLM", "LagunaForCausalLM",
    "MellumForCausalLM", "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM", "NemotronHForCausalLM", "Olmo2ForCausalLM",
    "Step3p5ForCausalLM", "Llama4ForCausalLM", "Llama4ForConditionalGeneration"})


def as_run(model: Model) -> Model:
    """The model as SGLang runs it: its sliding or chunked layers full-context when SGLang's implementation of its
    architecture takes no window (WINDOWED_ARCHITECTURES); otherwise the model itself."""
    if model.architecture in WINDOWED_ARCHITECTURES or not any(a.kind in ("sliding", "chunked")
                                                                for a in model.attention):
        return model
    attention = [a.model_copy(update={"kind": "full", "window": None}) if a.kind in ("sliding", "chunked") else a
                 for a in model.attention]
    return model.model_copy(update={"attention": attention})


def default_fraction(total: float, tp: int, pp: int, chunk: int = 8192, graph_bs: int = 256) -> float:
    """mem_fraction_static when unset (PR sglang#10975), see the module docstring."""
    reserved_mib = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if total > 60 * GIB:
        reserved_mib = max(reserved_mib, 10 * 1024)
    return round((total - reserved_mib * (1 << 20)) / total, 3)


def budget(parts: BudgetParts, opts: EngineOptions) -> float:
    """total x mem_fraction_static - weights - non-torch memory (no activation profiling)."""
    fraction = opts.gpu_memory_utilization or default_fraction(parts.total, opts.tp, opts.pp)
    return parts.total * fraction - parts.weights - parts.non_torch


def _cell(model: Model, opts: EngineOptions, rules: list[str]) -> tuple[float, int]:
    """(bytes per token per attention layer on one rank, page size)."""
    dtype = opts.kv_cache_dtype
    if dtype not in KV_DTYPES:
        raise refuse("--kv-cache-dtype", f"SGLang has no KV dtype {dtype!r}; valid: {', '.join(KV_DTYPES)}")
    b = KV_DTYPES[dtype] or model_dtype_bytes()
    page = opts.block_size or 1
    if model.sparse_attention is not None:
        if model.sparse_attention.indexer_layers is not None:
            raise refuse("--engine", "sglang: layers reusing another layer's top-k (indexer_layers) were not read in "
                                     "its NSA pool; not modelled")
        if dtype == "auto" or b == 1:
            index = indexer_bytes_per_token_layer(model)
            rules.append(f"sglang: NSA fp8 MLA {NSA_MLA_BYTES} B + indexer {index} B per token per layer, page "
                         f"{NSA_PAGE} (calculate_mla_kv_cache_dim; NSATokenToKVPool)")
            return NSA_MLA_BYTES + index, opts.block_size or NSA_PAGE
        return (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * b + indexer_bytes_per_token_layer(model), page
    if model.mla is not None:
        rules.append(f"sglang: MLA cell {model.mla.kv_lora_rank + model.mla.qk_rope_head_dim} x {b} B per layer, "
                     f"replicated on every rank ({SRC} get_cell_size_per_token)")
        return (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * b, page
    attn_tp = opts.tp // opts.dp if opts.dp > 1 else opts.tp
    heads = kv_heads_per_rank(model, attn_tp)
    rules.append(f"sglang: cell = 2 x {heads} KV heads/rank x {model.head_dim} x {b} B per layer "
                 f"({SRC} get_cell_size_per_token)")
    return 2 * heads * model.head_dim * b, page


def capacity(model: Model, opts: EngineOptions, rest: float, rules: list[str]) -> Capacity:
    """SGLang's max_total_num_tokens for `rest` bytes per rank, and what it means per request."""
    check_heads(model, opts.tp, "SGLang")
    check_model_len(model, opts, "SGLang", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
                    "srt/configs/model_config.py ModelConfig.__init__")
    if as_run(model) is not model:
        model = as_run(model)
        rules.append(f"sglang: {model.architecture} takes no window in SGLang 0.5.17 (srt/models/llama.py:209-217): "
                     "every layer keeps the whole context")
    if opts.dp > 1 and opts.tp % opts.dp:
        raise refuse("--dp", f"SGLang DP attention needs dp to divide tp ({opts.dp} does not divide {opts.tp})")
    per_layer, page = _cell(model, opts, rules)
    kinds = stage_kinds(model, opts.pp)
    full = sum(n for (k, _), n in kinds.items() if k == "full")
    windowed = {key: n for key, n in kinds.items() if key[0] in ("sliding", "chunked")}
    states = kinds.get(("state", None), 0)
    if states and not full and not windowed:  # its token pool would hold no layer: nothing to size
        raise refuse("--engine", "sglang: a model without attention layers (pure recurrent) is not modelled")
    budget, rest = rest, max(rest, 0.0)  # budget <= 0: reported as it is (the CLI prints the shortfall)
    slots = None
    if states:
        per_request = states * state_bytes_per_rank(model, opts.tp, model_dtype_bytes())
        mamba = rest * MAMBA_RATIO / (1 + MAMBA_RATIO)
        slots = int(mamba // per_request)
        rest -= mamba
        rules.append(f"sglang: mamba pool = rest x 0.9/1.9 -> {slots} request states ({SRC} handle_max_mamba_cache)")
    swa_layers = sum(windowed.values())
    if swa_layers and full:
        denominator = per_layer * (full + SWA_RATIO * swa_layers)
        rules.append(f"sglang: hybrid SWA pools, swa_full_tokens_ratio {SWA_RATIO} ({SRC} set_num_tokens_hybrid_swa)")
    else:
        denominator = per_layer * (full + swa_layers)
    tokens = int(rest // denominator) // page * page
    rules.append(f"sglang: max_total_num_tokens = floor(rest / cell) floored to page {page} ({SRC} "
                 "profile_max_num_token)")
    length = opts.model_len(model)

    window = max((w for _, w in windowed), default=0)

    def fits(n: int) -> bool:
        # every layer windowed: a request holds min(n, window) tokens of the pool (the window's tail), not none
        need = n if full else min(n, window)
        return -(-need // page) * page <= tokens

    concurrency = tokens / length if full else float(tokens // max(1, min(length, window)))
    if slots is not None:
        concurrency = min(concurrency, slots)
    return Capacity(
        engine="sglang", bytes_per_token=per_layer * full, kv_pool_bytes=rest if budget > 0 else budget,
        pool_tokens=tokens,
        max_concurrency=concurrency * opts.dp, fits=fits(length) and (slots is None or slots >= 1),
        max_model_len_that_fits=largest_fitting(fits), rules=rules,
        details={"page_size": page, "allocated_bytes_per_layer_kind": per_layer * (tokens + page),
                 "max_mamba_cache_size": slots, "max_model_len": length})
