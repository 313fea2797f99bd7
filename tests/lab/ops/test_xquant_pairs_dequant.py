"""xquant dequant="pairs" (validate/ops/xquant/deq_pairs.py): fused and materialized XQuant with the 2-bit latent
dequantized two bf16 to a register, run under the interpreter (its EMU path: the inline PTX's values from fp32
arithmetic, in the same operand column order), against the float32 torch reference on the same dequantized latents
with the fp32 path's tolerances, and against the fp32 path itself."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import pytest  # noqa: E402
import torch  # noqa: E402

from validate.common.testing import relative_rms  # noqa: E402
from validate.ops.xquant import launch as xk  # noqa: E402
from validate.ops.xquant import reference as xref  # noqa: E402


def small_layer(batch, kv_heads, dim, latent, context, group, mha, bits=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    spread = torch.exp(0.5 * torch.randn(1, 1, latent, generator=g))  # latent channels differ in range
    x_k = torch.randn(batch, context, latent, generator=g) * spread
    x_v = None if mha else torch.randn(batch, context, latent, generator=g) * spread
    w = [torch.randn(latent, kv_heads * dim, generator=g) * latent ** -0.5 for _ in "kv"]
    return xk.build_layer(x_k, x_v, *w, kv_heads, bits, group), g


# (batch, q heads, kv heads, d_h, latent, context, group, MHA, splits, block_n, r_block): GQA with a 5-token K window
# and a V tile of one group (r = G = 32), a V tile over two groups (r 64, G 32) with uneven splits and a 4-token
# window, MHA (K and V both per-token codes in pair order)
SHAPES = [
    (2, 8, 2, 32, 64, 37, 32, False, 2, 32, 32),
    (1, 8, 2, 32, 128, 100, 32, False, 3, 16, 64),
    (2, 4, 4, 16, 64, 45, 32, True, 2, 16, 32),
]


@pytest.mark.parametrize(("batch", "heads", "kv_heads", "dim", "latent", "context", "group", "mha", "splits",
                          "block_n", "r_block"), SHAPES)
def test_fused_pairs_matches_reference(batch, heads, kv_heads, dim, latent, context, group, mha, splits, block_n,
                                       r_block) -> None:
    layer, g = small_layer(batch, kv_heads, dim, latent, context, group, mha)
    q = torch.randn(batch, heads, dim, generator=g).to(torch.bfloat16)
    work = {}
    xk.decode(q, layer, splits, None, work, block_n, r_block, dequant="pairs")
    for buf in ("m", "l", "acc"):  # every partial is rewritten
        work[buf].fill_(float("nan"))
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16)
    got = xk.decode(q, layer, splits, out, work, block_n, r_block, dequant="pairs")
    assert torch.isfinite(got).all()
    assert relative_rms(got, xref.reference(q, layer)) < 1e-2
    # the fp32 path's output up to the bf16 rounding of x, the scale and the centre (under the interpreter the fp32
    # path rounds none of them); a column order that did not match W's rows would be O(1) off
    assert relative_rms(got, xk.decode(q, layer, splits, None, {}, block_n, r_block)) < 1e-2


@pytest.mark.parametrize(("batch", "heads", "kv_heads", "dim", "latent", "context", "group", "mha", "splits",
                          "block_n", "r_block"), SHAPES)
def test_materialized_pairs_matches_reference(batch, heads, kv_heads, dim, latent, context, group, mha, splits,
                                              block_n, r_block) -> None:
    layer, _ = small_layer(batch, kv_heads, dim, latent, context, group, mha, seed=1)
    shape = (batch, kv_heads, context, dim)
    kv = tuple(torch.full(shape, float("nan"), dtype=torch.bfloat16) for _ in "kv")
    k, v = xk.materialize(layer, kv, block_n, r_block, dequant="pairs")
    assert torch.isfinite(k).all() and torch.isfinite(v).all()
    k_ref, v_ref = xref.remat_reference(layer)
    assert relative_rms(k, k_ref) < 1e-2 and relative_rms(v, v_ref) < 1e-2
    k32, v32 = xk.materialize(layer, None, block_n, r_block)
    assert relative_rms(k, k32) < 1e-2 and relative_rms(v, v32) < 1e-2


def test_pairs_refuses_other_layouts() -> None:
    layer, g = small_layer(1, 2, 32, 64, 37, 32, False, bits=4)
    q = torch.randn(1, 8, 32, generator=g).to(torch.bfloat16)
    with pytest.raises(ValueError, match="pairs"):
        xk.decode(q, layer, 2, None, {}, 32, 32, dequant="pairs")
    with pytest.raises(ValueError, match="pairs"):
        xk.materialize(small_layer(1, 2, 32, 64, 37, 32, False)[0], None, 32, 8, dequant="pairs")
    with pytest.raises(ValueError, match="dequant"):
        xk.decode(q, layer, 2, None, {}, 32, 32, dequant="halves")
    with pytest.raises(ValueError, match="dequant"):
        xk.decode(q, layer, 2, None, {}, 32, 32, variant="shared", dequant="pairs")
