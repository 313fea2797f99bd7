"""llama-quantize's file types (Q4_K_M, Q8_0, ...): the ggml type each tensor of a GGUF gets, and its exact bytes.

Rules read from llama.cpp at commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36's sdist),
src/llama-quant.cpp:
- tensor_allows_quantization: only tensors of >= 2 dims whose name ends in `weight`, not `_norm.weight`, not
  `ffn_gate_inp` (the router); the others keep the source type (conversion/base.py writes 1-D tensors, norms and the
  router in F32).
- llama_ftype_get_default_type: the preset's base type (Q4_K_M, Q4_K_S -> q4_K; Q3_K_* -> q3_K; Q5_K_* -> q5_K ...).
- llama_tensor_get_type_impl, by tensor_get_category (a name match): output.weight (and token_embd when the model has
  no output.weight) -> q6_K unless the base is q8_0 (kept), q8_0 when the row is not a multiple of the base's block;
  attn_v / attn_qkv: Q2_K -> q4_K at n_gqa >= 4 else q3_K, Q3_K_M -> q5_K for the first two else q4_K, Q3_K_L -> q5_K,
  Q4_K_M / Q5_K_M -> q6_K where use_more_bits(i, n), Q4_K_S -> q5_K for the first four; a 70B (LLM_TYPE_70B) lifts
  q3_K / q4_K to q5_K; 8 experts -> q8_0. attn_k: 8 experts -> q8_0. ffn_down: Q2_K -> q3_K, Q3_K_M -> q5_K below
  n/16 else q4_K, Q3_K_L -> q5_K, Q4_K_M / Q5_K_M -> q6_K where use_more_bits, Q4_K_S -> q5_K below n/8. attn_output:
  Q2_K -> q3_K, Q3_K_M -> q4_K, Q3_K_L -> q5_K (8 experts: q5_K for the K presets below Q5). A fused attn_qkv is
  attn_v-like (category_is_attn_v): the attn_v rules apply, and the attn_qkv branch after them is never reached.
  use_more_bits(i, n) = i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2; i counts the attn_v tensors in file order, and
  ffn_down's i is the layer (blk.N, MoE) or the count of ffn_down tensors so far (dense): for layers of one shape the
  total bytes do not depend on the order.
- tensor_type_fallback: a row (ne0) not a multiple of the chosen type's block: q2_K / q3_K -> q4_0, q4_K -> q5_0,
  q5_K -> q5_1, q6_K -> q8_0, and f16 when that still does not divide.
No imatrix (the Q4_0 / Q5_0 ffn_down guard applies only with one) and no --pure, --output-tensor-type,
--token-embedding-type or --tensor-type overrides.

llama.cpp loads the token embedding into host memory whatever -ngl says (a lookup); a model without output.weight
(tied) loads token_embd a second time as the output, on the GPU (TENSOR_DUPLICATED, src/models/llama.cpp).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from roofline.errors import SpecError
from roofline.ggml_types import block, tensor_bytes

# llama-quantize's presets (tools/quantize/quantize.cpp QUANT_OPTIONS names) -> the base type
# (llama_ftype_get_default_type); the i-quants need an importance matrix and are not offered
PRESETS: dict[str, str] = {
    "F16": "f16", "BF16": "bf16", "Q8_0": "q8_0", "Q6_K": "q6_K", "Q5_K_M": "q5_K", "Q5_K_S": "q5_K",
    "Q5_1": "q5_1", "Q5_0": "q5_0", "Q4_K_M": "q4_K", "Q4_K_S": "q4_K", "Q4_1": "q4_1", "Q4_0": "q4_0",
    "Q3_K_L": "q3_K", "Q3_K_M": "q3_K", "Q3_K_S": "q3_K", "Q2_K": "q2_K",
}
PREFIX = "gguf:"
WEIGHT_DTYPES = tuple(PREFIX + p for p in PRESETS)
FALLBACK = {"q2_K": "q4_0", "q3_K": "q4_0", "q4_K": "q5_0", "q5_K": "q5_1", "q6_K": "q8_0"}
# Hugging Face architectures llama.cpp converts to arch llama (80 layers with GQA: LLM_TYPE_70B, src/models/llama.cpp)
# or qwen2 (80 layers: 70B, src/models/qwen2.cpp); phi3 fuses q, k, v into attn_qkv and gate, up into ffn_up
LLAMA_ARCHS = ("LlamaForCausalLM", "MistralForCausalLM")
FUSED_QKV_ARCHS = ("Phi3ForCausalLM",)
RULE = (f"GGUF presets: {', '.join(WEIGHT_DTYPES)} (llama-quantize's file types; --engine llamacpp, or ideal)")


def preset_of(weight_dtype: str) -> str | None:
    """The llama-quantize preset a weight dtype names (`gguf:Q4_K_M` -> Q4_K_M), None for the planner's own dtypes;
    SpecError naming the presets for an unknown `gguf:` name."""
    if not weight_dtype.startswith(PREFIX):
        return None
    preset = weight_dtype[len(PREFIX):]
    if preset not in PRESETS:
        raise SpecError(f"weight dtype {weight_dtype!r}: unknown; {RULE}")
    return preset


@dataclass(frozen=True)
class Tensor:
    """One GGUF tensor: its name, shape in ggml's order (ne0 the row) and ggml type."""

    name: str
    shape: tuple[int, ...]
    type: str

    @property
    def bytes(self) -> int:
        """Exact bytes (ggml_nbytes of a contiguous tensor)."""
        return tensor_bytes(self.type, self.shape)

    @property
    def layer(self) -> int | None:
        """The block index of `blk.N.*`, None for the model-level tensors."""
        return int(self.name.split(".")[1]) if self.name.startswith("blk.") else None


