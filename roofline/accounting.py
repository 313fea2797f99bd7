"""Exact accounting from the specs: parameter counts, weight bytes, baseline KV-cache bytes.

All counts are integers; anything that depends on the workload is a sympy expression in the shared
symbols (roofline.units), e.g. KV bytes as a function of the context L.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from roofline.ggml_types import bytes_per_element
from roofline.gguf_quant import PREFIX, PRESETS
from roofline.lazy import sp
from roofline.specs import Model

# Bytes per element of the storage dtypes (fp4/int4 pack two to a byte), exact.
DTYPE_BYTES: dict[str, Fraction] = {
    "fp32": Fraction(4),
    "tf32": Fraction(4),
    "bf16": Fraction(2),
    "fp16": Fraction(2),
    "fp8": Fraction(1),
    "int8": Fraction(1),
    "int4": Fraction(1, 2),
    "fp4": Fraction(1, 2),
    # OCP MX: 32 fp4 elements share one e8m0 scale byte -> 17/32 bytes per element
    "mxfp4": Fraction(17, 32),
    # NVIDIA NVFP4: 16 fp4 elements share one fp8 scale byte -> 9/16 (the per-tensor fp32 scale is negligible)
    "nvfp4": Fraction(9, 16),
    # llama-quantize's presets at their base type (gguf:Q4_K_M -> q4_K, 144 B / 256); nominal: weights_per_gpu and
    # the step's weight reads count each tensor's own type (roofline.gguf_quant)
    **{PREFIX + preset: bytes_per_element(base) for preset, base in PRESETS.items()},
}


def dtype_size(dtype: str) -> Fraction:
    """Bytes per element of a storage dtype as an exact Fraction (no sympy: for plain arithmetic). Raises
    ValueError naming the valid dtypes if `dtype` is unknown."""
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"dtype: unknown {dtype!r}; valid: {sorted(DTYPE_BYTES)}") from None


def dtype_bytes(dtype: str) -> sp.Rational:
    """Bytes per element of a storage dtype, a sympy Rational for expressions (exact: int4/fp4 are 1/2). Raises
    ValueError naming the valid dtypes if `dtype` is unknown."""
    size = dtype_size(dtype)
    return sp.Rational(size.numerator, size.denominator)


@dataclass(frozen=True)
class ParameterCount:
    """Parameters by part; `active` counts the experts one token uses (= total for dense models)."""

    embedding: int
    lm_head: int
    attention: int
    mlp_dense: int
    mlp_experts_total: int
    mlp_experts_active: int
    router: int
    norms: int

    @property
    def total(self) -> int:
        """Every parameter stored, all experts included."""
        return (self.embedding + self.lm_head + self.attention + self.mlp_dense
                + self.mlp_experts_total + self.router + self.norms)

    @property
    def active(self) -> int:
        """Weights one token touches, the input-embedding row included (Mixtral's 12.9 B convention)."""
        return self.active_compute + self.embedding

    @property
    def active_compute(self) -> int:
        """Weights one token multiplies by: active less the input embedding, a lookup (DeepSeek's convention:
        36.6 B activated for V3, README_WEIGHTS.md)."""
        return (self.lm_head + self.attention + self.mlp_dense
                + self.mlp_experts_active + self.router + self.norms)


def attention_params_per_layer(model: Model) -> int:
    """Q, K, V, O projections (+QKV bias, +QK norms, +output gate, +per-head gate d x H); for MLA the low-rank factors
    and norms.

    MLA (DeepSeek-V3 modeling code): q_a (d x r_q) + q_a_norm (r_q) + q_b (r_q x H(d_nope + d_rope)),
    kv_a (d x (r_kv + d_rope)) + kv_a_norm (r_kv) + kv_b (r_kv x H(d_nope + d_v)) + o (H d_v x d).
    DSA adds the indexer (DeepSeek-V3.2 inference/model.py, Indexer): wq_b (r_q x H_i d_i), wk (d x d_i),
    k_norm (2 d_i, LayerNorm) and weights_proj (d x H_i). An MLA output gate (attn_output_gate: transformers
    HYV4Attention.gate_proj) is its own d x H d_v projection; with MLA.q_gate the query up-projection is
    2 r_q x H (d_nope + d_rope + d_v) (transformers AXK2Attention.q_gate_proj).
    """
    d, h = model.hidden_size, model.num_heads
    if model.mla is not None:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank is None:
            q = d * h * qk
        else:
            q_in, q_out = (2 * m.q_lora_rank, h * (qk + m.v_head_dim)) if m.q_gate else (m.q_lora_rank, h * qk)
            q = d * m.q_lora_rank + m.q_lora_rank + q_in * q_out
        kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv += m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim)
        gate = d * h * m.v_head_dim if model.attn_output_gate else 0  # HY-V4's gate_proj
        return q + kv + h * m.v_head_dim * d + gate + indexer_params(model)
    q, kv = model.q_dim, model.kv_dim
    params = d * q + 2 * d * kv + q * d
    if model.attn_output_gate:
        params += d * q
    if model.attn_head_gate:
        params += d * h
    if model.qkv_bias:
        params += q + 2 * kv
    if model.attn_out_bias:
        params += d
    if model.qk_norm and model.qk_norm_width != "weightless":
        params += q + kv if model.qk_norm_width == "full" else 2 * model.head_dim
    if model.attention_convs is not None:  # Inkling's four depthwise convs: kernel taps per channel, no bias
        params += model.attention_convs.kernel * model.attention_convs.channels(kv, d)
    return params


