"""Toy keys of the Gemma-3n family for the exactness harness (tests/catalogue/hf_exactness.py).

Gemma3nTextConfig.kv_sharing_modes needs every layer type of the shared layers among the earlier ones, so the toy
lists its layer_types (sliding, full, sliding, full, sliding, full) and shares the last 2 layers' caches (layer 4
reuses layer 2's, layer 5 layer 3's); the per-layer-input, LAuReL and AltUp widths are shrunk to sizes no other
group has (12, 8, 3) and the per-layer vocabulary to 230 (below vocab_size 250, as 262,144 is below 262,400).
"""

from __future__ import annotations

_LAYERS = ["sliding_attention", "full_attention"] * 3

GEMMA_TINY = {
    "gemma3n_text": {"num_hidden_layers": 6, "layer_types": _LAYERS, "num_kv_shared_layers": 2,
                     "hidden_size_per_layer_input": 12, "vocab_size_per_layer_input": 230, "laurel_rank": 8,
                     "altup_num_inputs": 3},
}
# Gemma-4: the full layers' global_head_dim (512 by default) shrunk to 24 (Gemma4TextConfig pops it into
# per_layer_config); the per-layer inputs as Gemma-3n's
GEMMA_TINY["gemma4_text"] = {"layer_types": ["sliding_attention", "full_attention"] * 2, "global_head_dim": 24,
                             "hidden_size_per_layer_input": 12, "vocab_size_per_layer_input": 230}
GEMMA_TINY["gemma4_unified_text"] = {"layer_types": ["sliding_attention", "full_attention"] * 2, "global_head_dim": 24}
