"""vLLM (V1 engine): how it sizes and logs the KV cache.

Rules, each read from vLLM's source (file @ commit, function; research notes in docs/engines.md):
- budget: "Available KV cache memory" = total x gpu_memory_utilization - weights - peak
  activation of a profile run of max_num_batched_tokens - non-torch growth
  (vllm/v1/worker/gpu_worker.py@35d5cda, Worker.determine_available_memory; vllm/utils/mem_utils.py
  memory_profiling). Builds >= v0.21 also subtract a CUDA-graph estimate (V1 runner only; its derivable floor,
  roofline/engines/vllm_profile.py, which also gives the profile run's peak for `roofline capacity`).
- gpu_memory_utilization's default: 0.92 from release 0.20 (vllm/config/cache.py of the 0.20.0 .. 0.24.0 sdists:
  `Field(default=0.92, gt=0, le=1)`; LLM's own signature the same, entrypoints/llm.py:195 of 0.24.0), 0.90 up to
  0.19.1 (the 0.17.1 .. 0.19.1 sdists); default_utilization. Run 20's server (0.24.0, no flag) logged 744,656 tokens
  for Qwen3-30B-A3B, which 0.92 gives and 0.90 does not (714,352).
- page: 2 x max(1, H_kv / tp) x head_dim x dtype bytes per token per layer (vllm/v1/kv_cache_interface.py@001cabc,
  AttentionSpec.real_page_size_bytes; ModelConfig.get_num_kv_heads replicates KV heads when tp > H_kv).
  MLA: one latent of kv_lora_rank + qk_rope_head_dim (576) per token, no factor 2, replicated on every TP
  rank (MLAAttentionSpec; get_num_kv_heads returns 1 for MLA). DeepSeek-V3.2: kv_cache_dtype auto/fp8 is
  rewritten to fp8_ds_mla, 656 bytes per token per layer (DeepseekV32ForCausalLM.verify_and_update_config,
  MLAAttentionSpec.real_page_size_bytes), plus the indexer's 132 B (index_head_dim fp8 + 4 B scale per 128;
  inferred from SGLang's NSA pool, vLLM's indexer spec was not read).
- block size: default 16 (vllm/config/cache.py@002f10e DEFAULT_BLOCK_SIZE); allowed 1, 8, 16, 32, 64, 128, 256
  (BlockSize literal of v0.10-0.19); MLA backends force 64 (FlashMLA / sparse MLA, platforms/cuda.py@002db49
  check_and_update_config; CUTLASS MLA on Blackwell uses 128: pass --block-size 128).
- blocks: num_blocks = floor(avail / (page x layers)) for one group (kv_cache_utils.py get_num_blocks); layers
  of different sizes and one type: avail // sum of pages (UniformTypeKVCacheSpecs); hybrids
  (_get_kv_cache_groups_uniform_page_size): equal-size groups of group_size layers (the fewest layers of a
  kind, or the most if max < 1.5 min), padded; num_blocks = avail // (page x group_size).
- log: "GPU KV cache size" = num_blocks // groups x block_size (_report_kv_cache_config, v0.10-v0.19);
  "Maximum concurrency" = num_blocks / ceil(sum over groups of max_memory_usage_bytes / page), full:
  cdiv(max_model_len, block); sliding: cdiv(min(W - 1 + max_num_batched_tokens, L), block) + 1; chunked:
  cdiv(min(C + max_num_batched_tokens, L), block); mamba: 1 block (kv_cache_interface.py max_memory_usage_bytes).
  2026 builds log int(concurrency x max_model_len) instead (reported as tokens_at_max_concurrency).
- Mamba / Gated DeltaNet hybrids: attention block = 16 x ceil(mamba_page / (16 x attention page per token)),
  the mamba page padded to the attention page (models/config.py@0144dd5,
  HybridAttentionMambaModelConfig.verify_and_update_config); state dtype = model dtype ('auto').
- tp / pp: every rank holds its share; the logged count is the minimum over ranks (get_kv_cache_configs); the
  fullest pipeline stage is the first.
"""

