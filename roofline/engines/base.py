"""What every engine profile shares: its options, the memory it may use, the result, and the layer
groups of the fullest pipeline stage with their per-rank sizes.

Sources of the rules: /docs/engines.md lists every rule with the engine file, commit and function it
was read from (the research notes are in the profiles' docstrings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roofline.accounting import dtype_size, state_bytes_per_layer_rank, state_heads_per_rank
from roofline.errors import SpecError
from roofline.specs import Model

GIB = 1 << 30
MAX_SEARCH_TOKENS = 1 << 34  # past this a request that still fits is reported as unbounded



def release_tuple(release: str) -> tuple[int, ...]:
    """An engine release ('0.11.0') as (major, minor), for comparing against the first release of a default; one
    line naming the rule where it is not a version."""
    try:
        return tuple(int(x) for x in release.split(".")[:2])
    except ValueError:
        raise SpecError(f"engine release: {release!r} is not a version like 0.11.0") from None

@dataclass(frozen=True)
class EngineOptions:
    """The engine flags `roofline capacity` takes; None means the engine's own default."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_batched_tokens: int | None = None
    kv_memory_bytes: float | None = None
    # vLLM: --enable-prefix-caching (hybrids default off in 0.24) and --mamba-cache-mode
    enable_prefix_caching: bool = False
    mamba_cache_mode: str | None = None
    # llama.cpp: -np (sequences), --kv-unified, --swa-full, -ub, -fa, and the outputs its context reserves (None:
    # llama-server's n_outputs_max, one per sequence; llama-batched-bench reserves n_batch)
    parallel: int = 1
    kv_unified: bool = True
    swa_full: bool = False
    ubatch: int = 512
    flash_attn: bool = True
    n_outputs_max: int | None = None

    def model_len(self, model: Model) -> int:
        """The engine's max model length: --max-model-len, else the model's max positions."""
        return self.max_model_len or model.max_position_embeddings


@dataclass(frozen=True)
class BudgetParts:
    """Bytes on the fullest GPU that an engine's budget rule combines (from the planner's estimates)."""

    total: float
    weights: float
    activations: float  # peak of a forward pass of max_num_batched_tokens tokens
    non_torch: float  # CUDA context, NCCL and cuBLAS buffers (vLLM's "non-torch" memory)
    context: float = 0.0  # the CUDA context's share of non_torch (present before an engine's first snapshot)
    cudagraph: float = 0.0  # a CUDA-graph memory estimate the engine subtracts (vLLM V1 runner: vllm_profile.py)