def kv_shared_missing_params(model: Model) -> int:
    """Parameters the kv_shared_layers do not have: their K and V projections (and biases) and the K norm
    (transformers Gemma3nTextAttention.__init__ builds k_proj, v_proj, k_norm only when not is_kv_shared_layer;
    vLLM 0.24 vllm/model_executor/models/gemma3n.py Gemma3nAttention likewise loads none for a shared layer)."""
    if not model.kv_shared_layers:
        return 0
    total = 0
    for kind, n in model.kv_shared_groups().items():
        layer = model.at_layer(kind)
        kv = layer.kv_dim
        per_layer = 2 * model.hidden_size * kv + (2 * kv if model.qkv_bias else 0)
        if model.qk_norm and model.qk_norm_width != "weightless":
            per_layer += kv if model.qk_norm_width == "full" else layer.head_dim
        total += n * per_layer
    return total


NORM_PARAMS_PER_CHANNEL = {"rms": 1, "layernorm": 2, "nonparametric": 0}


def sink_params(model: Model) -> int:
    """Learned sink logits (gpt-oss GptOssAttention.sinks): one per query head in every layer that has them."""
    return sum(n * model.num_heads for kind, n in model.attention_groups().items() if kind.sinks)


def indexer_params(model: Model) -> int:
    """DeepSeek Sparse Attention's lightning indexer (0 without DSA); see attention_params_per_layer."""
    dsa = model.sparse_attention
    if dsa is None or model.mla is None:
        return 0
    q_in = model.mla.q_lora_rank or model.hidden_size
    width = dsa.index_heads * dsa.index_head_dim
    return q_in * width + model.hidden_size * dsa.index_head_dim + 2 * dsa.index_head_dim \
        + model.hidden_size * dsa.index_heads


def linear_params_per_layer(model: Model) -> int:
    """A recurrent layer's weights (0 without linear_attention).

    Gated DeltaNet (transformers Qwen3NextGatedDeltaNet): in_proj_qkvz d x (conv_channels + H_v d_v),
    in_proj_ba d x 2 H_v, conv1d (kernel x conv_channels), dt_bias and A_log (H_v each), gated RMSNorm (d_v),
    out_proj H_v d_v x d. Mamba-2 (Mamba2Mixer): in_proj d x (conv_channels + H_v d_v + H_v) (z, xBC, dt),
    conv1d with bias, dt_bias, A_log, D (H_v each), gated RMSNorm (H_v d_v), out_proj. A short convolution
    (transformers Lfm2ShortConv, conv_bias false): in_proj d x 3 d_c, conv1d (kernel x d_c), out_proj d_c x d.
    Kimi Delta Attention (transformers KimiLinearDeltaAttention, H heads of d_h): q, k, v d x H d_h each, conv1d
    (kernel x 3 H d_h, no bias), forget gate f_a d x d_h, f_b d_h x H d_h, dt_bias H d_h, A_log H, b_proj d x H,
    output gate g_a d x d_h, g_b d_h x H d_h, gated RMSNorm (d_h), o_proj H d_h x d.
    Griffin's recurrent block (transformers RecurrentGemmaRecurrentBlock, lru_width w of H blocks): linear_x and
    linear_y d x w with biases, conv1d (kernel x w, bias), RG-LRU recurrent_param (w), input and recurrence gates
    H x (w/H)^2 with biases H x w/H, linear_out w x d with bias.
    Lightning attention (transformers MiniMaxLightningAttention): qkv_proj d x 3 H d_h, output_gate d x H d_h, RMSNorm
    (H d_h), out_proj H d_h x d.
    RWKV-4 (transformers RwkvSelfAttention, width d): key, value, receptance d x d, output d x d, time_decay and
    time_first (d), time_mix_key / value / receptance (d); with RwkvFeedForward's receptance (d x d) and its two
    time_mix vectors, the part of the channel mixing beyond the Model's plain key / value MLP.
    mLSTM (transformers xLSTMLayer, H heads): q, k d x H d_k, v and the output gate d x H d_v, the input and forget
    gates d x H with bias, the per-head LayerNorm weights (H d_v), out_proj H d_v x d (use_bias false).
    """
    la = model.linear_attention
    if la is None:
        return 0
    d, inner = model.hidden_size, la.value_heads * la.value_head_dim
    conv = la.conv_kernel * la.conv_channels
    if la.kind == "mamba1":
        return mamba1_params(d, inner, la.key_head_dim, la.dt_rank, la.conv_kernel)
    if la.kind == "kda":  # q, k, v, conv, forget gate (f_a, f_b, dt_bias, A_log), b_proj, g_a, g_b, o_norm, o_proj
        rank = la.value_head_dim
        return d * 3 * inner + conv + d * rank + rank * inner + inner + la.value_heads + d * la.value_heads \
            + d * rank + rank * inner + rank + inner * d
    if la.kind == "rglru":  # linear_x, linear_y, conv (+ bias), RG-LRU (Lambda, 2 block-diagonal gates), linear_out
        blocks = la.value_heads * la.value_head_dim * la.value_head_dim
        return 2 * (d + 1) * inner + conv + inner + inner + 2 * (blocks + inner) + (inner + 1) * d
    if la.kind == "rwkv4":  # key, value, receptance, output (d x d each), time_decay, time_first, 3 time_mix; and
        # the channel mixing's receptance (d x d) and 2 time_mix, which the Model's plain MLP (key, value) lacks
        return 4 * d * inner + 2 * inner + 3 * d + d * d + 2 * d
    if la.kind == "mlstm":  # q, k (H d_k each), v, o gate (H d_v each), i / f gates with bias, head norm, out_proj
        qk = la.key_heads * la.key_head_dim
        return d * (2 * qk + 2 * inner) + 2 * la.value_heads * (d + 1) + inner + inner * d
    if la.kind == "lightning":  # MiniMaxLightningAttention: qkv_proj, output_gate, norm, out_proj
        return d * 3 * inner + d * inner + inner + inner * d
    if la.kind == "short_conv":  # Lfm2ShortConv: in_proj d x 3 d_c (B, C, x), depthwise conv, out_proj d_c x d
        return d * 3 * inner + conv + inner * d
    if la.kind == "gated_deltanet":
        return d * (la.conv_channels + inner) + d * 2 * la.value_heads + conv + 2 * la.value_heads \
            + la.value_head_dim + inner * d
    norm = inner if la.gated_norm else 0  # Mamba-2's gated RMSNorm (absent: Falcon-H1's mamba_rms_norm false)
    return d * (la.conv_channels + inner + la.value_heads) + conv + la.conv_channels + 3 * la.value_heads \
        + norm + inner * d


def mamba1_params(d: int, inner: int, d_state: int, dt_rank: int, kernel: int) -> int:
    """Mamba-1 mixer (transformers MambaMixer): in_proj d x 2 d_inner (x, z), conv1d kernel x d_inner + bias,
    x_proj d_inner x (dt_rank + 2 d_state), dt_proj dt_rank x d_inner + bias, A_log d_inner x d_state, D d_inner,
    out_proj d_inner x d (in/out biases, off in the checkpoints, and Jamba's dt/B/C norms are left out)."""
    return d * 2 * inner + (kernel + 1) * inner + inner * (dt_rank + 2 * d_state) + (dt_rank + 1) * inner \
        + inner * d_state + inner + inner * d


