"""Model architecture spec: the decoder shapes the cost model needs, nothing about deployment."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from roofline.specs import bounds
from roofline.specs.base import Spec

WINDOWED = ("sliding", "chunked")


class AttentionLayer(Spec):
    """How one layer mixes tokens: attention to the whole context, to a sliding window, within fixed chunks
    (Llama-4's chunked local attention), a recurrent state (kind 'linear': Gated DeltaNet, Mamba-2; shapes in
    Model.linear_attention), or not at all."""

    BOUNDS: ClassVar = bounds.ATTENTION

    kind: Literal["full", "sliding", "chunked", "linear", "none"] = Field(description="Kind of the layer.")
    window: PositiveInt | None = Field(
        None, description="Sliding-window length, or chunk length for 'chunked', in tokens.")
    sinks: bool = Field(False, description="Learned per-head sink logits in the softmax (gpt-oss); no cached tokens.")
    head_dim: PositiveInt | None = Field(
        None, description="This layer's per-head width where it differs from Model.head_dim (Gemma-4's "
                          "global_head_dim on its full layers: q, k, v, o and the cache at this width); None: "
                          "the model's.")
    num_heads: PositiveInt | None = Field(
        None, description="This layer's query heads where they differ from Model.num_heads (Inkling's "
                          "swa_num_attention_heads on its sliding layers); None: the model's.")
    num_kv_heads: PositiveInt | None = Field(
        None, description="This layer's key/value heads where they differ from Model.num_kv_heads (Inkling's "
                          "swa_num_key_value_heads); None: the model's.")

    @model_validator(mode="after")
    def _window_matches_kind(self) -> AttentionLayer:
        if self.kind in WINDOWED and self.window is None:
            raise ValueError(f"window: a {self.kind} layer needs a window length")
        if self.kind not in WINDOWED and self.window is not None:
            raise ValueError(f"window: only sliding or chunked layers take a window (kind is {self.kind!r})")
        if self.sinks and self.kind in ("linear", "none"):
            raise ValueError(f"sinks: only attention layers have sink logits (kind is {self.kind!r})")
        if self.head_dim is not None and self.kind in ("linear", "none"):
            raise ValueError(f"head_dim: only attention layers have heads (kind is {self.kind!r})")
        for name in ("num_heads", "num_kv_heads"):
            if getattr(self, name) is not None and self.kind in ("linear", "none"):
                raise ValueError(f"{name}: only attention layers have heads (kind is {self.kind!r})")
        return self

    @property
    def attends(self) -> bool:
        """The layer keeps a per-token K/V (or latent) cache."""
        return self.kind in ("full", "sliding", "chunked")


class LinearAttention(Spec):
    """Recurrent layers (kind 'linear') with a fixed state per sequence: Gated DeltaNet (Qwen3-Next), Mamba-2 or
    Mamba-1.

    One shape covers them: the recurrent state is value_heads x key_head_dim x value_head_dim per sequence
    (Mamba-2: n_heads x d_state x head_dim, key_heads = n_groups, key_head_dim = d_state), and the causal
    conv1d keeps conv_kernel - 1 past inputs of conv_channels = 2 key_heads key_head_dim + value_heads
    value_head_dim (Gated DeltaNet's q, k, v; Mamba-2's x, B, C). Mamba-1 (Gu & Dao 2023) has a d_state state
    per channel of d_inner and convolves x only: its d_inner channels are written as value_heads blocks of
    value_head_dim channels (the importer takes blocks of 64; bytes and FLOPs do not depend on the blocking,
    which only sets how tensor parallelism splits them), key_head_dim = d_state, key_heads = 1 (B and C come
    from x_proj after the convolution, shared by all channels), conv_channels = d_inner. A short convolution
    (kind 'short_conv', LFM2's Lfm2ShortConv: y = C * conv(B * x), Liquid AI 2025) keeps no recurrent state, only
    the conv state of its channels, written as mamba1's are (value_heads blocks of value_head_dim channels,
    key_heads = key_head_dim = 1, unused). MiniMax's lightning attention (kind 'lightning', MiniMax-01 report
    2025, §2.2; transformers MiniMaxLightningAttention) keeps a heads x head_dim x head_dim state of decayed k^T v
    sums and no convolution (conv_channels 0; conv_kernel is then unused). Kimi Delta Attention (kind 'kda',
    Kimi Linear report 2025, §3; transformers KimiLinearDeltaAttention) has Gated DeltaNet's state and conv (q, k, v
    of heads x head_dim each) with a per-channel decay and low-rank gate projections. Griffin's RG-LRU (kind
    'rglru', De et al. 2024, "Griffin", §2.4; transformers RecurrentGemmaRecurrentBlock) keeps one state element per
    channel of lru_width and a conv over those channels: value_heads blocks of value_head_dim channels (the
    block-diagonal gate weights), key_heads = key_head_dim = 1. RWKV-4's time mixing (kind 'rwkv4', Peng et al. 2023,
    "RWKV", §3-4; transformers RwkvSelfAttention) keeps per channel of its d width three WKV elements (numerator,
    denominator, running maximum): key_head_dim = 3, key_heads = 1, value_heads blocks of value_head_dim channels;
    and, as a conv of kernel 2, the previous token's input of the time mixing and of the channel mixing (token
    shift): conv_channels = 2 x the value channels. xLSTM's mLSTM (kind 'mlstm', Beck et al. 2024, "xLSTM", §2.3;
    Beck et al. 2025, "xLSTM 7B"; transformers xLSTMLayer) keeps per head a key_head_dim x value_head_dim matrix
    memory C, a key_head_dim normalizer n and a scalar stabilizer m, and no convolution (conv_channels 0).
    """

    kind: Literal["gated_deltanet", "kda", "mamba2", "mamba1", "short_conv", "lightning", "rglru", "rwkv4",
                  "mlstm"] = Field(
        description="Recurrence: Gated DeltaNet, Kimi Delta Attention, Mamba-2 (SSD), Mamba-1 (selective scan), "
                    "Griffin's RG-LRU, a gated short "
                    "convolution without a recurrent state (LFM2), or lightning attention without a convolution "
                    "(MiniMax), RWKV-4's time mixing, or xLSTM's mLSTM.")
    key_heads: PositiveInt = Field(description="Key heads (Mamba-2: n_groups of B and C).")
    value_heads: PositiveInt = Field(description="Value heads (Mamba-2: n_heads).")
    key_head_dim: PositiveInt = Field(description="Key width per head (Mamba-2: d_state).")
    value_head_dim: PositiveInt = Field(description="Value width per head (Mamba-2: head_dim).")
    conv_kernel: PositiveInt = Field(description="Causal conv1d kernel width (its state keeps kernel - 1 inputs).")
    state_dtype: Literal["fp32", "bf16", "fp16"] = Field(
        "bf16", description="Dtype of the recurrent and conv states (vLLM/SGLang: the model dtype by default).")
    recurrent_dtype: Literal["fp32", "bf16", "fp16"] | None = Field(
        None, description="Dtype of the recurrent state where it differs from the conv state's state_dtype (vLLM "
                          "keeps Nemotron-H's SSM state in fp32); None: state_dtype.")
    dt_rank: PositiveInt | None = Field(
        None, description="Mamba-1 only: rank of the low-rank time-step projection (x_proj -> dt_proj).")
    gated_norm: bool = Field(
        True, description="Mamba-2: the mixer ends in a gated RMSNorm of H_v d_v weights (Mamba2Mixer); False where "
                          "the checkpoint has none (Falcon-H1's mamba_rms_norm false: the gate multiplies the scan "
                          "output instead).")

    @model_validator(mode="after")
    def _dt_rank_matches_kind(self) -> LinearAttention:
        if (self.kind == "mamba1") != (self.dt_rank is not None):
            raise ValueError("dt_rank: needed exactly for kind 'mamba1'")
        return self

    @property
    def conv_channels(self) -> int:
        """Channels of the short causal convolution: 2 x key heads x key dim + value heads x value dim."""
        return self.conv_channels_for(self.key_heads, self.value_heads)

    def conv_channels_for(self, key_heads, value_heads):
        """Conv channels of `key_heads` key and `value_heads` value heads (one tensor-parallel rank's);
        Mamba-1 and a short convolution convolve their value channels only; lightning attention has no
        convolution; RWKV-4's token shift keeps two whole layer inputs on every rank (they precede the split
        projections)."""
        if self.kind in ("lightning", "mlstm"):
            return 0
        if self.kind == "rwkv4":  # token shift: the previous layer input (d wide, whole on every rank) of the time
            return 2 * self.value_heads * self.value_head_dim  # mixing and of the channel mixing
        if self.kind in ("mamba1", "short_conv", "rglru"):
            return value_heads * self.value_head_dim
        return 2 * key_heads * self.key_head_dim + value_heads * self.value_head_dim

    @property
    def state_elements(self) -> int:
        """Recurrent-state elements per sequence per layer: value_heads x key_head_dim x value_head_dim (none for a
        short convolution; mLSTM's normalizer and stabilizer besides its matrix memory)."""
        return self.state_elements_for(self.value_heads)

    def state_elements_for(self, value_heads) -> int:
        """Recurrent-state elements of `value_heads` heads (one tensor-parallel rank's): value_heads x key_head_dim
        x value_head_dim; an mLSTM head adds its normalizer (key_head_dim) and stabilizer (1); a short convolution
        keeps none."""
        if self.kind == "short_conv":
            return 0
        per_head = self.key_head_dim * self.value_head_dim
        return value_heads * (per_head + self.key_head_dim + 1 if self.kind == "mlstm" else per_head)

    @property
    def recurrent_state_dtype(self) -> str:
        """Dtype of the recurrent state: recurrent_dtype, else state_dtype."""
        return self.recurrent_dtype or self.state_dtype

    @property
    def conv_elements(self) -> int:
        """Convolution-state elements per sequence per layer: (kernel - 1) x conv channels."""
        return (self.conv_kernel - 1) * self.conv_channels


class SparseAttention(Spec):
    """DeepSeek Sparse Attention (DeepSeek-V3.2): a lightning indexer scores every cached token with its own
    small key cache (index_head_dim fp8 elements plus one fp32 scale per 128), and attention reads only the
    top-k tokens (DeepSeek-V3.2 technical report, §2.1)."""

    index_heads: PositiveInt = Field(description="Indexer query heads.")
    index_head_dim: PositiveInt = Field(description="Indexer key/query width (cached per token, fp8).")
    index_topk: PositiveInt = Field(description="Tokens each query attends to (top-k of the indexer scores).")
    key_dtype: Literal["fp8", "model"] = Field(
        "fp8", description="How the index keys are cached: 'fp8' (index_head_dim fp8 bytes + one fp32 scale per 128: "
                           "DeepSeek-V3.2's inference code, vLLM's and SGLang's indexer caches) or 'model' (at the "
                           "cache dtype, as transformers' DynamicCache keeps them).")
    indexer_layers: tuple[bool, ...] | None = Field(
        None, min_length=1,
        description="One entry per decoder layer: true where the layer runs its own indexer (its weights, its index "
                    "keys cached), false where it reuses the top-k of the last earlier indexer layer and keeps no "
                    "index keys (GLM-5 / HY-V4 indexer_types 'shared'); None: every layer runs one.")


class MLA(Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds a compressed latent plus a RoPE key."""

    BOUNDS: ClassVar = bounds.MLA_FIELDS

    q_lora_rank: PositiveInt | None = Field(None, description="Rank of the query down-projection; None: full.")
    kv_lora_rank: PositiveInt = Field(description="Width of the cached KV latent c_kv.")
    qk_nope_head_dim: PositiveInt = Field(description="Per-head query/key dims without RoPE.")
    qk_rope_head_dim: PositiveInt = Field(description="Per-head (shared for keys) RoPE dims, cached.")
    v_head_dim: PositiveInt = Field(description="Per-head value dims.")
    q_gate: bool = Field(
        False, description="The query up-projection reads [norm(c_q), c_q] (2 q_lora_rank wide) and also yields a "
                           "sigmoid gate of v_head_dim per head on the attention output (A.X-K2's q_gate_proj).")

    @model_validator(mode="after")
    def _q_gate_needs_rank(self) -> MLA:
        if self.q_gate and self.q_lora_rank is None:
            raise ValueError("q_gate: needs q_lora_rank (the gate reads the query latent)")
        return self


class MoE(Spec):
    """Mixture of experts in the MLP; dense-first layers keep the dense MLP."""

    BOUNDS: ClassVar = bounds.MOE

    num_experts: PositiveInt = Field(description="Routed experts per MoE layer.")
    experts_per_token: PositiveInt = Field(description="Routed experts each token activates (top-k).")
    num_shared_experts: int = Field(0, ge=0, description="Always-active shared experts per MoE layer.")
    expert_intermediate_size: PositiveInt = Field(description="Intermediate width of one expert's MLP.")
    shared_expert_intermediate_size: PositiveInt | None = Field(
        None, description="Width of the shared expert(s) together; None: num_shared_experts x expert width.")
    first_dense_layers: int = Field(0, ge=0, description="Leading layers with a dense MLP instead of MoE.")
    layer_period: PositiveInt = Field(
        1, description="After the dense-first layers, layer i is MoE when i % layer_period == layer_offset "
                       "(Jamba: expert_layer_period 2, offset 1); 1: every layer.")
    layer_offset: int = Field(0, ge=0, description="See layer_period.")
    router_bias: bool = Field(False, description="The router's linear carries a bias (gpt-oss).")
    shared_expert_gate: bool = Field(
        False, description="A d x 1 sigmoid gate scales the shared expert's output (Qwen2-MoE, Qwen3-Next).")

    @model_validator(mode="after")
    def _topk_fits(self) -> MoE:
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token: {self.experts_per_token} exceeds num_experts {self.num_experts}"
            )
        if self.shared_expert_intermediate_size is not None and self.num_shared_experts == 0:
            raise ValueError("shared_expert_intermediate_size: set, but num_shared_experts is 0")
        if self.layer_offset >= self.layer_period:
            raise ValueError(f"layer_offset: {self.layer_offset} must be below layer_period {self.layer_period}")
        return self

    def is_moe_layer(self, layer: int) -> bool:
        """Layer `layer` (0-based) has the MoE MLP."""
        return layer >= self.first_dense_layers and layer % self.layer_period == self.layer_offset

    @property
    def shared_width(self) -> int:
        """Intermediate width of the shared expert MLP (all shared experts as one)."""
        if self.shared_expert_intermediate_size is not None:
            return self.shared_expert_intermediate_size
        return self.num_shared_experts * self.expert_intermediate_size


class StoredLayout(Spec):
    """How one weight scheme stores a converted matrix: its dtype and the scales, zero points and fixed extras beside
    the codes (roofline.stored_bytes.matrix_bytes counts them)."""

    weight_dtype: Literal["fp8", "int8", "int4", "mxfp4", "nvfp4"] = Field(
        description="Storage dtype of the converted weight matrices.")
    scale_group: int = Field(
        -1, ge=-1, description="Weights along a matrix's input dimension sharing one scale: a group or block width "
                               "(AWQ 128, MXFP4 32, NVFP4 16); 0: one scale per output row (channel); -1: one per "
                               "matrix (tensor).")
    scale_rows: PositiveInt = Field(
        1, description="Output rows sharing one scale: the block height of fp8 block scales (128), else 1.")
    scale_bytes: int = Field(0, ge=0, le=8, description="Bytes of one scale (fp32 4, fp16 / bf16 2, e8m0 / fp8 1).")
    zero_point_bits: int = Field(
        0, ge=0, le=8, description="Bits of the zero point stored beside each scale (AWQ / GPTQ: the weight bits); "
                                   "0 for symmetric schemes.")
    matrix_extra_bytes: int = Field(
        0, ge=0, le=1 << 10, description="Fixed bytes per converted matrix: per-tensor scales (NVFP4's fp32 "
                                         "weight_scale_2 and input_scale: 8), compressed-tensors' weight_shape (16).")
    input_index_bytes: int = Field(
        0, ge=0, le=8, description="Bytes per input channel of a converted matrix (GPTQ's int32 g_idx: 4).")


class WeightScheme(StoredLayout):
    """One compressed-tensors config_group: the layout its targets are stored in."""

    name: str = Field(description="The config_groups key (group_0, ...).")
    targets: list[str] = Field(
        min_length=1, description="Its targets as written: module names, `re:` regular expressions, or a module "
                                  "class (Linear) as vLLM's compressed_tensors find_matched_target matches them.")


class Quantization(StoredLayout):
    """How a checkpoint stores its weights, read from its quantization_config (catalogue.hf_quant). The layout
    fields are the checkpoint's one scheme (the first config_group's where `groups` holds several)."""

    method: str = Field(description="quantization_config.quant_method (fp8, mxfp4, modelopt, awq, gptq, ...).")
    scale_bytes_per_weight: str = Field(
        "0/1", pattern=r"^\d+/[1-9]\d*$",
        description="Scale (and zero-point) bytes per converted weight beyond what the planner's dtype holds, an "
                    "exact fraction (fp8 128 x 128 blocks: 4/16384; AWQ int4 group 128: 2.5/128 = 5/256; mxfp4 and "
                    "nvfp4 dtypes hold theirs: 0); the exact per-matrix bytes are roofline.stored_bytes'.")
    experts_only: bool = Field(
        False, description="Only the routed experts are converted (modules_to_not_convert keeps attention and the "
                           "router at the model dtype: gpt-oss's mxfp4 checkpoints).")
    modules_not_converted: list[str] = Field(
        default_factory=list, description="modules_to_not_convert / ignore / exclude_modules as written.")
    kv_cache_dtype: Literal["fp8", "int8"] | None = Field(
        None, description="KV cache dtype the checkpoint declares (kv_cache_scheme, kv_cache_quant_algo), if any.")
    groups: list[WeightScheme] = Field(
        default_factory=list, description="compressed-tensors config_groups, in order, when the checkpoint has "
                                          "several schemes or targets other than every Linear: each matrix is "
                                          "stored in the first group whose targets match it (none: kept at bf16); "
                                          "empty: the one scheme above converts every matrix not kept.")


class AttentionConvs(Spec):
    """Depthwise causal convolutions inside every attending layer (Inkling, thinkingmachines 2026; transformers
    v5.24 InklingAttention.k_sconv / v_sconv and InklingDecoderLayer.attn_sconv / mlp_sconv): one on the k and
    one on the v projection (kv_dim channels each, the layer's own), one on the attention output and one on the
    MLP output (hidden_size channels each), kernel taps per channel, no bias. Each keeps a conv state of the
    last kernel - 1 inputs per sequence (transformers' LinearAttentionLayer keeps kernel columns, in fp32: the
    modules run in fp32 whatever the model dtype)."""

    kernel: PositiveInt = Field(description="Conv kernel width (conv_kernel_size).")
    state_dtype: Literal["fp32", "bf16", "fp16"] = Field(
        "bf16", description="Dtype of the conv states under the engine convention (the generic rule: the model "
                            "dtype, as vLLM's MambaStateDtypeCalculator keeps conv states).")

    def channels(self, kv_dim: int, hidden_size: int) -> int:
        """Conv channels of one layer: k and v (kv_dim each) and the attention and MLP outputs (hidden each)."""
        return 2 * kv_dim + 2 * hidden_size


class Encoder(Spec):
    """A vision or audio tower of a multimodal checkpoint: loaded beside the text decoder, not part of it
    (catalogue.hf_vision counts it from the wrapper's vision_config)."""

    modality: Literal["vision", "audio"] = Field(description="What the tower encodes.")
    kind: str = Field(description="The tower's config model_type (e.g. siglip_vision_model, qwen2_5_vl).")
    parameters: NonNegativeInt = Field(description="Parameters of the tower and its projector into the decoder.")
    dtype_bytes: PositiveInt = Field(2, le=4, description="Bytes per parameter as loaded (the checkpoint's dtype; "
                                                          "quantized checkpoints keep the towers unconverted).")
    counted: bool = Field(True, description="False: the tower's type has no parameter rule (catalogue.hf_vision), "
                                            "its parameters (0 here) are left out of the weights and the plan says so.")


class Model(Spec):
    """A decoder-only transformer as the cost model sees it."""

    BOUNDS: ClassVar = bounds.MODEL

    name: str = Field(description="Catalogue name, e.g. 'Llama-3.1-8B'.")
    source: str = Field(description="Where the shapes come from (the model's config.json URL).")
    architecture: str = Field(description="Hugging Face architecture, e.g. 'LlamaForCausalLM'.")
    num_layers: PositiveInt = Field(description="Decoder layers.")
    hidden_size: PositiveInt = Field(description="Residual stream width d.")
    num_heads: PositiveInt = Field(description="Query heads.")
    num_kv_heads: PositiveInt = Field(description="Key/value heads (GQA groups); equals num_heads for MHA.")
    head_dim: PositiveInt = Field(description="Per-head dimension (explicit: not always hidden/heads).")
    intermediate_size: PositiveInt = Field(description="Dense MLP intermediate width.")
    vocab_size: PositiveInt = Field(description="Vocabulary size.")
    tie_word_embeddings: bool = Field(description="LM head shares the embedding matrix.")
    qkv_bias: bool = Field(False, description="Q, K and V projections carry a bias.")
    qk_norm: bool = Field(False, description="Per-head RMSNorm on queries and keys (Qwen3).")
    attn_output_gate: bool = Field(
        False, description="Query projection also yields a sigmoid gate on the attention output (Qwen3-Next); with "
                           "MLA, its own d x heads x v_head_dim gate projection (HY-V4's gate_proj).")
    attn_head_gate: bool = Field(
        False, description="A d x heads projection yields one sigmoid gate per head on the attention output (LFM3's "
                           "g_proj).")
    mlp: Literal["gated", "plain", "none"] = Field(
        "gated", description="Gated (SwiGLU/GeGLU, 3 matrices), plain, or none (pure Mamba: the mixer is the layer).")
    norms_per_layer: PositiveInt = Field(2, description="Norm layers per decoder layer (Gemma-2: 4).")
    norm: Literal["rms", "layernorm", "nonparametric"] = Field(
        "rms", description="Norm parameters per channel: RMSNorm 1 (weight), LayerNorm 2 (weight and bias), "
                           "non-parametric LayerNorm 0 (OLMo-1).")
    qk_norm_width: Literal["head", "full", "weightless"] = Field(
        "head", description="With qk_norm: one head_dim-wide norm each for q and k ('head', Qwen3), norms over "
                            "the whole q and k projections ('full': q_dim + kv_dim weights, OLMo-2), or an L2 norm "
                            "without weights ('weightless': Llama-4's Llama4TextL2Norm).")
    attn_out_bias: bool = Field(False, description="The attention output projection carries a bias.")
    mlp_bias: bool = Field(False, description="Every MLP linear (dense, expert and shared) carries a bias.")
    lm_head_bias: bool = Field(False, description="The LM head carries a bias (Phi-2, Phi-MoE).")
    position_embeddings: int = Field(
        0, ge=0, description="Rows of a learned absolute position embedding (GPT-2: n_positions); 0 for RoPE.")
    final_norm: bool = Field(
        True, description="A norm after the last layer (false: GPT-1's OpenAIGPTModel, post-norm layers only).")
    transformers_cache: Literal["standard", "full_windows", "none"] = Field(
        "standard", description="What transformers' cache keeps of this model, for the 'transformers' convention: "
                                "'standard' (cache_utils' layers), 'full_windows' (every token of the sliding "
                                "layers too: GPT-Neo's local layers only mask attention, its DynamicCache holds the "
                                "whole prefix), 'none' (no cache: OpenAIGPTModel recomputes the prefix each step).")
    attention: list[AttentionLayer] = Field(
        default_factory=lambda: [AttentionLayer(kind="full")], min_length=1,
        description="Per-layer attention kinds, repeated cyclically over the layers (Gemma-2: sliding, full).",
    )
    mla: MLA | None = Field(None, description="Latent attention dims when the model uses MLA.")
    moe: MoE | None = Field(None, description="Mixture-of-experts MLP, if any.")
    linear_attention: LinearAttention | None = Field(
        None, description="Shapes of the 'linear' (recurrent-state) layers, when the model has any.")
    linear_parallel: bool = Field(
        False, description="Every attending layer also runs the linear_attention mixer in parallel on the same "
                           "normed input, outputs summed (Falcon-H1): it keeps both a KV cache and a state.")
    sparse_attention: SparseAttention | None = Field(
        None, description="DeepSeek Sparse Attention indexer (with MLA), if any.")
    mlp_layers: list[Literal["dense", "moe", "none"]] | None = Field(
        None, min_length=1,
        description="Per-layer MLP, repeated cyclically like attention: 'dense', 'moe' or 'none' (Nemotron-H: every "
                    "layer is one block, a mixer with no MLP or an MLP with no mixer, attention kind 'none'); None: "
                    "every layer has one, MoE where moe.is_moe_layer.")
    max_position_embeddings: PositiveInt = Field(description="Longest context the model supports, tokens.")
    longrope_original_positions: PositiveInt | None = Field(
        None, description="A LongRoPE model's original_max_position_embeddings (Phi-3-128k, Phi-3.5, Phi-4-mini): "
                          "the positions its short factors cover, which vLLM serves by default (its max_model_len); "
                          "None: not LongRoPE.")
    quantization: Quantization | None = Field(
        None, description="Stored widths of a quantized checkpoint (its quantization_config), if any.")
    layer_extra_params: int = Field(
        0, ge=0, description="Parameters in every decoder layer outside the groups above (learned activation "
                             "scalars, sub-norms, per-head gates, Differential-attention lambdas; the importing "
                             "family names them); stored with the layer's weights, no FLOPs modelled.")
    model_extra_params: int = Field(
        0, ge=0, description="Parameters not in every decoder layer besides the embeddings, the LM head and the "
                             "final norm (an embedding LayerNorm, a last-layer-only bias, a norm of the MoE "
                             "layers only); stored with the embedding.")
    encoders: list[Encoder] = Field(
        default_factory=list, description="Vision / audio towers a multimodal checkpoint loads beside the decoder.")
    attention_convs: AttentionConvs | None = Field(
        None, description="Short causal convolutions on k, v and the attention and MLP outputs of every attending "
                          "layer, each keeping a per-sequence conv state (Inkling); None: none.")
    reused_layers: NonNegativeInt = Field(
        0, description="Layer applications that run the weights of other layers (Inkling-2-Loop's passes over its "
                       "loop layers after the first): the stack runs num_layers layers, each with its own cache and "
                       "weight reads, and stores num_layers - reused_layers; whole periods of `attention` (and "
                       "mlp_layers), so the stored layers hold the same mix of kinds. 0: every layer its own.")
    mtp_layers: NonNegativeInt = Field(
        0, description="Multi-token-prediction modules the checkpoint ships beside the decoder stack (DeepSeek-V3's "
                       "num_nextn_predict_layers, Qwen3.5's mtp_num_hidden_layers): what `simulate --speculative mtp` "
                       "drafts with; not counted in num_layers, the weights or the caches. 0: none.")
    kv_shared_layers: NonNegativeInt = Field(
        0, description="The last kv_shared_layers layers keep no cache and have no K/V projections: each attends "
                       "with the cache of the last earlier layer of its attention kind (Gemma-3n's "
                       "num_kv_shared_layers); 0: every attending layer keeps its own.")

    @model_validator(mode="after")
    def _shapes_consistent(self) -> Model:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads: {self.num_kv_heads} does not divide num_heads {self.num_heads}"
            )
        if len(self.attention) > self.num_layers:
            raise ValueError(
                f"attention: {len(self.attention)} entries for {self.num_layers} layers (at most one per layer)"
            )
        if self.moe is not None and self.moe.first_dense_layers > self.num_layers:
            raise ValueError(
                f"moe.first_dense_layers: {self.moe.first_dense_layers} exceeds num_layers {self.num_layers}"
            )
        if self.mla is not None and self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim != self.head_dim:
            raise ValueError("head_dim: with MLA it must equal qk_nope_head_dim + qk_rope_head_dim")
        kinds = {a.kind for a in self.attention}
        if ("linear" in kinds or self.linear_parallel) != (self.linear_attention is not None):
            raise ValueError("linear_attention: needed exactly when some layer has kind 'linear' or "
                             "linear_parallel is set")
        if self.linear_parallel and not kinds <= {"full", "sliding", "chunked"}:
            raise ValueError("linear_parallel: every layer must attend (the mixer runs beside attention)")
        if self.mlp == "none" and self.moe is not None:
            raise ValueError("mlp: 'none' (no MLP) contradicts moe")
        self._check_mlp_layers()
        if not any(a.attends for a in self.attention) and "linear" not in kinds:
            raise ValueError("attention: no layer attends or keeps a state")
        self._check_sparse_attention()
        self._check_kv_sharing()
        if self.mla is not None and not self.uniform_head_dim:
            raise ValueError("attention: a per-layer head_dim is not modelled with MLA")
        for a in self.attention:
            if self.at_layer(a).num_heads % self.at_layer(a).num_kv_heads:
                raise ValueError(f"attention: a {a.kind} layer's num_kv_heads does not divide its num_heads")
        self._check_reused_layers()
        if self.attention_convs is not None and self.mla is not None:
            raise ValueError("attention_convs: not modelled with MLA")
        if len({self.at_layer(a).head_dim for a in self.attention if a.kind == "full"}) > 1:
            raise ValueError("attention: the full layers must share one head_dim")
        return self

    @property
    def uniform_head_dim(self) -> bool:
        """Every attention layer has the model's head shapes (no AttentionLayer.head_dim, num_heads or
        num_kv_heads differs)."""
        return all(a.head_dim in (None, self.head_dim) and a.num_heads in (None, self.num_heads)
                   and a.num_kv_heads in (None, self.num_kv_heads) for a in self.attention)

    def at_layer(self, layer: AttentionLayer) -> Model:
        """The model as one layer of kind `layer` sees it: head_dim, num_heads and num_kv_heads replaced by the
        layer's own where it sets them (so q_dim, kv_dim and every per-layer width follow); the model itself
        otherwise."""
        update = {name: getattr(layer, name) for name in ("head_dim", "num_heads", "num_kv_heads")
                  if getattr(layer, name) not in (None, getattr(self, name))}
        return self.model_copy(update=update) if update else self

    def _check_reused_layers(self) -> None:
        if not self.reused_layers:
            return
        periods = [len(self.attention), len(self.mlp_layers or [1]), self.moe.layer_period if self.moe else 1]
        if self.reused_layers >= self.num_layers or any(self.reused_layers % p for p in periods) or (
                self.moe is not None and self.moe.first_dense_layers > self.num_layers - self.reused_layers):
            raise ValueError(f"reused_layers: {self.reused_layers} must be fewer than num_layers {self.num_layers} "
                             "and whole periods of attention, mlp_layers and the MoE layers")

    def stored(self) -> Model:
        """The model as its stored weights see it: num_layers - reused_layers layers (itself without reuse)."""
        if not self.reused_layers:
            return self
        return self.model_copy(update={"num_layers": self.num_layers - self.reused_layers, "reused_layers": 0})

    def _check_kv_sharing(self) -> None:
        if not self.kv_shared_layers:
            return
        first = self.num_layers - self.kv_shared_layers
        if first < 1 or self.mla is not None:
            raise ValueError(f"kv_shared_layers: {self.kv_shared_layers} must leave some of the {self.num_layers} "
                             "layers keeping a cache (and MLA is not modelled with sharing)")
        owners = {self.layer_attention(i) for i in range(first)}
        for i in range(first, self.num_layers):
            if not self.layer_attention(i).attends or self.layer_attention(i) not in owners:
                raise ValueError(f"kv_shared_layers: layer {i} ({self.layer_attention(i).kind}) has no earlier "
                                 "attending layer of its kind whose cache it could reuse")

    def _check_sparse_attention(self) -> None:
        dsa = self.sparse_attention
        if dsa is None:
            return
        if self.mla is None:
            raise ValueError("sparse_attention: DeepSeek Sparse Attention is modelled on MLA models only")
        if any(a.kind != "full" for a in self.attention):
            raise ValueError("sparse_attention: every layer must be a full-attention layer (the indexer keeps a key "
                             "per token of the whole context)")
        flags = dsa.indexer_layers
        if flags is not None and (len(flags) != self.num_layers or not flags[0]):
            raise ValueError(f"sparse_attention.indexer_layers: needs {self.num_layers} entries (one per layer), the "
                             "first true (a layer reusing top-k needs an earlier indexer layer)")

    def runs_indexer(self, layer: int) -> bool:
        """Layer `layer` (0-based) runs its own DSA indexer and caches index keys (SparseAttention.indexer_layers);
        False without sparse attention."""
        dsa = self.sparse_attention
        return dsa is not None and (dsa.indexer_layers is None or dsa.indexer_layers[layer])

    def indexer_layer_count(self) -> int:
        """Layers that run their own DSA indexer (0 without sparse attention)."""
        return sum(self.runs_indexer(i) for i in range(self.num_layers))

    def kv_shared_groups(self) -> dict[AttentionLayer, int]:
        """Attention kinds of the kv_shared_layers last layers and how many of them have each: layers that attend
        (same FLOPs, same bytes read) with another layer's cache, keeping none of their own."""
        groups: dict[AttentionLayer, int] = {}
        for i in range(self.num_layers - self.kv_shared_layers, self.num_layers):
            groups[self.layer_attention(i)] = groups.get(self.layer_attention(i), 0) + 1
        return groups

    def _check_mlp_layers(self) -> None:
        if self.mlp_layers is None:
            return
        if len(self.mlp_layers) > self.num_layers:
            raise ValueError(f"mlp_layers: {len(self.mlp_layers)} entries for {self.num_layers} layers")
        if ("moe" in self.mlp_layers) != (self.moe is not None):
            raise ValueError("mlp_layers: 'moe' entries need moe, and moe needs some 'moe' entry")
        if self.mlp == "none" and set(self.mlp_layers) != {"none"}:
            raise ValueError("mlp_layers: a layer has an MLP, but mlp is 'none'")
        if self.moe is not None and (self.moe.first_dense_layers or self.moe.layer_period != 1):
            raise ValueError("mlp_layers: with mlp_layers, moe's first_dense_layers / layer_period are unused")

    def layer_mlp(self, layer: int) -> str:
        """MLP of layer `layer` (0-based): 'dense', 'moe' or 'none' (mlp_layers, else moe.is_moe_layer)."""
        if self.mlp_layers is not None:
            return self.mlp_layers[layer % len(self.mlp_layers)]
        if self.mlp == "none":
            return "none"
        return "moe" if self.moe is not None and self.moe.is_moe_layer(layer) else "dense"

    def layer_attention(self, layer: int) -> AttentionLayer:
        """Attention kind of layer `layer` (0-based); the pattern repeats over the layers."""
        if not 0 <= layer < self.num_layers:
            raise IndexError(f"layer: {layer} outside 0..{self.num_layers - 1}")
        return self.attention[layer % len(self.attention)]

    def attention_groups(self) -> dict[AttentionLayer, int]:
        """Distinct attention kinds and how many layers have each (costs are per kind, times count)."""
        # counted per pattern entry, not per layer: layer i has entry i % period
        period, groups = len(self.attention), {}
        for i, kind in enumerate(self.attention):
            groups[kind] = groups.get(kind, 0) + self.num_layers // period + (i < self.num_layers % period)
        return {kind: n for kind, n in groups.items() if n}

    def state_layers(self) -> int:
        """Layers that keep a recurrent state: the 'linear' ones, or every layer of a linear_parallel model."""
        if self.linear_attention is None:
            return 0
        return self.num_layers if self.linear_parallel else self.layer_counts().get("linear", 0)

    def layer_counts(self) -> dict[str, int]:
        """Layers of each kind ('full', 'sliding', 'chunked', 'linear', 'none')."""
        counts: dict[str, int] = {}
        for kind, n in self.attention_groups().items():
            counts[kind.kind] = counts.get(kind.kind, 0) + n
        return counts

    @property
    def gqa_group(self) -> int:
        """Query heads per KV head (g in the XQuant paper)."""
        return self.num_heads // self.num_kv_heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) per token per layer: num_kv_heads * head_dim."""
        return self.num_kv_heads * self.head_dim

    @property
    def q_dim(self) -> int:
        """Query projection width: num_heads x head_dim."""
        return self.num_heads * self.head_dim