@dataclass
class Capacity:
    """What `roofline capacity` reports (JSON keys follow the interface contract)."""

    engine: str
    bytes_per_token: float
    kv_pool_bytes: float
    pool_tokens: int
    max_concurrency: float
    fits: bool
    max_model_len_that_fits: int | None
    rules: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The `roofline capacity --json` object (the interface contract's keys plus details)."""
        return {"engine": self.engine, "bytes_per_token": self.bytes_per_token, "kv_pool_bytes": self.kv_pool_bytes,
                "pool_tokens": self.pool_tokens, "max_concurrency": self.max_concurrency, "fits": self.fits,
                "max_model_len_that_fits": self.max_model_len_that_fits, "rules": self.rules, **self.details}


@dataclass(frozen=True)
class LayerGroup:
    """Layers of one kind on the fullest stage: `token_bytes` per cached token per layer on one rank
    (attention), `state_bytes` per sequence per layer on one rank (recurrent)."""

    kind: str  # "full", "sliding", "chunked", "state"
    layers: int
    window: int | None = None
    token_bytes: float = 0.0
    state_bytes: float = 0.0


def refuse(flag: str, rule: str) -> SpecError:
    """The error for an option the engine itself would refuse: names the flag and the rule."""
    return SpecError(f"{flag}: {rule}")


def check_model_len(model: Model, opts: EngineOptions, engine: str, override: str, source: str) -> None:
    """vLLM and SGLang refuse to start with a --max-model-len (--context-length) past the model's derived length,
    max_position_embeddings as its RoPE scaling extends it (catalogue.hf_positions), unless `override`=1 is set
    (`source`; the engines warn of wrong outputs past them). SGLang does not scale YaRN with an original length,
    so for such a config it refuses some lengths this lets pass, never the other way."""
    positions = model.max_position_embeddings
    if opts.max_model_len is not None and opts.max_model_len > positions:
        raise refuse("--max-model-len", f"{opts.max_model_len:,} is past {model.name}'s {positions:,} positions: "
                                        f"{engine} refuses it at start-up ({source}; {override}=1 overrides it, "
                                        f"warning of wrong outputs past them); give {positions} or less")


def stage_kinds(model: Model, pp: int) -> dict[tuple[str, int | None], int]:
    """(kind, window) -> layers on the first pipeline stage, the fullest: layers [0, ceil(n / pp)), less the
    Model.kv_shared_layers, which get no pages (vLLM 0.24 vllm/model_executor/models/gemma3n.py: a shared layer's
    Attention takes kv_sharing_target_layer_name and is given the target's cache; the other engines are held to
    the same rule, not checked against their source)."""
    if pp > model.num_layers:
        raise refuse("--pp", f"{pp} stages exceed the {model.num_layers} layers of {model.name}")
    counts: dict[tuple[str, int | None], int] = {}
    for i in range(-(-model.num_layers // pp)):
        a = model.layer_attention(i)
        key = ("state" if a.kind == "linear" else a.kind, a.window)
        if a.kind != "none" and i < model.num_layers - model.kv_shared_layers:
            counts[key] = counts.get(key, 0) + 1
    return counts


def kv_heads_per_rank(model: Model, tp: int) -> int:
    """KV heads one rank caches: H_kv / tp, at least 1 (replicated when tp > H_kv; vLLM
    ModelConfig.get_num_kv_heads, SGLang get_num_kv_heads, TensorRT-LLM mapping)."""
    return max(1, model.num_kv_heads // tp)


def check_heads(model: Model, tp: int, engine: str) -> None:
    """vLLM, SGLang and TensorRT-LLM shard attention heads over tp: the heads must divide (vLLM:
    'Total number of attention heads must be divisible by tensor parallel size')."""
    # the pages hold K and V only: layers differing in query heads alone (Laguna-XS) share one page layout
    if not all(a.head_dim in (None, model.head_dim) and a.num_kv_heads in (None, model.num_kv_heads)
               for a in model.attention):
        raise refuse("--engine", f"{engine}: layers of different head_dim (Gemma-4) or KV head counts (Inkling) are "
                                 "not modelled; use ideal")
    if bad := next((a.num_heads for a in model.attention if a.num_heads and a.num_heads % tp), None):
        raise refuse("--tp", f"{engine} needs tp to divide the {bad} attention heads of some layers of {model.name}")
    if model.attention_convs is not None:
        raise refuse("--engine", f"{engine}: the conv states beside attention (Inkling's Model.attention_convs) are "
                                 "not in this engine's layout (vLLM has no Inkling model); use ideal")
    if model.num_heads % tp:
        raise refuse("--tp", f"{engine} needs tp to divide the {model.num_heads} attention heads of {model.name}")
    if model.num_kv_heads > tp and model.num_kv_heads % tp and model.mla is None:
        raise refuse("--tp", f"{engine} needs tp to divide the {model.num_kv_heads} KV heads of {model.name} "
                             "(or exceed them, replicating one per rank)")
    if model.linear_attention is not None:
        try:
            state_heads_per_rank(model, tp)
        except ValueError as err:
            raise refuse("--tp", f"{engine} shards the recurrent heads over tp: {err}") from None


def state_bytes_per_rank(model: Model, tp: int, elem_bytes: float) -> float:
    """Conv + recurrent state of one recurrent layer for one sequence on one rank: value heads split over tp,
    key heads (Mamba-2 groups) split or replicated one per rank (accounting.state_bytes_per_layer_rank)."""
    if model.linear_attention is None:
        return 0.0
    return float(state_bytes_per_layer_rank(model, tp, elem_bytes))


def model_dtype_bytes() -> int:
    """'auto' KV dtype = the model's dtype; every catalogue model is bf16 (2 bytes)."""
    return int(dtype_size("bf16"))


def largest_fitting(fits, hi: int = MAX_SEARCH_TOKENS) -> int | None:
    """Largest n in [1, hi] with fits(n) (true up to some n, then false); 0 if none; None if all fit."""
    if not fits(1):
        return 0
    if fits(hi):
        return None
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo
