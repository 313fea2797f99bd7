"""Model architecture spec: the decoder shapes the cost model needs, nothing about deployment."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, PositiveInt, model_validator

from roofline.specs import bounds
from roofline.specs.base import Spec


class AttentionLayer(Spec):
    """How one layer attends: to the whole context, to a sliding window, or not at all."""

    BOUNDS: ClassVar = bounds.ATTENTION

    kind: Literal["full", "sliding", "none"] = Field(description="Attention kind of the layer.")
    window: PositiveInt | None = Field(None, description="Sliding-window length in tokens (kind 'sliding').")

    @model_validator(mode="after")
    def _window_matches_kind(self) -> AttentionLayer:
        if self.kind == "sliding" and self.window is None:
            raise ValueError("window: a sliding layer needs a window length")
        if self.kind != "sliding" and self.window is not None:
            raise ValueError(f"window: only sliding layers take a window (kind is {self.kind!r})")
        return self


class MLA(Spec):
    """Multi-head latent attention (DeepSeek-V2/V3): the cache holds a compressed latent plus a RoPE key."""

    BOUNDS: ClassVar = bounds.MLA_FIELDS

    q_lora_rank: PositiveInt | None = Field(None, description="Rank of the query down-projection; None: full.")
    kv_lora_rank: PositiveInt = Field(description="Width of the cached KV latent c_kv.")
    qk_nope_head_dim: PositiveInt = Field(description="Per-head query/key dims without RoPE.")
    qk_rope_head_dim: PositiveInt = Field(description="Per-head (shared for keys) RoPE dims, cached.")
    v_head_dim: PositiveInt = Field(description="Per-head value dims.")


class MoE(Spec):
    """Mixture of experts in the MLP; dense-first layers keep the dense MLP."""

    BOUNDS: ClassVar = bounds.MOE

    num_experts: PositiveInt = Field(description="Routed experts per MoE layer.")
    experts_per_token: PositiveInt = Field(description="Routed experts each token activates (top-k).")
    num_shared_experts: int = Field(0, ge=0, description="Always-active shared experts per MoE layer.")
    expert_intermediate_size: PositiveInt = Field(description="Intermediate width of one expert's MLP.")
    first_dense_layers: int = Field(0, ge=0, description="Leading layers with a dense MLP instead of MoE.")

    @model_validator(mode="after")
    def _topk_fits(self) -> MoE:
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token: {self.experts_per_token} exceeds num_experts {self.num_experts}"
            )
        return self


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
    mlp: Literal["gated", "plain"] = Field("gated", description="Gated (SwiGLU/GeGLU, 3 matrices) or plain MLP.")
    norms_per_layer: PositiveInt = Field(2, description="Norm layers per decoder layer (Gemma-2: 4).")
    attention: list[AttentionLayer] = Field(
        default_factory=lambda: [AttentionLayer(kind="full")], min_length=1,
        description="Per-layer attention kinds, repeated cyclically over the layers (Gemma-2: sliding, full).",
    )
    mla: MLA | None = Field(None, description="Latent attention dims when the model uses MLA.")
    moe: MoE | None = Field(None, description="Mixture-of-experts MLP, if any.")
    max_position_embeddings: PositiveInt = Field(description="Longest context the model supports, tokens.")

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
        return self

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
        return self.num_heads * self.head_dim
