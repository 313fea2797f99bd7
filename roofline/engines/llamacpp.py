"""llama.cpp: the KV cache follows the context size (no memory-fraction sizing).

Rules, read from llama.cpp's source (index copies of src/llama-kv-cache.cpp, llama-context.cpp,
llama-kv-cache-iswa.cpp; upstream PR threads; research notes in docs/engines.md):
- cells: n_ctx padded to 256 (llama_context: GGML_PAD(n_ctx, 256), PR #17046, 2025-11); unified KV: one
  stream of pad256(n_ctx) cells; otherwise -np streams of pad256(n_ctx / np) each.
- bytes: per cell per layer n_embd_k_gqa x bpe(type_k) + n_embd_v_gqa x bpe(type_v), with ggml block sizes
  q8_0 34/32, q4_0 18/32, q4_1 20/32, q5_0 22/32, q5_1 24/32, iq4_nl 18/32 bytes per element, f16/bf16 2, f32 4
  (llama_kv_cache::llama_kv_cache). MLA: K only, kv_lora_rank + n_rot (576) per token, no V.
- SWA (and chunked) layers: their own cache of pad256(min(n_ctx, n_swa x (unified ? np : 1) + n_ubatch)) cells
  (llama_kv_cache_iswa); --swa-full keeps n_ctx cells. Since PR #21277 (2026-04) the SWA cache stays F16
  whatever -ctk/-ctv say.
- recurrent layers (llama_memory_recurrent): one cell per sequence, R (conv) and S (state) in f32.
- parallelism: no tensor parallelism. --split-mode is "none: use one GPU only; layer (default): split layers and KV
  across GPUs; row: split rows across GPUs" (tools/server/README.md); layer is what --pp models, row is not modelled,
  so tp > 1 is refused (refuse_tp). The server has no prefill/decode disaggregation either (one process serves both;
  the CLI refuses --disaggregate with it).
"""

from __future__ import annotations

from roofline.engines.base import Capacity, EngineOptions, largest_fitting, refuse, stage_kinds
from roofline.ggml_types import bytes_per_element
from roofline.specs import Model

# the cache types -ctk / -ctv take, at ggml's block sizes (roofline.ggml_types: one table for weights and cache)
BPE = {t: float(bytes_per_element(t)) for t in ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                                 "iq4_nl")}
PAD = 256
SRC = "src/llama-kv-cache.cpp"


def _pad(n: int) -> int:
    return -(-n // PAD) * PAD


def cells(n_ctx: int, opts: EngineOptions) -> tuple[int, int]:
    """(cells per stream, streams) for a context of n_ctx tokens."""
    if opts.kv_unified:
        return _pad(n_ctx), 1
    return _pad(_pad(n_ctx) // opts.parallel), opts.parallel


def _layer_bytes(model: Model, bpe: float) -> float:
    """Bytes per cell per attention layer (K and V; MLA: the latent as K only)."""
    if model.mla is not None:
        return (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * bpe
    return 2 * model.kv_dim * bpe


def cache_bytes(model: Model, opts: EngineOptions, n_ctx: int) -> dict[str, float]:
    """Bytes of the base cache, the SWA cache and the recurrent memory at context n_ctx."""
    bpe = BPE[opts.kv_cache_dtype]
    per_stream, streams = cells(n_ctx, opts)
    out = {"cells": per_stream * streams, "swa_cells": 0, "base": 0.0, "swa": 0.0, "recurrent": 0.0}
    for (kind, window), n in stage_kinds(model, opts.pp).items():
        if kind == "full":
            out["base"] += n * per_stream * streams * _layer_bytes(model, bpe)
        elif kind in ("sliding", "chunked"):
            swa = per_stream if opts.swa_full else _pad(
                min(per_stream, window * (opts.parallel if opts.kv_unified else 1) + opts.ubatch))
            out["swa_cells"] = swa * streams
            out["swa"] += n * swa * streams * _layer_bytes(model, bpe)
        else:
            la = model.linear_attention
            out["recurrent"] += n * opts.parallel * (la.state_elements + la.conv_elements) * 4
    return out


TP_RULE = ("llama.cpp has no tensor parallelism: --split-mode layer (its default) splits the layers and their KV "
           "across GPUs, as --pp models; -sm row is not modelled")


def refuse_tp(tp: int) -> None:
    """tp > 1 refused (module docstring: llama.cpp splits layers, which pp models)."""
    if tp > 1:
        raise refuse("--tp", f"{tp} GPUs: {TP_RULE}")


def capacity(model: Model, opts: EngineOptions, room: float | None, rules: list[str]) -> Capacity:
    """The cache llama.cpp allocates for n_ctx = --max-model-len; `room`: bytes it may take (None: unknown)."""
    if opts.kv_cache_dtype == "auto":
        opts = type(opts)(**{**opts.__dict__, "kv_cache_dtype": "f16"})
    if opts.kv_cache_dtype not in BPE:
        raise refuse("--kv-cache-dtype", f"llama.cpp cache types: {', '.join(BPE)} (-ctk/-ctv)")
    if opts.block_size is not None:
        raise refuse("--block-size", "llama.cpp has no KV blocks (cells are padded to 256)")
    refuse_tp(opts.tp)
    if model.sparse_attention is not None:
        raise refuse("--engine", "llamacpp: the DeepSeek-V3.2 indexer cache is not modelled")
    if not model.uniform_head_dim:
        raise refuse("--engine", "llamacpp: layers of different head_dim (Gemma-4) or head counts (Inkling) are not "
                                 "modelled; use ideal")
    if model.attention_convs is not None:
        raise refuse("--engine", "llamacpp: the conv states beside attention (Inkling) are not modelled; use ideal")
    n_ctx = opts.model_len(model)
    size = cache_bytes(model, opts, n_ctx)
    total = size["base"] + size["swa"] + size["recurrent"]
    rules.append(f"llamacpp: cells = pad256(n_ctx) ({'unified' if opts.kv_unified else f'{opts.parallel} streams'}), "
                 f"K,V {opts.kv_cache_dtype} at {BPE[opts.kv_cache_dtype]:g} B/element ({SRC} llama_kv_cache)")
    if size["swa_cells"]:
        rules.append(f"llamacpp: SWA cache {size['swa_cells']} cells = pad256(min(n_ctx, n_swa + n_ubatch)) "
                     "(llama-kv-cache-iswa.cpp)")
    full_layers = sum(n for (k, _), n in stage_kinds(model, opts.pp).items() if k == "full")
    fits_in = (lambda n: True) if room is None else (lambda n: sum(
        v for k, v in cache_bytes(model, opts, n).items() if k in ("base", "swa", "recurrent")) <= room)
    return Capacity(
        engine="llamacpp", bytes_per_token=full_layers * _layer_bytes(model, BPE[opts.kv_cache_dtype]),
        kv_pool_bytes=total, pool_tokens=size["cells"], max_concurrency=float(opts.parallel),
        fits=room is None or total <= room, max_model_len_that_fits=None if room is None else largest_fitting(fits_in),
        rules=rules, details={"swa_cells": size["swa_cells"], "k_plus_v_bytes": size["base"] + size["swa"],
                              "recurrent_bytes": size["recurrent"], "max_model_len": n_ctx})
