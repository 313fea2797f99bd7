"""Toy keys of the types of roofline/catalogue/hf_archs_varied.py for the exactness harness (hf_exactness.TINY_BY_TYPE).

Shrink the keys TINY does not name (LongCat-Flash's expert width and zero-expert count, its top-k) so the toy stays
small while every mechanism remains: 3 zero experts beside 4 routed ones, top-2.
"""

from __future__ import annotations

from typing import Any

VARIED_TINY: dict[str, dict[str, Any]] = {
    "longcat_flash": {"expert_ffn_hidden_size": 24, "zero_expert_num": 3, "moe_topk": 2, "ffn_hidden_size": 88},
}
