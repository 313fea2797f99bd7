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
- compute buffers (llama_context::sched_reserve, src/llama-context.cpp at 0c1e570): the worst-case graph of
  n_tokens = min(n_ctx, n_ubatch) tokens over the full cache, with min(n_tokens, n_outputs_max) outputs, reserved
  before the one-token graph; ggml-alloc sizes each backend's buffer to its best-fit high-water mark, freeing a tensor
  at its last use (compute_buffers; derivation and logs in validate/notes/2026-11-30-llamacpp-compute-buffer.md).
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
F32 = 4
# graph inputs per token besides the mask: inp_pos (I32), k_idxs and v_idxs (I64) are copied to the GPU; the host
# holds them and inp_tokens (I32) (llama-graph.cpp build_inp_pos, llama-kv-cache.cpp build_input_k_idxs/v_idxs)
GPU_INPUT_BYTES_PER_TOKEN = 4 + 8 + 8
HOST_INPUT_BYTES_PER_TOKEN = 4 + 4 + 8 + 8
COMPUTE_SRC = ("llama-context.cpp sched_reserve, ggml-alloc best fit; validate/notes/"
               "2026-11-30-llamacpp-compute-buffer.md")


def pad256(n: int) -> int:
    """n cells rounded up to llama.cpp's 256 (GGML_PAD(n, 256))."""
    return -(-n // PAD) * PAD


def cells(n_ctx: int, opts: EngineOptions) -> tuple[int, int]:
    """(cells per stream, streams) for a context of n_ctx tokens."""
    if opts.kv_unified:
        return pad256(n_ctx), 1
    return pad256(pad256(n_ctx) // opts.parallel), opts.parallel


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
            swa = per_stream if opts.swa_full else pad256(
                min(per_stream, window * (opts.parallel if opts.kv_unified else 1) + opts.ubatch))
            out["swa_cells"] = swa * streams
            out["swa"] += n * swa * streams * _layer_bytes(model, bpe)
        else:
            la = model.linear_attention
            out["recurrent"] += n * opts.parallel * (la.state_elements + la.conv_elements) * 4
    return out


# architectures llama.cpp builds with llm_build_llama (convert_hf_to_gguf maps both to arch "llama"): the graph
# compute_buffers follows node by node
LLAMA_GRAPH = ("LlamaForCausalLM", "MistralForCausalLM")


def _rule_holds(model: Model, opts: EngineOptions) -> str | None:
    """None where compute_buffers is the graph llama.cpp builds (llm_build_llama with flash attention: the 14 H200 logs
    and the published ones of validate/notes/2026-11-30-llamacpp-compute-buffer.md), else what it does not cover."""
    if not opts.flash_attn:
        return "attention without flash attention (its n_kv x n_tokens x n_head scores)"
    if model.architecture not in LLAMA_GRAPH:
        return f"{model.architecture}'s graph (other nodes change ggml-alloc's placement; GLM-4 logs +45 MiB)"
    if model.moe is not None or any(a.kind != "full" for a in model.attention):
        return "the MoE or sliding-window layers' phase"
    return None


def compute_buffers(model: Model, opts: EngineOptions, n_ctx: int) -> dict[str, float]:
    """Bytes of llama.cpp's compute buffers at context n_ctx: 'gpu' (the fullest GPU, CUDA0 on one), 'host' (the CPU
    backend's pinned buffer, CUDA_Host) and the GPU's two phases, for n_tokens = min(n_ctx, -ub) rounded up to a
    multiple of the streams (llama_context::graph_reserve) and n_out = min(n_tokens, n_outputs_max) outputs.

    mask = n_kv x n_tokens x (2 with flash attention, F16; else 4): the KQ mask over a stream's n_kv cells
           (llama-graph.cpp build_attn_inp_kq_mask, [n_kv, n_tokens / n_stream, 1, n_stream], no padding)
    layers = mask + 3 x 4 n_tokens max(n_embd, q_dim) + 3 x 4 n_tokens n_ff + 20 n_tokens: ggml-alloc's best fit
           over one layer (the mask copy, then the residual, normed input, Q/K/V, flash-attention output, wo output;
           the normed input's and attention output's E-sized holes cannot take the FFN's gate, up and SwiGLU
           intermediates, which stack above three E-sized slots), inputs pos / k_idxs / v_idxs live throughout
    output = n_out x (vocab + n_embd) x 4: the F32 logits and the final norm after the mask is freed
    gpu = max(layers, output); host = mask + 2 x 4 n_tokens n_embd (inp_embd and the CPU's token-embedding rows:
           tok_embd stays on the CPU; PR #18550 keeps both inputs in the graph) + 24 n_tokens.
    Without flash attention the attention phase adds the F32 scores, n_kv x n_tokens x n_head x 4."""
    per_stream, _ = cells(n_ctx, opts)
    seqs = 1 if opts.kv_unified else opts.parallel
    n_tok = -(-min(n_ctx, opts.ubatch) // seqs) * seqs
    n_out = min(n_tok, opts.n_outputs_max or opts.parallel)
    ff = model.intermediate_size
    if model.moe is not None:  # the routed experts' gate / up / SwiGLU rows of n_expert_used x n_ff_exp
        ff = max(ff, model.moe.experts_per_token * model.moe.expert_intermediate_size + model.moe.shared_width)
    embd, q = n_tok * model.hidden_size * F32, n_tok * max(model.hidden_size, model.q_dim) * F32
    mask = per_stream * n_tok * (2 if opts.flash_attn else F32)
    layers = mask + 3 * q + 3 * n_tok * ff * F32 + GPU_INPUT_BYTES_PER_TOKEN * n_tok
    if not opts.flash_attn:
        scores = per_stream * n_tok * model.num_heads * F32
        layers = max(layers, mask + 3 * embd + 4 * q + scores + GPU_INPUT_BYTES_PER_TOKEN * n_tok)
    output = n_out * (model.vocab_size + model.hidden_size) * F32
    return {"gpu": float(max(layers, output)), "host": float(mask + 2 * embd + HOST_INPUT_BYTES_PER_TOKEN * n_tok),
            "layers": float(layers), "output": float(output)}


def compute_budget(model: Model, opts: EngineOptions, n_ctx: int, generic: float) -> float:
    """The GPU compute bytes the room subtracts: compute_buffers' 'gpu' where its rule holds (_rule_holds); elsewhere
    layers + output (ggml-alloc places the logits at worst above the layers' high-water mark, never higher), and never
    less than the planner's generic activation peak `generic`."""
    size = compute_buffers(model, opts, n_ctx)
    if _rule_holds(model, opts) is None:
        return size["gpu"]
    return max(size["layers"] + size["output"], generic)


def compute_rule(model: Model, opts: EngineOptions, n_ctx: int, generic: float) -> str:
    """The rules line for the compute buffers at n_ctx (MiB as llama.cpp prints them)."""
    size, miss = compute_buffers(model, opts, n_ctx), _rule_holds(model, opts)
    line = (f"llamacpp: compute buffers GPU max(mask + 3 x E + 3 x FF + inputs, n_out x (vocab + n_embd) x 4) = "
            f"{size['gpu'] / 2**20:.2f} MiB, host mask + 2 x E = {size['host'] / 2**20:.2f} MiB ({COMPUTE_SRC})")
    if miss is not None:
        line += (f"; the rule does not cover {miss}: budgeted layers + output = "
                 f"{(size['layers'] + size['output']) / 2**20:.2f} MiB, at least the generic activation peak "
                 f"{generic / 2**20:.2f} MiB")
    return line


TP_RULE = ("llama.cpp has no tensor parallelism: --split-mode layer (its default) splits the layers and their KV "
           "across GPUs, as --pp models; -sm row is not modelled")


def refuse_tp(tp: int) -> None:
    """tp > 1 refused (module docstring: llama.cpp splits layers, which pp models)."""
    if tp > 1:
        raise refuse("--tp", f"{tp} GPUs: {TP_RULE}")


def refuse_ep(ep: int) -> None:
    """ep > 1 refused: llama.cpp's GPUs split a model by --split-mode none | layer | row (common/arg.cpp), never by
    experts; each GPU of a split holds its layers' every expert, so there are no expert-parallel replicas."""
    if ep > 1:
        raise refuse("--ep", f"{ep} replicas: llama.cpp has no expert parallelism (--split-mode none | layer | row "
                             "splits the layers, every expert beside them; --pp models the layer split)")


def capacity(model: Model, opts: EngineOptions, room: float | None, rules: list[str],
             generic: float | None = None) -> Capacity:
    """The cache llama.cpp allocates for n_ctx = --max-model-len; `room`: bytes it may take at that n_ctx (None:
    unknown); `generic`: the planner's activation peak when the room subtracted compute_budget (None: a given
    budget), so that a shorter context's smaller mask leaves its cache that much more room."""
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
    details = {}
    if generic is not None:
        rules.append(compute_rule(model, opts, n_ctx, generic))
        details = {"compute_buffer_bytes": compute_budget(model, opts, n_ctx, generic),
                   "host_compute_buffer_bytes": compute_buffers(model, opts, n_ctx)["host"]}
    at_n_ctx = 0.0 if generic is None else compute_budget(model, opts, n_ctx, generic)

    def fits_in(n: int) -> bool:
        extra = 0.0 if generic is None else compute_budget(model, opts, n, generic) - at_n_ctx
        return room is None or sum(v for k, v in cache_bytes(model, opts, n).items()
                                   if k in ("base", "swa", "recurrent")) + extra <= room

    return Capacity(
        engine="llamacpp", bytes_per_token=full_layers * _layer_bytes(model, BPE[opts.kv_cache_dtype]),
        kv_pool_bytes=total, pool_tokens=size["cells"], max_concurrency=float(opts.parallel),
        fits=room is None or total <= room, max_model_len_that_fits=None if room is None else largest_fitting(fits_in),
        rules=rules, details={"swa_cells": size["swa_cells"], "k_plus_v_bytes": size["base"] + size["swa"],
                              "recurrent_bytes": size["recurrent"], "max_model_len": n_ctx, **details})


def ubatches(decode_slots, chunk_slots, chunk_tokens, n_ubatch: int) -> list[int]:
    """The ubatches (their token counts) llama_decode runs a server step in when the KV has one stream a slot (-np N
    without -kvu): llama_kv_cache::init_batch splits with split_equal(n_ubatch, sequential), src/llama-batch.cpp at
    0c1e570. The batch holds each generating slot's token, then each prompt slot's tokens, in slot order
    (tools/server update_slots); a ubatch takes, from the first unused token on, only sequences whose ids follow one
    another (sequential: seq id == the last taken + 1), and k tokens of each, k as large as every one of them still
    has and (k + 1) x sequences <= n_ubatch allows. So busy slots {0, 1, 4, 5} decode in two ubatches, a prompt whose
    slot does not follow the generating ones runs apart from them, and prompts of unequal lengths leave their tails
    to ubatches of their own. The sequence id is the slot id."""
    order = [(int(s), 1) for s in sorted(decode_slots)]
    order += sorted((int(s), int(t)) for s, t in zip(chunk_slots, chunk_tokens, strict=True) if t > 0)
    rem = [t for _, t in order]
    out: list[int] = []
    while any(rem):
        taken: list[int] = []
        last = None
        for j, (slot, _) in enumerate(order):
            if rem[j] and (last is None or slot == last + 1):
                taken.append(j)
                last = slot
        k = 0
        while all(rem[j] > k for j in taken):
            k += 1
            if (k + 1) * len(taken) > n_ubatch:
                break
        for j in taken:
            rem[j] -= k
        out.append(k * len(taken))
    return out


def lru_slot(idle_last_used: dict[int, float]) -> int:
    """The slot llama-server gives a task no slot's cached prompt matches (tools/server get_available_slot, "selected
    slot by LRU"): the idle slot used least recently, the last of equals (`<=` in slot order), so a fresh server fills
    slots n-1, n-2, ... 0. `idle_last_used`: each idle slot's last release (-1: never used)."""
    least = min(idle_last_used.values())
    return max(s for s, t in idle_last_used.items() if t == least)


def kv_view(used_cells, size: int):
    """The cells a step's attention reads from one KV stream (llama_kv_cache::get_n_kv, src/llama-kv-cache.cpp at
    0c1e570): min(size, max(256, pad256(used_max_p1))), used_max_p1 the highest used cell + 1. `used_cells` stands
    for used_max_p1 (the cells held, placed compactly: find_slot restarts its search at cell 0 once the cells below
    its head that are free outnumber twice the ubatch, so the stream stays near compact; holes make it a lower
    bound). `used_cells` a number (an int back) or a numpy array (an array back, each element's view)."""
    if hasattr(used_cells, "ndim") and used_cells.ndim:
        import numpy as np
        return np.minimum(np.maximum(pad256(used_cells), PAD), size)
    return min(int(size), max(PAD, pad256(int(used_cells))))


def fa_query_tile(gqa_ratio: int) -> int:
    """Query rows one CUDA block of ggml's MMA flash attention takes at most (fattn.cu
    ggml_cuda_flash_attn_ext_mma_f16_switch_ncols2 / _switch_ncols1 at 0c1e570): the heads sharing a K/V head are
    grouped ncols2 at a time (8, 4, 2 or 1: the largest dividing the GQA ratio), and the tile holds 64 / ncols2
    query rows. Every block reads its K/V view once, so a ubatch of T rows in one stream reads the view
    ceil(T / (64 / ncols2)) times (one block column for a decode of up to that many sequences)."""
    ncols2 = next(n for n in (8, 4, 2, 1) if gqa_ratio % n == 0)
    return 64 // ncols2
