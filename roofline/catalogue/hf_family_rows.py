"""Family rows of the decoders of 2019-2023 and of the MoE / MLA / multimodal decoders of 2024-2026.

Each row says how one transformers model type lays out its parameters around the shared keys (hf_layout.Family);
hf_families.FAMILIES merges them with the original rows and hf_families.read builds the Model. Every row's comment
names the modules it was read from, in huggingface/transformers v5.24.0
src/transformers/models/<type>/modeling_<type>.py, and every type here matches a tiny transformers model in
tests/catalogue/test_hf_exactness.py (parameters and cache bytes exact).
"""

from __future__ import annotations

from roofline.catalogue.hf_layout import LLAMA, Family

GPT_KEYS = (("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"), ("num_attention_heads", "n_head"),
            ("max_position_embeddings", "n_positions"), ("intermediate_size", "n_inner"))
ERNIE_MOE_KEYS = ("moe_num_experts", "moe_intermediate_size", "moe_k", "moe_layer_start_index", "moe_layer_end_index")
# Decoders of 2019-2023 (GPT-J / CodeGen / CTRL / BLOOM / MPT / Phi-1-2 / Persimmon / BioGPT / XGLM /
# GPT-NeoX-Japanese), from each modeling_<type>.py of transformers v5.24.0
OLDER_FAMILIES: dict[str, Family] = {
    # GPTJBlock / CodeGenBlock: attention and MLP in parallel after ln_1 (LayerNorm with bias), q/k/v/out_proj
    # without bias, fc_in / fc_out with bias (n_inner, null: 4 x n_embd), lm_head with bias, rotary positions
    **dict.fromkeys(("gptj", "codegen"), Family(
        norm="layernorm", norms_per_layer=1, qkv_bias=False, o_bias=False, mlp_bias=True, mlp="plain",
        lm_head_bias=True, aliases=GPT_KEYS, intermediate_factor=4)),
    # CTRL (EncoderLayer): Wq / Wk / Wv / dense with bias, ffn of dff with bias, two LayerNorms, sinusoidal
    # positions (a buffer), tied lm_head with a bias
    "ctrl": Family(norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain", tie_default=True,
                   lm_head_bias=True, aliases=(*GPT_KEYS, ("intermediate_size", "dff"))),
    # PhiDecoderLayer: parallel block after one LayerNorm, biases on q/k/v/dense and fc1/fc2, lm_head with bias,
    # optional per-head q/k LayerNorms with bias (qk_layernorm)
    "phi": Family(norm="layernorm", norms_per_layer=1, qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain",
                  lm_head_bias=True, qk_norm="qk_layernorm", extras=("qk_layernorm_bias",)),
    # PersimmonDecoderLayer: two LayerNorms, fused query_key_value and dense with bias, ReLU^2 MLP with bias,
    # per-head q/k LayerNorms with bias (qk_layernorm); Fuyu's text_config is a persimmon one
    "persimmon": Family(norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain",
                        qk_norm=("qk_layernorm", True), extras=("qk_layernorm_bias",)),
    # BloomBlock: LayerNorms with bias, one after the embedding (word_embeddings_layernorm), fused
    # query_key_value and dense with bias, 4 x hidden MLP with bias, ALiBi (no position table), tied. Its config
    # has no context key: BLOOM trained at 2048 tokens (arXiv 2211.05100, section 3.5.1 "sequence length of 2048")
    "bloom": Family(norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain", tie_default=True,
                    embedding_norm=True, intermediate_factor=4, context_default=2048,
                    aliases=(("num_hidden_layers", "n_layer"), ("num_attention_heads", "n_head"),
                             ("hidden_size", "n_embed"))),
    # MptBlock: LayerNorms whose bias is removed (one weight per channel, as RMSNorm's count), Wqkv / out_proj
    # and the 4 x d_model up / down MLP without bias (MptMLP hard-codes 4, so other expansion_ratio values are
    # refused), ALiBi, tied
    "mpt": Family(norm="rms", qkv_bias=False, o_bias=False, mlp_bias=False, mlp="plain", tie_default=True,
                  intermediate_factor=4, modelled_only=(("expansion_ratio", 4), ("no_bias", True)),
                  aliases=(("hidden_size", "d_model"), ("num_attention_heads", "n_heads"),
                           ("num_hidden_layers", "n_layers"), ("max_position_embeddings", "max_seq_len"))),
    # BioGptDecoderLayer: OPT's layout (LayerNorms with bias, biased q/k/v/out_proj and fc1/fc2, learned
    # positions of max_position_embeddings + 2), tied output_projection
    "biogpt": Family(norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain", tie_default=True,
                     learned_positions="max_position_embeddings", position_offset=2),
    # XGLMDecoderLayer: the same with sinusoidal positions (a buffer)
    "xglm": Family(norm="layernorm", qkv_bias=True, o_bias=True, mlp_bias=True, mlp="plain", tie_default=True,
                   aliases=(("hidden_size", "d_model"), ("num_hidden_layers", "num_layers"),
                            ("num_attention_heads", "attention_heads"), ("intermediate_size", "ffn_dim"))),
    # GPTNeoXJapaneseLayer: LayerNorms with bias, query_key_value / dense / MLP without bias (dense_bias in the
    # last layer only), MLP of intermediate_multiple_size x hidden, tied embed_out
    "gpt_neox_japanese": Family(norm="layernorm", qkv_bias=False, o_bias=False, mlp_bias=False, mlp="plain",
                                tie_default=True, intermediate_factor="intermediate_multiple_size",
                                extras=("last_layer_dense_bias",)),
}