def check_supported(model) -> None:
    """SpecError unless llama.cpp's GGUF tensors of `model` are modelled here: decoder-only attention (full or
    sliding) of one head width, a gated or plain MLP or 3-D experts, no MLA / linear / indexer / towers."""
    why = ("MLA" if model.mla is not None else "linear-attention layers" if model.linear_attention is not None
           else "an indexer" if model.sparse_attention is not None else "vision / audio towers" if model.encoders
           else "layers of different head widths" if not model.uniform_head_dim
           else "attention convs" if model.attention_convs is not None
           else "an attention output gate" if model.attn_output_gate or model.attn_head_gate
           else "layers without attention or MLP" if model.mlp_layers and "none" in model.mlp_layers
           else "no MLP" if model.mlp == "none" else None)
    if why:
        raise SpecError(f"--weight-dtype gguf:*: {model.name} has {why}; its GGUF tensors are not modelled "
                        "(dense or MoE decoders of one head width only)")


def _layer_shapes(model, i: int) -> list[tuple[str, tuple[int, ...]]]:
    """Block i's tensors in the order convert writes them (llama.cpp names, ggml shapes)."""
    d, q, kv, b = model.hidden_size, model.q_dim, model.kv_dim, f"blk.{i}."
    out = [(b + "attn_norm.weight", (d,))]
    if model.architecture in FUSED_QKV_ARCHS:
        out.append((b + "attn_qkv.weight", (d, q + 2 * kv)))
    else:
        out += [(b + "attn_q.weight", (d, q)), (b + "attn_k.weight", (d, kv)), (b + "attn_v.weight", (d, kv))]
    if model.qkv_bias:
        out += [(b + "attn_q.bias", (q,)), (b + "attn_k.bias", (kv,)), (b + "attn_v.bias", (kv,))]
    if model.qk_norm and model.qk_norm_width != "weightless":
        width = model.head_dim if model.qk_norm_width == "head" else None
        out += [(b + "attn_q_norm.weight", (width or q,)), (b + "attn_k_norm.weight", (width or kv,))]
    out += [(b + "attn_output.weight", (q, d))]
    out += [(b + f"post_norm_{k}.weight", (d,)) for k in range(model.norms_per_layer - 2)]
    out.append((b + "ffn_norm.weight", (d,)))
    return out + _mlp_shapes(model, i, b)


def _mlp_shapes(model, i: int, b: str) -> list[tuple[str, tuple[int, ...]]]:
    d, gated = model.hidden_size, model.mlp == "gated"
    if model.layer_mlp(i) != "moe":
        inter = model.intermediate_size
        if model.architecture in FUSED_QKV_ARCHS:  # phi3: gate and up in one ffn_up [d, 2 I]
            return [(b + "ffn_up.weight", (d, 2 * inter)), (b + "ffn_down.weight", (inter, d))]
        up = [(b + "ffn_gate.weight", (d, inter))] if gated else []
        return [*up, (b + "ffn_up.weight", (d, inter)), (b + "ffn_down.weight", (inter, d))]
    moe = model.moe
    e, inter = moe.num_experts, moe.expert_intermediate_size
    out = [(b + "ffn_gate_inp.weight", (d, e))]
    out += [(b + "ffn_gate_exps.weight", (d, inter, e))] if gated else []
    out += [(b + "ffn_up_exps.weight", (d, inter, e)), (b + "ffn_down_exps.weight", (inter, d, e))]
    if moe.num_shared_experts:
        shared = (moe.shared_expert_intermediate_size or inter) * moe.num_shared_experts
        out += [(b + "ffn_gate_shexp.weight", (d, shared))] if gated else []
        out += [(b + "ffn_up_shexp.weight", (d, shared)), (b + "ffn_down_shexp.weight", (shared, d))]
        if moe.shared_expert_gate:
            out.append((b + "ffn_gate_inp_shexp.weight", (d,)))
    return out


