"""fp16_attention: the split-K decode kernel against its torch reference under the interpreter, its
sm_90 shared memory, and its bytes from the roofline's own attention op."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run on the CPU

import pytest  # noqa: E402
import torch  # noqa: E402

from roofline.validation.results_file import Case  # noqa: E402
from validate.common.flash_decode import decode_attention, decode_splits  # noqa: E402
from validate.common.sm90 import H100_SHARED_BYTES, shared_bytes  # noqa: E402
from validate.common.testing import relative_rms  # noqa: E402
from validate.model.families import fp16_attention as predicted  # noqa: E402
from validate.ops.fp16_attention import cases as fam  # noqa: E402
from validate.ops.fp16_attention.reference import reference  # noqa: E402

# (batch, query heads, kv heads, context, head_dim, splits, block_n): non-powers of two in the context
# and the GQA group (3), groups 4 and 1 (MHA), one split and uneven splits
SHAPES = [
    (2, 8, 2, 37, 32, 1, 16),
    (1, 4, 4, 100, 16, 3, 16),
    (3, 8, 2, 300, 64, 4, 32),
    (2, 6, 2, 77, 32, 5, 16),
]


@pytest.mark.parametrize(("batch", "heads", "kv_heads", "context", "dim", "splits", "block_n"), SHAPES)
def test_kernel_matches_reference(batch, heads, kv_heads, context, dim, splits, block_n) -> None:
    gen = torch.Generator().manual_seed(1234 + context)
    q = torch.randn(batch, heads, dim, generator=gen).to(torch.bfloat16)
    k = torch.randn(batch, kv_heads, context, dim, generator=gen).to(torch.bfloat16)
    v = torch.randn(batch, kv_heads, context, dim, generator=gen).to(torch.bfloat16)
    out = torch.full((batch, heads, dim), float("nan"), dtype=torch.bfloat16)
    decode_attention(q, k, v, splits, block_n, out=out)
    assert not out.isnan().any(), "unwritten output elements"
    assert relative_rms(out, reference(q, k, v)) < 2e-2


def test_reference_is_softmax_attention() -> None:
    # one KV head, one query head, two tokens: o = softmax([q.k0, q.k1] / sqrt(d)) @ v
    q = torch.tensor([[[1.0, 0.0, 0.0, 0.0]]])
    k = torch.tensor([[[[2.0, 0, 0, 0], [0.0, 0, 0, 0]]]])
    v = torch.tensor([[[[1.0, 0, 0, 0], [0.0, 1, 0, 0]]]])
    w = torch.softmax(torch.tensor([1.0, 0.0]), 0)  # 2 / sqrt(4) = 1
    assert torch.allclose(reference(q, k, v)[0, 0], torch.tensor([w[0], w[1], 0, 0]))


def test_shared_memory_fits_h100() -> None:
    results = shared_bytes(fam.sm90_specs())
    assert [r["kernel"] for r in results] == ["split_kernel", "reduce_kernel"]
    for r in results:
        assert 0 <= r["shared"] <= H100_SHARED_BYTES, r


def test_splits_cover_the_context() -> None:
    assert decode_splits(8, 4096, 132, 128) == 32  # wants 33, at most 4096 / 128
    assert decode_splits(512, 131072, 132, 128) == 1
    assert decode_splits(8, 131072, 132, 128) == 33


def test_case_work_is_the_roofline_attention_op() -> None:
    # Llama-3.1-8B heads, bf16: K and V read (2 x 4096 x 8 x 128 x 2 bytes) + q read + o written (32 x 128 x 2)
    # + 2 splits' fp32 partials (32 x 2 x 130 x 4) written and read by the reduce, which merges them (3 FLOPs each)
    case = fam.FP16Attention().cases(quick=True)[0]
    assert (case.params["batch"], case.params["context"]) == (1, 4096)
    assert predicted.work(case.params) == {"bytes": 2 * 4096 * 8 * 128 * 2 + 2 * 32 * 128 * 2 + 2 * 32 * 2 * 130 * 4,
                              "flops": 2 * 32 * 4096 * 256 + 5 * 32 * 4096 + 3 * 32 * 2 * 128}


def test_grid_and_prediction_shape() -> None:
    family = fam.FP16Attention()
    full = family.cases(quick=False)
    assert len(full) == 16 and len(family.cases(quick=True)) < len(full)
    from validate.model.hardware import load_hardware

    hw = load_hardware("H100-SXM").model_copy(update={"measured": None})
    pred = family.predict(Case("fp16_attention", "x", full[-1].params), hw)
    assert pred["bound"] == "memory" and pred["time_s"] == pytest.approx(pred["bytes"] / 3.35e12)