# MoE and MLA decoders of 2024-2026 on the shared keys, from each modeling_<type>.py of transformers v5.24.0
MOE_FAMILIES: dict[str, Family] = {
    # HunYuanMoEV1Moe: every layer routes over num_experts of intermediate_size (1 by default, still routed: a
    # d x E gate) beside shared_mlp of intermediate_size; per-head q / k RMSNorms (query_layernorm)
    "hunyuan_v1_moe": Family(qk_norm=True, moe_always=True, shared_experts=1),
    "hunyuan_vl_text": Family(qk_norm=True),
    # BitNetAttention.attn_sub_norm (hidden) and BitNetMLP.ffn_sub_norm (intermediate) before o / down
    "bitnet": Family(extras=("bitnet_sub_norms",)),
    # DiffLlamaAttention: Llama's projections plus four head_dim lambda vectors per layer
    "diffllama": Family(extras=("diff_lambdas",)),
    # ApertusMLP: ungated up / down with the xIELU activation (two learned scalars), per-head QK RMSNorm
    **dict.fromkeys(("apertus", "apertus1p5_text"), Family(mlp="plain", qk_norm=True, extras=("xielu",))),
    # Ernie4_5_MoeSparseMoeBlock: experts of moe_intermediate_size, moe_num_shared_experts of that width, a
    # gate without bias plus moe_statics.e_score_correction_bias (E: counted as the router bias); use_bias on
    # every linear; MoE layers by moe_layer_start_index / end / interval. Ernie4_5_MoeConfig types the MoE keys
    # int (a list fails its strict check; vLLM's ernie45_moe.py compares moe_num_experts with 0 and the TP size):
    # the [text, vision] pairs of ERNIE-4.5-VL's config are read only by its own architecture
    "ernie4_5_moe": Family(qkv_bias="use_bias", o_bias="use_bias", mlp_bias="use_bias", router_bias=True,
                           tie_default=True, one_integer=ERNIE_MOE_KEYS,
                           one_integer_hint="(a [text, vision] pair is ERNIE-4.5-VL's form: its architectures "
                                            "is Ernie4_5_VLMoeForConditionalGeneration)"),
    # DeepSeek-V3 layout on GQA (SolarOpenMoE: gate d x E, e_score_correction_bias a buffer, n_shared_experts of
    # moe_intermediate_size)
    "solar_open": LLAMA,
    # MLA (q_lora_rank / kv_lora_rank) with DeepSeek-V3 MoE (n_routed_experts, n_shared_experts, mlp_layer_types
    # or first_k_dense_replace): Mistral4, GLM-4.7-Flash (glm4_moe_lite), A.X K1, MiniCPM3 (dense)
    **dict.fromkeys(("mistral4", "glm4_moe_lite"), LLAMA), "minicpm3": Family(tie_default=True),
    # A.X K1 adds post_mlp_layernorm in its sparse layers
    "axk1": Family(extras=("moe_post_norm",)),
    # AfmoeDecoderLayer: gated attention (gate_proj d x q), per-head QK RMSNorm, 4 norms, layer_types, first
    # num_dense_layers dense, expert_bias (E, the router's score bias)
    "afmoe": Family(qk_norm=True, attn_output_gate=True, norms_per_layer=4, router_bias=True),
    # FlintDecoderLayer: per-head QK RMSNorm, sink logits on every layer, dense mlp_only_layers then MoE with an
    # ungated shared expert of shared_expert_intermediate_size
    "flint": Family(qk_norm=True, sinks=True),
    # Kolibri1: per-head QK RMSNorm, post-attention and post-MLP norms (4), MoE with a shared expert
    "kolibri1": Family(qk_norm=True, norms_per_layer=4),
    # BeamAttention: per-head QK RMSNorm, a sigmoid output gate (gate_proj d x q) with a per-head gate_bias, 4
    # norms, dense then sparse layers by mlp_layer_types
    "beam": Family(qk_norm=True, attn_output_gate=True, norms_per_layer=4, extras=("gate_bias",)),
    # LaraMini: Gated DeltaNet, sliding and full attention layers (layer_types), per-head QK RMSNorm, MoE with an
    # ungated shared expert on every layer
    "lara_mini": Family(qk_norm=True, gated_deltanet=True, tie_default=True),
    # Doge (dense, is_moe false; its CDMoE is not modelled): Llama projections with per-head QK RMSNorm, the
    # dynamic-mask A / dt_proj and two residual scales per layer; sliding_window (null: full) on every layer.
    # keep_window_size masks attention weights, not the cache
    "doge": Family(qk_norm=True, uniform_window=True, extras=("doge",), moe_switch="is_moe",
                   modelled_only=(("is_moe", False),)),
    # Step-3.5 text (Step3p7's text_config): per-head QK RMSNorm, a per-head output gate (gating true), dense then
    # sparse layers by mlp_layer_types, experts of moe_intermediate_size and one shared expert of
    # share_expert_dim; sliding layers with their own head count (num_sliding_attention_heads) are refused
    "step3p5": Family(qk_norm=True, extras=("step_head_gate",), shared_experts=1,
                      aliases=(("shared_expert_intermediate_size", "share_expert_dim"),),
                      modelled_only=(("gating", True), ("num_sliding_attention_heads", "num_attention_heads"))),
    # ModernBertDecoder: an embedding LayerNorm, mlp_norm in every layer and attn_norm from layer 1 on, gated Wi
    # (2 x intermediate) / Wo, sliding / full layers (sliding_window), a prediction head (dense + LayerNorm) and a
    # decoder with bias (decoder_bias) tied to the embedding; LayerNorms without bias (norm_bias true is refused)
    "modernbert-decoder": Family(norms_per_layer=1, embedding_norm=True, tie_default=True,
                                 lm_head_bias=("decoder_bias", True), extras=("modernbert_decoder",),
                                 modelled_only=(("norm_bias", False),)),
    # LagunaAttention: per-head QK RMSNorm and, with gating, a per-head output gate g_proj (d x heads)
    # (d x heads) and the router's e_score_correction_bias (E)
    # text decoders of multimodal wrappers on the Llama / Qwen / ERNIE layouts
    **dict.fromkeys(("emu3_text_model", "granite4_vision_text", "granite_docling_text"), LLAMA),
    "qwen2_5_omni_text": Family(qkv_bias=True, o_bias=False),
    # Qwen3OmniMoeThinkerTextAttention: head_dim = getattr(config, "head_dim", hidden_size // heads), floored
    # Qwen3OmniMoeThinkerTextAttention: self.sliding_window = None (the config's key is never read)
    "qwen3_omni_moe_text": Family(qk_norm=True, head_dim_floor=True, window_ignored=True),
    "paddleocr_vl_text": Family(qkv_bias="use_bias", o_bias="use_bias", mlp_bias="use_bias", tie_default=True),
    # Molmo2TextModel: Qwen3-style per-head QK norm (qk_norm_type 'qwen3'; others refused), extra embedding rows
    "molmo2_text": Family(qk_norm=True, extras=("additional_vocab",), modelled_only=(("qk_norm_type", "qwen3"),
                                                                                     ("norm_after", False))),
    # MuseGlimmer text: gated attention (gate_proj d x q), pre- and post-norms around attention and MLP (4),
    # layer_types sliding / full (MuseSpark's experts run in a projected moe_hidden_size space: not modelled)
    "muse_glimmer_text": Family(attn_output_gate=True, norms_per_layer=4),
    # CohereCompassDecoderLayer: Cohere2's parallel block after one weight-only LayerNorm, layer_types sliding /
    # full, tied embeddings
    "cohere_compass_text": Family(norms_per_layer=1, tie_default=True),
    # YoutuAttention: MLA (DeepSeek-V3's) on a dense Llama MLP; tied embeddings by default
    "youtu": Family(tie_default=True),
    # DeepSeek-V3 as a wrapper's text_config (Kimi-K2.5): MLA, n_routed / n_shared experts, first_k_dense_replace,
    # the router's e_score_correction_bias is a buffer; moe_layer_freq other than 1 is refused as in the handler
    "deepseek_v3": Family(modelled_only=(("moe_layer_freq", 1),)),
    # moonshotai/Kimi-K2.5's text_config: model_type kimi_k2 with architectures DeepseekV3ForCausalLM (the same
    # DeepSeek-V3 decoder: Kimi-K2-Instruct's config.json says model_type kimi_k2 beside DeepseekV3ForCausalLM)
    "kimi_k2": Family(modelled_only=(("moe_layer_freq", 1),)),
    "laguna": Family(qk_norm=True, extras=("head_gate",), per_layer_heads="num_attention_heads_per_layer",
                     router_bias=True),
}