def mlp_params(model: Model, intermediate: int) -> int:
    """Parameters of one MLP of width `intermediate`: 3·d·intermediate if gated (gate, up, down), 2·d·i if plain,
    0 for a model without MLPs (pure Mamba); with mlp_bias, the up (and gate) biases of width intermediate and the
    down bias of width d."""
    if model.mlp == "none":
        return 0
    matrices = 3 if model.mlp == "gated" else 2
    bias = (matrices - 1) * intermediate + model.hidden_size if model.mlp_bias else 0
    return matrices * model.hidden_size * intermediate + bias


def moe_layer_count(model: Model) -> int:
    """Layers with a mixture-of-experts MLP (Model.layer_mlp: mlp_layers' 'moe' entries, else MoE.is_moe_layer:
    after first_dense_layers, every layer_period-th), 0 for a dense model."""
    if model.moe is None:
        return 0
    return sum(model.layer_mlp(i) == "moe" for i in range(model.num_layers))


def dense_mlp_layer_count(model: Model) -> int:
    """Layers with the dense MLP (Model.layer_mlp 'dense'): every layer that is not MoE, none for a model without
    MLPs or for the MLP-less blocks of Model.mlp_layers."""
    return sum(model.layer_mlp(i) == "dense" for i in range(model.num_layers))


def parameter_count(model: Model) -> ParameterCount:
    """Exact parameter count from the architecture (no MTP / draft heads); the groups the Model's fields do not
    name (layer_extra_params per layer, model_extra_params) count with the attention weights and the embedding.
    Layers that reuse others' weights (Model.reused_layers) are not counted again (Model.stored)."""
    model = model.stored()
    d = model.hidden_size
    n_moe = moe_layer_count(model)
    n_dense = dense_mlp_layer_count(model)
    experts_total = experts_active = router = 0
    if model.moe is not None:
        moe = model.moe
        per_expert = mlp_params(model, moe.expert_intermediate_size)
        shared = mlp_params(model, moe.shared_width) if moe.num_shared_experts else 0
        experts_total = n_moe * (moe.num_experts * per_expert + shared)
        experts_active = n_moe * (moe.experts_per_token * per_expert + shared)
        router = n_moe * ((d + moe.router_bias) * moe.num_experts + d * moe.shared_expert_gate)
    embedding = model.vocab_size * d + model.position_embeddings * d + model.model_extra_params
    norm = NORM_PARAMS_PER_CHANNEL[model.norm]
    return ParameterCount(
        embedding=embedding,
        lm_head=(0 if model.tie_word_embeddings else model.vocab_size * d) + model.lm_head_bias * model.vocab_size,
        attention=_attention_weights(model) + sink_params(model)
        + model.state_layers() * linear_params_per_layer(model) + model.num_layers * model.layer_extra_params
        - kv_shared_missing_params(model),
        mlp_dense=n_dense * mlp_params(model, model.intermediate_size),
        mlp_experts_total=experts_total,
        mlp_experts_active=experts_active,
        router=router,
        norms=norm * (model.num_layers * model.norms_per_layer * d + d * model.final_norm),
    )


def routed_expert_params(model: Model) -> int:
    """Weight-matrix parameters of the routed experts over every MoE layer (shared experts, the router and the
    experts' biases excluded: a quantized checkpoint stores the matrices at the expert dtype and keeps biases at
    the model dtype, gpt-oss's mxfp4 layout): MoE layers x num_experts x the matrices of one expert's width; 0 for
    a dense model."""
    if model.moe is None or model.mlp == "none":
        return 0
    model = model.stored()
    matrices = 3 if model.mlp == "gated" else 2
    width = model.moe.expert_intermediate_size
    return moe_layer_count(model) * model.moe.num_experts * matrices * model.hidden_size * width


