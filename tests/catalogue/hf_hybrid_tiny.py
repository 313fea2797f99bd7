"""Toy sizes of the hybrid recurrent types' own keys for the exactness harness (hf_exactness.TINY_BY_TYPE takes
them): every mechanism kept, only smaller, sizes chosen so that parameter groups do not coincide in count."""

from __future__ import annotations

from typing import Any

_MAMBA2 = {"mamba_n_heads": 5, "mamba_d_head": 16, "mamba_expand": 2, "mamba_d_state": 8, "mamba_n_groups": 1,
           "hidden_size": 40}

HYBRID_TINY: dict[str, dict[str, Any]] = {
    "bamba": _MAMBA2 | {"attn_layer_indices": [1, 3]},
    "granitemoehybrid": _MAMBA2 | {"shared_intermediate_size": 56,
                                   "layer_types": ["linear_attention", "full_attention"] * 2},
}
HYBRID_TINY |= {
    # Lfm2MLP: int(2 x 130 / 3) = 86, rounded up to block_multiple_of 8: 88
    "lfm2": {"layer_types": ["conv", "full_attention"] * 2, "intermediate_size": 130, "block_multiple_of": 8},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"] * 2, "num_dense_layers": 1},
}
# Nemotron-H: one of each block (Mamba-2, attention, MLP, MoE), twice; experts 40 wide, the shared MLP 56
HYBRID_TINY["nemotron_h"] = {
    "layers_block_type": ["linear_attention", "full_attention", "mlp", "moe"] * 2, "mamba_num_heads": 5,
    "mamba_head_dim": 16, "ssm_state_size": 8, "n_groups": 1, "moe_shared_expert_intermediate_size": 56,
    "n_routed_experts": 4, "sliding_window": None}
# MiniMax: lightning attention at layers 1 and 3 (MiniMaxConfig's default pattern), no sliding window
HYBRID_TINY["minimax"] = {"sliding_window": None, "block_size": 4}
# Kimi Linear: KDA at 0, 2, MLA at 1, 3; 2 KDA heads of 16; the first layer dense (mlp_layer_types)
HYBRID_TINY["kimi_linear"] = {
    "layer_types": ["linear_attention", "full_attention"] * 2, "linear_num_heads": 2, "linear_head_dim": 16,
    "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"], "num_experts": 4, "num_experts_per_token": 2,
    "q_lora_rank": None, "num_key_value_heads": 4}
# OLMo Hybrid: Gated DeltaNet at 0 and 2 (2 key heads, 4 value heads of 16), attention at 1 and 3
HYBRID_TINY["olmo_hybrid"] = {"layer_types": ["linear_attention", "full_attention"] * 2}
# LFM3 (sandwich norms and per-head gates on by default): conv, sliding (window 16), conv, full; conv kernel 5
HYBRID_TINY["lfm3"] = {"layer_types": ["conv", "sliding_attention", "conv", "full_attention"], "conv_L_cache": 5}
# RecurrentGemma: recurrent, recurrent, attention (block_types default), the window above the prompt
HYBRID_TINY["recurrent_gemma"] = {"attention_window_size": 16, "lru_width": 40}

# transformers keeps these states on the modules themselves, not in the returned cache (RecurrentGemma's
# RecurrentGemmaRecurrentBlock.conv1d_state and RecurrentGemmaRglru.recurrent_states)
MODULE_STATES = ("conv1d_state", "recurrent_states")


def module_state_bytes(model) -> int:
    """Bytes of the recurrent states a model holds on its modules (MODULE_STATES), each tensor once."""
    import torch

    total = 0
    for module in model.modules():
        for name in MODULE_STATES:
            value = getattr(module, name, None)
            if isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
    return total
