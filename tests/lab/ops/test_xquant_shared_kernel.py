"""shared_kernel's structure and prediction (validate/ops/xquant/shared_model.py; no GPU, no triton): its launches
counted by hand, its sm_90 structure beside fused_kernel's (the same remat, fewer instructions per token and KV head:
the latent dequantized once per HPP heads), and its prediction as the roofline's attention op."""

from __future__ import annotations

import pytest

from validate.model import kernel_structure as ks
from validate.model.hardware import load_hardware
from validate.ops.xquant import cases
from validate.ops.xquant import shared_model as sm
from validate.ops.xquant.structure import per_token


def test_launches_by_hand() -> None:
    s = {"block_n": 128, "heads_per_program": 2}
    # GQA b8 L 8192: 64 blocks of 128 tokens, 64 splits of one block; 8 x 8/2 = 32 program columns
    assert sm.launches(cases.params("fused", 8, 8192), s) == [("shared", 32 * 64, 32 * 64)]
    # L 4196 = 4096 quantized + 100 fp16 window tokens: 32 one-block splits, then one window program per column
    assert sm.launches(cases.params("fused", 1, 4196), s) == [("shared", 4 * 32, 4 * 32), ("shared_tail", 4, 4)]
    # L 100 < G: only the window; MHA (32 KV heads, per-token X): 16 column pairs, L 1024 = 8 blocks
    assert sm.launches(cases.params("fused", 1, 100), s) == [("shared_tail", 4, 4)]
    assert sm.launches(cases.params("mha_fused", 1, 1024), s) == [("mha_shared", 16 * 8, 16 * 8)]


@pytest.mark.parametrize(("old", "new"), [("fused", "shared"), ("fused_tail", "shared_tail"),
                                          ("mha_fused", "mha_shared")])
def test_shared_structure_beside_fused(old, new) -> None:
    doc = ks.kernels("xquant")
    a, b = doc["kernels"][old], doc["kernels"][new]
    assert b["kernel"] == "shared_kernel" and b["heads_per_program"] >= 2 and b["registers"] <= 255
    assert b["shared_bytes"] + ks.RESERVED_SHARED <= 227 * 1024
    pa, pb = per_token(a), per_token(b)
    # the same remat wgmma and attention mma.sync work per token and KV head
    assert pb["hgmma_flops"] == pa["hgmma_flops"] == 2 * 2 * a["latent"] * doc["head_dim"]
    assert pb["hmma_flops"] == pa["hmma_flops"]
    # the dequantization shared by HPP heads: fewer integer and FP32 instructions per token and head
    assert pb["int"] < 0.7 * pa["int"] and pb["fp"] < 0.7 * pa["fp"] and pb["instructions"] < 0.7 * pa["instructions"]


def test_prediction_is_the_attention_op_with_the_shared_work() -> None:
    hw = load_hardware("H100-SXM").model_copy(update={"measured": None})
    doc = ks.kernels("xquant")
    p = cases.params("fused", 32, 65536)
    row = sm.predict_shared(p, hw, doc)
    s = doc["kernels"]["shared"]
    steps = 32 * 4 * 65536 // 128
    work = ks.executed_work(s, steps * ks.wave_factor(32 * 4 * 64, hw.sm_count), 1.0)
    # the wgmma FLOPs alone at the datasheet peak bound the time from below
    from roofline.costmodel import roofline_for

    assert row["time_s"] >= work["matmul_flops"] / roofline_for(hw).matmul_peak("bf16") * (1 - 1e-9)
    assert row["time_s"] <= row["compute_s"] + row["memory_s"] + row["issue_s"] + row["shared_s"] + 1e-3


def test_acc_up_structure_new_against_old() -> None:
    # per token, all channels: the same up-projection FLOPs (2 x delta width x d), now on wgmma instead of mma.sync
    doc = ks.kernels("xquant")
    new, old = doc["kernels"]["acc16_up"], doc["kernels"]["acc16_up_old"]

    def per_token(s: dict) -> dict:
        scale = s["warps"] * (s["d"] // s["block_d"]) / s["block_t"]
        return {k: v * scale for k, v in s["executed"].items() if not isinstance(v, dict)}

    pn, po = per_token(new), per_token(old)
    assert pn["hgmma_flops"] == po["hmma_flops"] == 2 * new["delta_width"] * new["d"] and pn["hmma"] == po["hgmma"] == 0
    assert pn["instructions"] < po["instructions"] / 4 and new["registers"] <= 255 and new["stack_bytes"] == 0
