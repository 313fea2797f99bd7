"""Toy keys of the types of roofline/catalogue/hf_archs_varied.py for the exactness harness (hf_exactness.TINY_BY_TYPE).

Shrink the keys TINY does not name (LongCat-Flash's expert width and zero-expert count, its top-k; ERNIE-4.5-VL's
two expert widths and RoPE sections; Muse Spark's expert space; xLSTM's widths) so the toy stays
small while every mechanism remains: 3 zero experts beside 4 routed ones, top-2.
"""

from __future__ import annotations

from typing import Any

VARIED_TINY: dict[str, dict[str, Any]] = {
    # text and vision expert widths; Ernie4_5_VLMoeTextRotaryEmbedding's (h, w, t) sections sum to the toy's half
    # head_dim 40 / 4 / 2 = 5 (the default [22, 22, 20] sums to 64)
    "ernie4_5_vl_moe_text": {"moe_intermediate_size": [40, 24],
                             "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default",
                                                 "mrope_section": [2, 2, 1]}},
    # MuseSparkMoE's expert space: m 20, I 60, so the Model's expert width m I / d = 30 differs from both
    "muse_spark_text": {"moe_hidden_size": 20, "moe_intermediate_size": 60},
    # xLSTMCache sizes the state by q / k / v widths rounded up to 64: hidden 128 keeps them multiples (64, 128)
    "xlstm": {"hidden_size": 128, "num_heads": 4},
    "longcat_flash": {"expert_ffn_hidden_size": 24, "zero_expert_num": 3, "moe_topk": 2, "ffn_hidden_size": 88},
}