def gguf_shapes(model) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor of `model`'s GGUF: token_embd, the blocks in order, output_norm and output (untied)."""
    check_supported(model)
    stored = model.stored()
    out = [("token_embd.weight", (model.hidden_size, model.vocab_size))]
    for i in range(stored.num_layers):
        out += _layer_shapes(stored, i)
    out.append(("output_norm.weight", (model.hidden_size,)))
    if not model.tie_word_embeddings:
        out.append(("output.weight", (model.hidden_size, model.vocab_size)))
    return out


def _category(name: str) -> str:
    """tensor_get_category: the first match in its order."""
    if name in ("output.weight", "token_embd.weight"):
        return name.split(".")[0]
    for key in ("attn_qkv.weight", "attn_kv_b.weight", "attn_v.weight", "attn_k.weight", "attn_q.weight",
                "attn_output.weight", "ffn_up", "ffn_gate", "ffn_down"):
        if key in name:
            return "attn_v" if key in ("attn_qkv.weight", "attn_kv_b.weight") else key.split(".")[0]
    return "other"


def _quantizable(name: str, shape: tuple[int, ...]) -> bool:
    """tensor_allows_quantization for the tensors gguf_shapes writes."""
    return (len(shape) >= 2 and name.endswith("weight") and "_norm.weight" not in name
            and "ffn_gate_inp.weight" not in name)


def use_more_bits(i: int, n: int) -> bool:
    """llama-quant.cpp's use_more_bits (C++ integer division; i - n/8 >= 0 where it is reached)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


@dataclass
class _State:
    """quantize_state_impl's counters and what the rules read of the model."""

    n_attention_wv: int
    n_layer: int
    n_expert: int
    n_gqa: int
    is_70b: bool
    tied: bool
    i_attention_wv: int = 0
    i_ffn_down: int = 0


def _attn_v(preset: str, t: str, s: _State) -> str:
    i, n = s.i_attention_wv, s.n_attention_wv
    s.i_attention_wv += 1
    if preset == "Q2_K":
        t = "q4_K" if s.n_gqa >= 4 else "q3_K"
    elif preset == "Q3_K_M":
        t = "q5_K" if i < 2 else "q4_K"
    elif preset == "Q3_K_L":
        t = "q5_K"
    elif preset in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, n):
        t = "q6_K"
    elif preset == "Q4_K_S" and i < 4:
        t = "q5_K"
    if s.is_70b and t in ("q3_K", "q4_K"):
        t = "q5_K"
    return "q8_0" if s.n_expert == 8 else t


def _ffn_down(preset: str, t: str, s: _State, layer: int) -> str:
    i = layer if s.n_expert > 1 else s.i_ffn_down
    n = s.n_layer
    s.i_ffn_down += 1
    if preset == "Q2_K":
        return "q3_K"
    if preset == "Q3_K_M":
        return "q5_K" if i < n // 16 else "q4_K"
    if preset == "Q3_K_L":
        return "q5_K"
    if preset in ("Q4_K_M", "Q5_K_M") and use_more_bits(i, n):
        return "q6_K"
    if preset == "Q4_K_S" and i < n // 8:
        return "q5_K"
    return t


ATTN_OUTPUT_8_EXPERTS = ("Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M")


def _chosen(preset: str, name: str, shape: tuple[int, ...], s: _State, layer: int) -> str:
    """llama_tensor_get_type_impl for one quantizable tensor (module docstring), before the fallback."""
    t, cat = PRESETS[preset], _category(name)
    if cat == "output" or (cat == "token_embd" and s.tied):
        return "q8_0" if shape[0] % block(t)[0] else t if t == "q8_0" else "q6_K"
    if cat == "attn_v":
        return _attn_v(preset, t, s)
    if cat == "attn_k" and s.n_expert == 8:
        return "q8_0"
    if cat == "ffn_down":
        return _ffn_down(preset, t, s, layer)
    if cat == "attn_output":
        if s.n_expert == 8:
            return "q5_K" if preset in ATTN_OUTPUT_8_EXPERTS else t
        return {"Q2_K": "q3_K", "Q3_K_M": "q4_K", "Q3_K_L": "q5_K"}.get(preset, t)
    return t