from __future__ import annotations

from roofline.accounting import indexer_bytes_per_token_layer
from roofline.engines.base import (
    BudgetParts,
    Capacity,
    EngineOptions,
    check_heads,
    check_model_len,
    kv_heads_per_rank,
    largest_fitting,
    model_dtype_bytes,
    refuse,
    release_tuple,
    stage_kinds,
    state_bytes_per_rank,
)
from roofline.specs import Model
from roofline.units import ceildiv

KV_DTYPES = {"auto": None, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_ds_mla": 1}
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
DEFAULT_BLOCK = 16
MLA_BLOCK = 64
DEFAULT_UTILIZATION = 0.92  # the current release's (module docstring); UTILIZATION_RELEASE's predecessors 0.90
UTILIZATION_RELEASE = (0, 20)  # the first vLLM release whose gpu_memory_utilization defaults to 0.92
DEFAULT_BATCHED_TOKENS = 8192
DS_MLA_BYTES = 656  # fp8 latent (512) + 4 fp32 scales (16) + bf16 rope (64 x 2)
SRC = "vllm/v1/core/kv_cache_utils.py@001cabc"


def default_utilization(release: str | None = None) -> float:
    """vLLM's gpu_memory_utilization when the flag is not given, for a `release` ('0.11.0'; None: unknown, taken as
    current): 0.92 from UTILIZATION_RELEASE on, 0.90 before (module docstring)."""
    if release is None or release_tuple(release) >= UTILIZATION_RELEASE:
        return DEFAULT_UTILIZATION
    return 0.90


def budget(parts: BudgetParts, opts: EngineOptions) -> float:
    """total x gpu_memory_utilization - weights - profiled activations - non-torch growth - the CUDA-graph
    estimate (parts.cudagraph; gpu_worker.py:489-493 subtracts it under VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
    The CUDA context is not subtracted: the worker takes its memory snapshot after CUDA and NCCL are initialised,
    requests total x utilization, and counts only the non-torch memory that grows after that snapshot (vllm 0.24.0
    v1/worker/gpu_worker.py init_device and determine_available_memory, v1/worker/utils.py request_memory,
    utils/mem_utils.py memory_profiling: non_torch_increase = after_profile - before_create)."""
    util = opts.gpu_memory_utilization or DEFAULT_UTILIZATION
    return (parts.total * util - parts.weights - parts.activations - (parts.non_torch - parts.context)
            - parts.cudagraph)


def _token_bytes(model: Model, opts: EngineOptions, rules: list[str]) -> float:
    """Bytes per token per attention layer on one rank, by vLLM's KV specs."""
    dtype = opts.kv_cache_dtype
    if dtype not in KV_DTYPES:
        raise refuse("--kv-cache-dtype", f"vLLM has no KV dtype {dtype!r}; valid: {', '.join(KV_DTYPES)}")
    dsa = model.sparse_attention is not None
    if dsa and model.sparse_attention.indexer_layers is not None:
        raise refuse("--engine", "vllm: layers reusing another layer's top-k (indexer_layers; deepseek_v2.py's "
                                 "index_topk_freq) were not read in its indexer cache layout; not modelled")
    if dtype == "fp8_ds_mla" and not dsa:
        raise refuse("--kv-cache-dtype", "fp8_ds_mla is vLLM's DeepSeek-V3.2 sparse-MLA format; "
                                         f"{model.name} has no DSA indexer")
    b = KV_DTYPES[dtype] or model_dtype_bytes()
    if model.mla is None:
        heads = kv_heads_per_rank(model, opts.tp)
        rules.append(f"vllm: page per token = 2 x {heads} KV heads/rank x {model.head_dim} x {b} B "
                     "(kv_cache_interface.py@001cabc AttentionSpec; heads replicated when tp > H_kv)")
        return 2 * heads * model.head_dim * b
    width = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
    if dsa and dtype in ("auto", "fp8", "fp8_e4m3", "fp8_ds_mla"):
        index = indexer_bytes_per_token_layer(model)
        rules.append(f"vllm: DeepSeek-V3.2 KV dtype -> fp8_ds_mla, {DS_MLA_BYTES} B/token/layer + indexer "
                     f"{index} B (DeepseekV32ForCausalLM.verify_and_update_config; MLAAttentionSpec)")
        return DS_MLA_BYTES + index
    rules.append(f"vllm: MLA latent {width} x {b} B per token per layer, replicated on every TP rank "
                 "(MLAAttentionSpec; get_num_kv_heads = 1 for MLA)")
    return width * b + (indexer_bytes_per_token_layer(model) if dsa else 0)


def _block_size(model: Model, opts: EngineOptions, rules: list[str]) -> int:
    block = opts.block_size or DEFAULT_BLOCK
    if block not in BLOCK_SIZES:
        raise refuse("--block-size", f"vLLM accepts {', '.join(map(str, BLOCK_SIZES))} (config/cache.py BlockSize)")
    if model.mla is not None and block % MLA_BLOCK:
        rules.append(f"vllm: MLA backend forces block size {MLA_BLOCK} (platforms/cuda.py@002db49 "
                     "check_and_update_config: FlashMLA / sparse MLA)")
        return MLA_BLOCK
    return block


def _group_size(counts: dict) -> int:
    """_get_kv_cache_groups_uniform_page_size: the fewest layers of a kind, or the most if max < 1.5 min."""
    lo, hi = min(counts.values()), max(counts.values())
    return hi if hi < 1.5 * lo else lo


# architectures whose model class implements SupportsMambaPrefixCaching in vLLM 0.24.0 (models/falcon_h1.py,
# granitemoehybrid.py, jamba.py, mamba.py, mamba2.py, nemotron_h.py, zamba2.py): prefix caching on gives them
# mamba_cache_mode 'all'; every other hybrid (Qwen3-Next / Qwen3.5 Gated DeltaNet, ...) gets 'align'
MAMBA_ALL = ("FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "JambaForCausalLM", "MambaForCausalLM",
             "Mamba2ForCausalLM", "NemotronHForCausalLM", "Zamba2ForCausalLM")
MAMBA_MODES = ("none", "align", "all")


def mamba_cache_mode(model: Model, opts: EngineOptions, rules: list[str], notes: list[str]) -> str:
    """vLLM 0.24.0's mamba_cache_mode (model_executor/models/config.py MambaModelConfig.verify_and_update_config):
    'none' without prefix caching — hybrids leave it off by default (config/model.py is_prefix_caching_supported:
    attn_type 'hybrid' -> False), an explicit mode then reset to 'none' with a warning; with
    --enable-prefix-caching, 'all' for the architectures of MAMBA_ALL, else 'align'; an explicit --mamba-cache-mode
    stands ('all' falls back to 'align' where unsupported, with a warning). vLLM's warnings land in `notes`."""
    asked = mode = opts.mamba_cache_mode
    if mode is not None and mode not in MAMBA_MODES:
        raise refuse("--mamba-cache-mode", f"vLLM accepts {', '.join(MAMBA_MODES)} (config/cache.py MambaCacheMode)")
    if not opts.enable_prefix_caching:
        if asked not in (None, "none"):
            notes.append(f"--mamba-cache-mode {asked}: no effect without --enable-prefix-caching (vLLM sets it to "
                         "'none' and warns: models/config.py MambaModelConfig)")
        return "none"
    supports_all = model.architecture in MAMBA_ALL
    mode = mode if mode not in (None, "none") else ("all" if supports_all else "align")
    if mode == "all" and not supports_all:
        mode = "align"
        if asked == "all":
            notes.append(f"--mamba-cache-mode all: vLLM falls back to 'align' ({model.architecture} does not "
                         "support mamba prefix caching in 'all' mode: models/config.py MambaModelConfig)")
    rules.append(f"vllm: prefix caching on a hybrid sets mamba_cache_mode '{mode}' (models/config.py MambaModelConfig"
                 "; v0.24.0): a request holds " + ("cdiv(max_model_len, block) mamba blocks" if mode == "all"
                                                   else "2 mamba blocks"))
    return mode


def _blocks_for(kind: str, window: int | None, length: int, block: int, batched: int, mamba: str = "none") -> int:
    """Blocks one request of `length` tokens holds in one group (KVCacheSpec.max_memory_usage_bytes; MambaSpec:
    mamba_cache_mode 'all' cdiv(L, mamba block = block), 'align' 2, 'none' 1)."""
    if kind == "full":
        return ceildiv(length, block)
    if kind == "sliding":
        return ceildiv(min(window - 1 + batched, length), block) + 1
    if kind == "chunked":
        return ceildiv(min(window + batched, length), block)
    return {"all": ceildiv(length, block), "align": 2}.get(mamba, 1)


def _held_blocks(kind: str, window: int | None, length: int, block: int, mamba: str = "none") -> int:
    """Blocks a running request of `length` tokens holds in one group once its prompt is in (decode): remove_skipped
    _blocks frees what lies before the window (sliding: num_computed - W + 1 tokens skipped) or before the current
    chunk (chunked) before each allocation (vllm/v1/core/single_type_kv_cache_manager.py, v0.24.0,
    SlidingWindowManager / ChunkedLocalAttentionManager.get_num_skipped_tokens)."""
    if kind in ("sliding", "chunked"):
        skipped = length - window if kind == "sliding" else (length - 1) // window * window
        return ceildiv(length, block) - max(skipped, 0) // block
    return _blocks_for(kind, window, length, block, 0, mamba)


def _admit_blocks(kind: str, window: int | None, length: int, block: int, batched: int, mamba: str = "none") -> int:
    """Free blocks one group must hold to admit a request of `length` prompt tokens: its whole prompt, each
    sliding / chunked group capped at the admission cap the start-up sizer uses (kv_cache_manager.py allocate_slots
    with full_sequence_must_fit = scheduler_reserve_full_isl, default True; apply_admission_cap)."""
    if kind in ("sliding", "chunked"):
        return min(ceildiv(length, block), _blocks_for(kind, window, length, block, batched))
    return _blocks_for(kind, window, length, block, batched, mamba)


def sequences_at_once(num_blocks: int, admit: int, held: int) -> int:
    """Requests of one length vLLM runs at once: the last one is admitted when `admit` blocks are free beside the
    `held` blocks each running one holds; floor(num_blocks / per-request blocks) when the two are equal (no
    window)."""
    return 0 if admit > num_blocks else (num_blocks - admit) // held + 1


def capacity(model: Model, opts: EngineOptions, avail: float, rules: list[str]) -> Capacity:
    """vLLM's pool for `avail` bytes per rank: blocks, the two log lines, the longest request that fits."""
    check_heads(model, opts.tp, "vLLM")
    check_model_len(model, opts, "vLLM", "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "config/model.py _get_and_verify_max_len")
    token_bytes = _token_bytes(model, opts, rules)
    block = _block_size(model, opts, rules)
    kinds = stage_kinds(model, opts.pp)
    notes: list[str] = []
    mamba_mode = mamba_cache_mode(model, opts, rules, notes) if ("state", None) in kinds else "none"
    if opts.mamba_cache_mode is not None and ("state", None) not in stage_kinds(model, 1):
        # vLLM takes the flag for any model and reads it only for mamba / hybrid ones (MambaModelConfig)
        notes.append(f"--mamba-cache-mode {opts.mamba_cache_mode}: no effect, {model.name} has no mamba or "
                     "linear-attention state layers (vLLM accepts the flag and reads it only for those)")
    if ("state", None) in kinds:
        mamba = state_bytes_per_rank(model, opts.tp, model_dtype_bytes())
        la = model.linear_attention
        if la is not None and la.kind in ("rwkv4", "mlstm"):
            raise refuse("--engine", f"vllm: runs no {la.kind} model (no RWKV or xLSTM architecture in "
                                     "vllm/model_executor/models/registry.py@0002bff); --engine ideal counts its "
                                     "state")
        if not any(k != "state" for k, _ in kinds):
            raise refuse("--engine", "vllm: a model without attention layers (pure Mamba) is not modelled")
        need = 16 * ceildiv(int(mamba), 16 * int(token_bytes))
        if block < need:
            rules.append(f"vllm: attention block raised to {need} tokens so its page >= the mamba page of "
                         f"{mamba:,.0f} B (models/config.py@0144dd5 HybridAttentionMambaModelConfig)")
            block = need
    page = block * token_bytes
    size = _group_size(kinds)
    groups = {key: ceildiv(n, size) for key, n in kinds.items()}
    n_groups = sum(groups.values())
    padding = n_groups * size - sum(kinds.values())
    if len(kinds) > 1:
        rules.append(f"vllm: {n_groups} KV groups of {size} layers ({padding} padding layers) sharing one block "
                     f"pool ({SRC} _get_kv_cache_groups_uniform_page_size)")
    num_blocks = int(max(avail, 0) // (page * size))
    batched = opts.max_num_batched_tokens or DEFAULT_BATCHED_TOKENS
    length = opts.model_len(model)
    if opts.max_model_len is None and model.longrope_original_positions is not None:
        length = model.longrope_original_positions
        rules.append(f"vllm: max_model_len defaults to LongRoPE's original_max_position_embeddings {length:,}, not "
                     f"the {model.max_position_embeddings:,} positions (config/model.py _get_and_verify_max_len); "
                     "--max-model-len sets it")

    def per_request(n: int) -> int:
        return sum(g * _blocks_for(kind, window, n, block, batched, mamba_mode) for (kind, window), g in groups.items())

    concurrency = num_blocks / per_request(length)
    held = sum(g * _held_blocks(kind, window, length, block, mamba_mode) for (kind, window), g in groups.items())
    admit = sum(g * _admit_blocks(kind, window, length, block, batched, mamba_mode)
                for (kind, window), g in groups.items())
    at_once = sequences_at_once(num_blocks, admit, held)
    if held != admit:
        rules.append(f"vllm: runs {at_once:,} requests of {length:,} tokens at once: a running one holds {held:,} "
                     f"blocks (the window of each sliding group), the last is admitted with {admit:,} free (its "
                     f"prompt, each sliding group capped at window + {batched:,}); the logged 'Maximum concurrency' "
                     "counts every request at that cap (vllm/v1/core/kv_cache_manager.py allocate_slots, "
                     "full_sequence_must_fit; single_type_kv_cache_manager.py remove_skipped_blocks, v0.24.0)")
    rules.append(f"vllm: num_blocks = floor(avail / (block {block} x page x {size} layers)); logged tokens = "
                 f"num_blocks // {n_groups} groups x block ({SRC} get_num_blocks, _report_kv_cache_config)")
    longest = largest_fitting(lambda n: per_request(n) * page * size <= avail)
    attention_layers = sum(n for (kind, _), n in kinds.items() if kind == "full")
    return Capacity(
        engine="vllm", bytes_per_token=token_bytes * attention_layers, kv_pool_bytes=avail,
        pool_tokens=num_blocks // n_groups * block, max_concurrency=concurrency * opts.dp,
        fits=per_request(length) <= num_blocks, max_model_len_that_fits=longest, rules=rules,
        details={"block_size": block, "num_blocks": num_blocks, "kv_groups": n_groups,
                 "tokens_at_max_concurrency": int(concurrency * length), "max_model_len": length,
                 "sequences_at_once": at_once * opts.dp,
                 "kv_bytes_for_max_model_len": per_request(length) * page * size} | ({"notes": notes} if notes else {}))