def _attention_weights(model: Model) -> int:
    """Attention parameters of all attending layers, each at its own head_dim (AttentionLayer.head_dim)."""
    if model.uniform_head_dim:  # less the indexers of the layers reusing another layer's top-k
        skipped = (_attention_layers(model) - model.indexer_layer_count()) * indexer_params(model)
        return _attention_layers(model) * attention_params_per_layer(model) - skipped
    return sum(n * attention_params_per_layer(model.at_layer(kind))
               for kind, n in model.attention_groups().items() if kind.attends)


def _attention_layers(model: Model) -> int:
    counts = model.layer_counts()
    return model.num_layers - counts.get("linear", 0) - counts.get("none", 0)


def weight_bytes(model: Model, dtype: str = "bf16") -> int:
    """Bytes of all weights stored in `dtype` (norms and router included at that dtype)."""
    return int(parameter_count(model).total * dtype_size(dtype))


def kv_elements_per_token_layer(model: Model) -> int:
    """Cached elements per token in one attending layer: 2·H_kv·d_h, or the MLA latent r_kv + d_rope."""
    if model.mla is not None:
        return model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
    return 2 * model.kv_dim


def indexer_bytes_per_token_layer(model: Model, dtype: str | None = None):
    """DSA indexer key cache per token per layer. key_dtype 'fp8': index_head_dim fp8 bytes + one fp32 scale per
    128 (DeepSeek-V3.2 inference/model.py: act_quant block 128; SGLang NSATokenToKVPool: 128 + 4 = 132 B; vLLM
    vllm/model_executor/models/deepseek_v2.py Indexer: DeepseekV32IndexerCache(head_dim=head_dim + head_dim //
    quant_block_size * 4, dtype=torch.uint8), whose get_kv_cache_spec is an MLAAttentionSpec of one head of that
    size). key_dtype 'model': index_head_dim elements at the cache dtype `dtype` (transformers cache_utils
    DynamicIndexedLayer.update_indexer concatenates the keys as the indexer computes them)."""
    dsa = model.sparse_attention
    if dsa is None:
        return 0
    if dsa.key_dtype == "model":
        if dtype is None:
            raise ValueError("dtype: index keys kept at the model dtype need the cache dtype")
        return dsa.index_head_dim * dtype_bytes(dtype)
    return dsa.index_head_dim + 4 * -(-dsa.index_head_dim // 128)


CONVENTIONS = ("engine", "transformers")
CONVENTION_HELP = (
    "engine (default): the tokens a serving engine keeps for attention (vLLM / SGLang): W per sliding layer, "
    "kernel - 1 conv inputs, recurrent state in the state dtype, exact (the engine's block rounding is "
    "`capacity --engine`); transformers: what transformers' cache holds (cache_utils v5.24: "
    "DynamicSlidingWindowLayer keeps the last W - 1 tokens, LinearAttentionLayer keeps kernel conv columns)")


def under_convention(model: Model, convention: str) -> Model:
    """`model` as the convention's cache sees it (CONVENTION_HELP): itself for 'engine'; for 'transformers', every
    sliding window one token shorter (a full layer, or no cache at all, where Model.transformers_cache says
    transformers keeps the whole prefix or none) and every conv state one column wider (roofline's conv state keeps
    conv_kernel - 1 inputs, so conv_kernel + 1), but RecurrentGemma's, which its module keeps at kernel - 1, and
    RWKV-4's token shift (one input); the recurrent state at the model dtype but RG-LRU's, KDA's and RWKV-4's
    (fp32); the DSA index keys at the model dtype (SparseAttention.key_dtype 'model'). ValueError naming the field
    for an unknown convention or a window of 1 (nothing left to keep)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention: unknown {convention!r}; valid: {', '.join(CONVENTIONS)}")
    if convention == "engine":
        return model
    layers = []
    for layer in model.attention:
        if model.transformers_cache == "none":
            layer = layer.model_copy(update={"kind": "none", "window": None})
        elif layer.kind == "sliding" and model.transformers_cache == "full_windows":
            layer = layer.model_copy(update={"kind": "full", "window": None})
        elif layer.kind == "sliding":
            if layer.window < 2:
                raise ValueError("convention: transformers keeps W - 1 tokens of a sliding window; W is 1")
            layer = layer.model_copy(update={"window": layer.window - 1})
        layers.append(layer)
    update: dict = {"attention": layers}
    convs = model.attention_convs
    if convs is not None:  # Inkling: LinearAttentionLayer keeps kernel columns of its fp32 modules' inputs
        update["attention_convs"] = convs.model_copy(update={"kernel": convs.kernel + 1, "state_dtype": "fp32"})
    la = model.linear_attention
    if la is not None:
        # RecurrentGemma keeps its conv state on the module at kernel - 1 columns (RecurrentGemmaRecurrentBlock
        # .conv1d_state); its RG-LRU state and Kimi's KDA state are fp32 whatever the model dtype
        # (RecurrentGemmaRglru: torch.float32 zeros; KimiLinearDeltaAttention: last_recurrent_state.to(float32)),
        # the other recurrent states at the model dtype; RWKV-4 keeps its token shifts (one previous input each) at
        # the model dtype and its WKV state in fp32 (RwkvModel.forward: state[2:] torch.float32)
        kernel = la.conv_kernel + (la.kind not in ("rglru", "rwkv4"))
        recurrent = "fp32" if la.kind in ("rglru", "kda", "rwkv4") else None
        update["linear_attention"] = la.model_copy(update={"conv_kernel": kernel, "recurrent_dtype": recurrent})
    if model.sparse_attention is not None:  # transformers keeps the DSA index keys at the model dtype
        update["sparse_attention"] = model.sparse_attention.model_copy(update={"key_dtype": "model"})
    return model.model_copy(update=update)


def state_bytes_per_layer(model: Model) -> int:
    """Recurrent + conv state bytes per sequence in one 'linear' layer (0 without linear_attention)."""
    la = model.linear_attention
    if la is None:
        return 0
    return int(la.state_elements * dtype_size(la.recurrent_state_dtype) + la.conv_elements * dtype_size(la.state_dtype))


def state_heads_per_rank(model: Model, tp: int) -> tuple[int, int]:
    """(key heads, value heads) of one recurrent layer on one tensor-parallel rank. Value heads (Mamba-2's
    n_heads) split over tp and must divide; key heads (Mamba-2's n_groups of B and C) split while tp <= their
    number and are replicated above it, one whole group per rank (vLLM MambaMixer2: extra_groups_for_head_shards;
    SGLang likewise), so a rank never holds less than a whole head nor more than its share. ValueError naming
    tp otherwise."""
    la = model.linear_attention
    assert la is not None
    if la.value_heads % tp:
        raise ValueError(f"tp: {tp} does not divide the {la.value_heads} recurrent value heads of {model.name}")
    if tp <= la.key_heads:
        if la.key_heads % tp:
            raise ValueError(f"tp: {tp} does not divide the {la.key_heads} recurrent key heads of {model.name}")
        return la.key_heads // tp, la.value_heads // tp
    if tp % la.key_heads:
        raise ValueError(f"tp: {tp} exceeds the {la.key_heads} recurrent key heads of {model.name} and is not "
                         "a multiple of them (each rank replicates one whole key head)")
    return 1, la.value_heads // tp


def state_bytes_per_layer_rank(model: Model, tp: int, elem_bytes=None) -> sp.Expr:
    """One recurrent layer's state for one sequence on one rank: value heads / tp x d_k x d_v recurrent state
    plus (kernel - 1) x (2 x key heads on the rank x d_k + value heads / tp x d_v) conv state, in the state
    dtype (or `elem_bytes` per element; the recurrent state at recurrent_dtype where the spec sets one). 0 without
    linear_attention."""
    la = model.linear_attention
    if la is None:
        return sp.Integer(0)
    key, value = state_heads_per_rank(model, tp)
    size = dtype_bytes(la.state_dtype) if elem_bytes is None else elem_bytes
    recurrent = size if la.recurrent_dtype is None else dtype_bytes(la.recurrent_dtype)
    elements = la.state_elements_for(value)
    conv = (la.conv_kernel - 1) * la.conv_channels_for(key, value)
    return sp.sympify(elements * recurrent + conv * size)


def state_fraction(model: Model, tp: int) -> Fraction:
    """Share of a recurrent layer's state one rank holds at `tp` (1 without recurrent layers), exact."""
    whole = state_bytes_per_layer(model)
    return Fraction(1) if not whole else Fraction(state_bytes_per_layer_rank(model, tp), whole)


def attention_conv_state_bytes(model: Model) -> int:
    """Conv state bytes of one sequence over every attending layer of a model with Model.attention_convs (0
    without): (kernel - 1) inputs x (2 kv_dim of the layer + 2 hidden_size) channels x the state dtype's bytes."""
    convs = model.attention_convs
    if convs is None:
        return 0
    elements = sum(n * (convs.kernel - 1) * convs.channels(model.at_layer(kind).kv_dim, model.hidden_size)
                   for kind, n in model.attention_groups().items() if kind.attends)
    return int(elements * dtype_size(convs.state_dtype))


def state_bytes_per_sequence(model: Model) -> int:
    """Fixed state bytes of one sequence over all recurrent layers (Model.state_layers) and the attending layers'
    conv states (attention_conv_state_bytes); independent of the context."""
    return model.state_layers() * state_bytes_per_layer(model) + attention_conv_state_bytes(model)


def cached_tokens(layer_kind, context=None):
    """Tokens a layer holds at context L: all of them, at most W for a sliding window or a chunk (the peak of
    chunked local attention), none for 'linear' (a fixed state) or 'none'."""
    if context is None:
        from roofline.units import L

        context = L
    if layer_kind.kind in ("none", "linear"):
        return sp.Integer(0)
    if layer_kind.kind in ("sliding", "chunked"):
        return sp.Min(context, layer_kind.window)
    return context


def kv_bytes_per_token(model: Model, dtype: str = "bf16") -> sp.Expr:
    """Bytes per cached token summed over the layers that attend to the full context (+ the DSA indexer).

    Windowed layers are excluded once the context passes their window, and recurrent state is per sequence;
    use kv_bytes(L) for totals. For Llama-3.1-8B in bf16: 2 (K,V) x 8 heads x 128 x 32 layers x 2 bytes = 131,072.
    """
    per_layer = kv_elements_per_token_layer(model) * dtype_bytes(dtype)
    if not model.uniform_head_dim:
        return _mixed_bytes(model, dtype, lambda kind: kind.kind == "full")
    shared = sum(n for kind, n in model.kv_shared_groups().items() if kind.kind == "full")
    return per_layer * (model.layer_counts().get("full", 0) - shared) + index_key_bytes_per_token(model, dtype)


def index_key_bytes_per_token(model: Model, dtype: str = "bf16") -> sp.Expr:
    """DSA index keys per cached token over the layers that run an indexer (Model.indexer_layer_count; every one a
    full-attention layer, so one key per token of the context); 0 without sparse attention."""
    return sp.sympify(model.indexer_layer_count() * indexer_bytes_per_token_layer(model, dtype))


def _mixed_bytes(model: Model, dtype: str, weight) -> sp.Expr:
    """Sum over the attention kinds of layers keeping a cache x bytes per token of one such layer at its own
    head_dim x weight(kind) (tokens), for models whose layers differ in head_dim."""
    shared = model.kv_shared_groups()
    total = sp.Integer(0)
    for kind, n in model.attention_groups().items():
        keeping = n - shared.get(kind, 0)
        if keeping and kind.attends:
            per_layer = kv_elements_per_token_layer(model.at_layer(kind)) * dtype_bytes(dtype)
            total += keeping * per_layer * weight(kind)
    return total


def kv_bytes(model: Model, dtype: str = "bf16", context=None, batch=1, convention: str = "engine") -> sp.Expr:
    """Total cache bytes for `batch` sequences at `context` tokens (windowed layers capped at W, recurrent
    layers' fixed state included), under `convention` (CONVENTION_HELP; under_convention)."""
    model = under_convention(model, convention)
    if context is None:
        from roofline.units import L

        context = L
    per_layer = kv_elements_per_token_layer(model) * dtype_bytes(dtype)
    if not model.uniform_head_dim:
        cache = _mixed_bytes(model, dtype, lambda kind: cached_tokens(kind, context))
        return sp.sympify(batch * (cache + state_bytes_per_sequence(model)))
    tokens = sum(n * cached_tokens(kind, context) for kind, n in model.attention_groups().items())
    tokens -= sum(n * cached_tokens(kind, context) for kind, n in model.kv_shared_groups().items())
    index = index_key_bytes_per_token(model, dtype) * context
    return sp.sympify(batch * (per_layer * tokens + index + state_bytes_per_sequence(model)))