def _fallback(t: str, ne0: int) -> str:
    """tensor_type_fallback: a row not a multiple of the block."""
    if ne0 % block(t)[0] == 0:
        return t
    t = FALLBACK.get(t, t)
    return t if ne0 % block(t)[0] == 0 else "f16"


def quantized_tensors(model, preset: str) -> list[Tensor]:
    """Every tensor of `model`'s GGUF after `llama-quantize <F16 GGUF> <out> <preset>` with its type (module
    docstring); the source: 2-D weights F16, 1-D tensors and the router F32 (conversion/base.py)."""
    if preset not in PRESETS:
        raise SpecError(f"GGUF preset {preset!r}: unknown; {RULE}")
    shapes = gguf_shapes(model)
    stored = model.stored()
    n_expert = stored.moe.num_experts if stored.moe is not None else 0
    is_70b = stored.num_layers == 80 and (
        (model.architecture in LLAMA_ARCHS and model.num_heads != model.num_kv_heads)
        or model.architecture == "Qwen2ForCausalLM")
    state = _State(n_attention_wv=sum(_category(n) == "attn_v" for n, _ in shapes), n_layer=stored.num_layers,
                   n_expert=n_expert, n_gqa=model.num_heads // model.num_kv_heads, is_70b=is_70b,
                   tied=model.tie_word_embeddings)
    base, out = PRESETS[preset], []
    for name, shape in shapes:
        if not _quantizable(name, shape):
            out.append(Tensor(name, shape, "f32"))
            continue
        if base in ("f16", "bf16"):  # not ggml_is_quantized: no per-tensor rules
            out.append(Tensor(name, shape, base))
            continue
        layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
        out.append(Tensor(name, shape, _fallback(_chosen(preset, name, shape, state, layer), shape[0])))
    return out


@dataclass(frozen=True)
class GgufWeights:
    """A quantized GGUF's weight bytes where llama.cpp puts them with every layer offloaded (-ngl all)."""

    preset: str
    tensors: tuple[Tensor, ...]

    @property
    def total_bytes(self) -> int:
        """Every tensor's bytes (the file's tensor data, before its alignment padding)."""
        return sum(t.bytes for t in self.tensors)

    @property
    def token_embd_bytes(self) -> int:
        """token_embd.weight, held in host memory (the start-up log's CPU_Mapped model buffer)."""
        return sum(t.bytes for t in self.tensors if t.name == "token_embd.weight")

    @property
    def gpu_bytes(self) -> int:
        """Everything but the token embedding, plus its copy as the output when the model has no output.weight."""
        tied = not any(t.name == "output.weight" for t in self.tensors)
        return self.total_bytes - (0 if tied else self.token_embd_bytes)

    def layer_bytes(self) -> list[int]:
        """Bytes of each block's tensors, block 0 first."""
        out: dict[int, int] = {}
        for t in self.tensors:
            if t.layer is not None:
                out[t.layer] = out.get(t.layer, 0) + t.bytes
        return [out[i] for i in sorted(out)]

    def bytes_of(self, *categories: str) -> tuple[int, int]:
        """(bytes, elements) of the block tensors whose category (_category) is one of `categories`."""
        picked = [t for t in self.tensors if t.layer is not None and _category(t.name) in categories]
        return sum(t.bytes for t in picked), sum(_elements(t.shape) for t in picked)

    def type_counts(self) -> dict[str, int]:
        """How many tensors of each ggml type (as llama-quantize's `llama_model_loader: - type q4_K: N tensors`)."""
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.type] = out.get(t.type, 0) + 1
        return out


def gguf_weights(model, preset: str) -> GgufWeights:
    """`model` quantized to llama-quantize's `preset` (Q4_K_M, ...): every tensor's type and bytes."""
    return GgufWeights(preset, tuple(quantized_tensors(model, preset)))


