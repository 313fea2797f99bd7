"""quant_attention's reference: attention in fp32 torch on the cache's dequantized values."""

from __future__ import annotations

import torch

from validate.common.reference import attend
from validate.ops.quant_attention.cache import QuantCache, permute_channels, unpermute_channels


def reference(q: torch.Tensor, cache: QuantCache) -> torch.Tensor:
    """The kernel's result in torch on the same dequantized values: attention in the stored (permuted)
    channel order, the query permuted like K and the output un-permuted like V (SKVQ folds both into
    W_q and W_o)."""
    kf, vf = cache.dequantized
    if cache.perm_k is None:
        return attend(q, kf, vf)
    return unpermute_channels(attend(permute_channels(q, cache.perm_k), kf, vf), cache.perm_v)
