"""Toy keys of the types catalogue.hf_archs_shared imports, for the exactness harness (hf_exactness.TINY_BY_TYPE).

Inkling's toy keeps every mechanism of the default config at TINY sizes: sliding layers whose heads differ from the
full layers' in count and width (8 heads, 4 KV heads of 12 against 4 / 2 of 16: kv widths 48 vs 32), a relative
bias extent (32) other than the window (16), one leading dense layer then MoE layers with one shared expert.
"""

from __future__ import annotations

from typing import Any

SHARED_TINY: dict[str, dict[str, Any]] = {
    "inkling_text": {
        "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4, "swa_head_dim": 12, "sliding_window_size": 16,
        "d_rel": 4, "rel_extent": 32, "n_shared_experts": 1,
        "layer_types": ["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid_sliding"],
        "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
    },
    # Inkling-2: the same head shapes, one full layer after two sliding ones (layer 0 has no attention-residual
    # query), a head of 240 rows under the 250-row embedding
    "inkling2_text": {
        "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4, "swa_head_dim": 12, "sliding_window_size": 16,
        "d_rel": 4, "rel_extent": 32, "unpadded_vocab_size": 240,
        "layer_types": ["hybrid_sliding", "hybrid_sliding", "hybrid", "hybrid_sliding"],
    },
    # Inkling-2-Loop: layers 2 and 3 (blocks of 2) looped 3 times, gates of rank 8: 8 layer applications
    "inkling2_loop_text": {
        "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4, "swa_head_dim": 12, "sliding_window_size": 16,
        "d_rel": 4, "rel_extent": 32, "unpadded_vocab_size": 240, "n_layers_per_attn_res_block": 2,
        "loop_layer_index_start": 2, "loop_layer_index_end": 4, "loop_num_passes": 3, "loop_gate_rank": 8,
        "layer_types": ["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"],
    },
}
SHARED_TINY["dory"] = {
    # Dory: two input layers, two recurrent layers looped twice, two output layers (8 applications); the config
    # class halves the released layout's counts, so the toy gives the doubled ones with 'mlp' entries
    "num_hidden_layers": 12, "n_input_layers": 4, "n_output_layers": 4, "n_recurrent_layers": None,
    "n_recurrent_loops": 2,
    "layer_types": [kind for _ in range(3) for pair in ("sliding_attention", "full_attention")
                    for kind in (pair, "mlp")],
}
SHARED_TINY["hrm_text"] = {
    # HRM-Text: 2 layers per stack, 2 H cycles of 2 L passes and one H pass: 12 cache slots, 4 stored layers
    "num_hidden_layers": 2, "num_layers_per_stack": None, "H_cycles": 2, "L_cycles": 2, "attention_bias": True,
}