def weights_on_fullest_gpu(model, preset: str, pp: int = 1, tp: int = 1) -> int:
    """Weight bytes of `preset` on the fullest of `pp` stages, as planner.memory.weights_per_gpu counts weights:
    ceil(n / pp) blocks a stage, the token embedding on the first (llama.cpp keeps it in host memory: the planner
    sums the start-up log's model buffers over devices, `gpu_bytes` and `token_embd_bytes` apart), output_norm and
    output on the last. llama.cpp has no tensor parallelism (engines.llamacpp.refuse_tp): tp > 1 is refused."""
    if tp > 1:
        raise SpecError(f"--tp {tp}: GGUF weights are planned under llama.cpp, which has no tensor parallelism "
                        "(--pp splits its layers)")
    w = gguf_weights(model, preset)
    layers = w.layer_bytes()
    per = -(-len(layers) // pp)
    stages = [sum(layers[i:i + per]) for i in range(0, len(layers), per)]
    stages[0] += w.token_embd_bytes
    stages[-1] += sum(t.bytes for t in w.tensors if t.layer is None and t.name != "token_embd.weight")
    tied = not any(t.name == "output.weight" for t in w.tensors)
    if tied:  # the output reads token_embd's copy, loaded on the last stage (TENSOR_DUPLICATED)
        stages[-1] += w.token_embd_bytes
    return max(stages)


ATTENTION = ("attn_q", "attn_k", "attn_v", "attn_output")
MLP = ("ffn_up", "ffn_gate", "ffn_down")


def group_bytes_per_weight(model, preset: str) -> dict[str, Fraction]:
    """Bytes per weight the step's ops read, per op group of costmodel.graph: `attention` (q, k, v, output of every
    block), `mlp` (the dense blocks' ffn tensors), `moe` (the MoE blocks' ffn tensors, experts and shared), `model`
    (the output matrix, token_embd when tied): each the exact bytes over the elements of its tensors, so the
    layers' sum over a step is the file's bytes (a block's own mix of types is spread over the group's layers)."""
    w = gguf_weights(model, preset)
    out: dict[str, Fraction] = {}
    stored = model.stored()
    moe_layers = {i for i in range(stored.num_layers) if stored.layer_mlp(i) == "moe"}
    picks = {"attention": lambda t: _category(t.name) in ATTENTION,
             "mlp": lambda t: _category(t.name) in MLP and t.layer not in moe_layers,
             "moe": lambda t: _category(t.name) in MLP and t.layer in moe_layers,
             "model": lambda t: t.name == ("token_embd.weight" if model.tie_word_embeddings else "output.weight")}
    for group, pick in picks.items():
        tensors = [t for t in w.tensors if (t.layer is not None or group == "model") and pick(t)]
        elements = sum(_elements(t.shape) for t in tensors)
        if elements:
            out[group] = Fraction(sum(t.bytes for t in tensors), elements)
    return out


UNQUANTIZED = ("f32", "f16", "bf16")  # types whose GEMMs keep the 16-bit laws (group_types leaves them out)


def group_types(model, preset: str) -> dict[str, str]:
    """The ggml type each op group's GEMMs run their kernels on (group_bytes_per_weight's groups): the quantized type
    holding most of the group's bytes (Q4_K_M's attention and MLP: q4_K, its q6_K attn_v / ffn_down a minority),
    `model` the output matrix's own type; a group whose tensors stay 16- or 32-bit is left out (its GEMMs keep the
    16-bit laws)."""
    w = gguf_weights(model, preset)
    stored = model.stored()
    moe_layers = {i for i in range(stored.num_layers) if stored.layer_mlp(i) == "moe"}
    picks = {"attention": lambda t: t.layer is not None and _category(t.name) in ATTENTION,
             "mlp": lambda t: t.layer is not None and _category(t.name) in MLP and t.layer not in moe_layers,
             "moe": lambda t: t.layer is not None and _category(t.name) in MLP and t.layer in moe_layers,
             "model": lambda t: t.name == ("token_embd.weight" if model.tie_word_embeddings else "output.weight")}
    out = {}
    for group, pick in picks.items():
        by_type: dict[str, int] = {}
        for t in w.tensors:
            if pick(t):
                by_type[t.type] = by_type.get(t.type, 0) + t.bytes
        main = max(by_type, key=by_type.get) if by_type else None
        if main is not None and main not in UNQUANTIZED:
            out[group] = main
    return out


def _elements(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def weights_rule(model, preset: str) -> str:
    """One line for a result's rules: the preset's types and where llama.cpp puts the bytes."""
    w = gguf_weights(model, preset)
    types = ", ".join(f"{t} x{n}" for t, n in sorted(w.type_counts().items()))
    return (f"llamacpp: weights gguf:{preset} as llama-quantize types them ({types}; src/llama-quant.cpp): "
            f"{w.gpu_bytes:,} B on the GPU (model buffer), token_embd {w.token_embd_bytes:,} B in host memory "
            "(CPU_Mapped); the budget counts both, as the start-up log's buffers summed")
