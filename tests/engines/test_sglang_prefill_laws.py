"""SGLang's served prefill kernels at their own laws (roofline/engines/timing.py 14.; derive_sglang.py --extend from
run 4's micro-extend.json, one H200, SGLang 0.5.17): the fused MoE's padded rows, FA3's extend call, q's copy."""

from functools import cache

import pytest

from roofline.costmodel.blocks import block_m, padded_rows
from roofline.lazy import sp

# SGLang 0.5.17's tuned config for E 128, N 768 on the H200 (configs/triton_3_6_0/E=128,N=768,device_name=NVIDIA_H200
# .json), BLOCK_SIZE_M per key
TABLE = {1: 16, 2: 16, 4: 16, 8: 16, 16: 16, 24: 16, 32: 16, 48: 16, 64: 16, 96: 16, 128: 16, 256: 32, 512: 64,
         1024: 128, 1536: 128, 2048: 128, 3072: 128, 4096: 128}
# the fitted constants, roofline/engines/profiles/sglang.json kernels.H200 and attention_flops.H200 (derive_sglang.py
# --extend on validate/results/engines/nvidia-h200-sglang-2026-11-30-run4/micro-extend.json, each case less 3.952 us)
ATTN_LATENCY_S, ATTN_ROW_S, ATTN_FLOPS = 7.7639e-06, 2.04718e-10, 606.3735e12
COPY_LATENCY_S, COPY_BW = 2.09969e-06, 1.755924e12
MOE_FLOPS, MOE_LATENCY_S = 508.0633e12, 21.08896e-06


def test_the_tile_height_is_the_configs_at_the_key_nearest_the_tokens():
    """fused_moe_triton_config.py:300 takes min(keys, key=|key - M|): 192 is as near 128 as 256, and min keeps the
    first (128: 16); 193 is nearer 256 (32); 768 ties 512 and 1,024 (512: 64); 8,192 is past the last key (4,096:
    128)."""
    assert [int(block_m(m, TABLE)) for m in (1, 192, 193, 384, 385, 768, 769, 8192)] == [16, 16, 32, 32, 64, 64, 128,
                                                                                          128]
    assert isinstance(block_m(sp.Symbol("M"), TABLE), sp.Piecewise)


def test_padded_rows_round_each_experts_rows_up_to_the_tile():
    """M tokens x top-8 over 128 experts, tiles of 128 rows. M 1,024: 64 rows an expert, each rounded up to one tile,
    128 x 128 = 16,384 (run 4's kernel padded to 16,384); the spread form 8,192 + 128 x 127 / 2 = 16,320 is less.
    M 4,096: 256 rows an expert, spread over tiles: 32,768 + 8,128 = 40,896 (run 4: 41,088); whole tiles 32,768 less.
    M 8,192: 65,536 + 8,128 = 73,664 (run 4: 73,216). A decode step of 16 tokens in tiles of 16 over the ~15.0
    experts its 128 rows touch: one tile each, 15.03 x 16 = 240.5 rows."""
    assert float(padded_rows(1024 * 8, 128, 128)) == 16384
    assert float(padded_rows(4096 * 8, 128, 128)) == 40896
    assert float(padded_rows(8192 * 8, 128, 128)) == 73664
    touched = 128 * (1 - (1 - 8 / 128) ** 16)  # 82.4: experts 16 tokens x top-8 reach, uniform routing
    assert float(padded_rows(128, sp.Float(touched), 16)) == pytest.approx(touched * 16, rel=1e-9)


@cache
def _rows(prompts: int) -> dict:
    """roofline's SGLang prefill op rows of Qwen3-30B-A3B on the H200 at the burst clock, `prompts` x 1,024 tokens."""
    from roofline.catalogue.loading import validate
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.costmodel.device import burst_options, roofline_for
    from roofline.engines.timing import engine_options
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    hw = load_hardware("H200")
    wl = validate(Workload, {"batch": 1, "context_tokens": 8192, "engine": "sglang", "page_tokens": 1,
                             "prefill_chunk_tokens": 8192}, "workload")
    roof = roofline_for(hw, tp=1, options=burst_options(hw, engine_options("sglang", hw)))
    pm = PhaseModel.build(load_model("Qwen3-30B-A3B"), hw, wl, parse_method("bf16"), roofline=roof)
    return {r["name"]: r for r in pm.rows("prefill", prompts, 1024)}


def test_fa3_extend_pays_a_call_a_row_and_the_causal_flops_at_its_rate():
    """Two prompts of 1,024 tokens, 32 query heads of 128: 7.764 us a call + 2 x 1,024 x 32 = 65,536 rows x 0.2047 ns
    (13.416 us) + 4 x 128 x 32 x 2 x 1,024 x 1,025 / 2 = 17,196,646,400 FLOPs / 606.37 TFLOP/s (28.360 us) = 49.54 us;
    roofline's row adds only the softmax's FP32 issue term (run 4 measured 50.16 us less the replay)."""
    row = _rows(2)["attention"]
    flops = 4 * 128 * 32 * 2 * 1024 * 1025 / 2
    by_hand = ATTN_LATENCY_S + 2 * 1024 * 32 * ATTN_ROW_S + flops / ATTN_FLOPS
    assert by_hand == pytest.approx(49.54e-6, rel=1e-3)
    assert row["time_s"] - row["issue_s"] == pytest.approx(by_hand, rel=1e-4)


def test_q_copy_is_a_strided_copy_at_its_own_law_and_none_for_one_row():
    """Four prompts of 1,024 tokens: q is 4,096 x 32 x 128 bf16, read and written: 67,108,864 bytes / 1.7559 TB/s
    (38.219 us) + 2.100 us = 40.32 us a layer (run 4: 40.37 us less the replay)."""
    row = _rows(4)["q_copy"]
    assert row["count"] == 48
    assert row["time_s"] == pytest.approx(COPY_LATENCY_S + 67108864 / COPY_BW, rel=1e-4)
    assert row["time_s"] == pytest.approx(40.32e-6, rel=1e-3)


def test_q_copy_in_decode_is_in_the_graph_at_the_same_law_and_none_at_one_sequence():
    """A decode step of 16 sequences copies 16 x 4,096 x 2 B read and written: 262,144 B / 1.7559 TB/s + 2.100 us
    = 2.249 us a layer (run 2c's B 16 census: 0.119 ms over 48 calls, 2.48 us a call); one sequence's q is one row,
    contiguous already: run 2c's B 1 census has no copy kernel."""
    from roofline.catalogue.store import load_hardware, load_model
    from roofline.costmodel.device import roofline_for
    from roofline.costmodel.graph import build_graph
    from roofline.engines.timing import engine_options
    from roofline.methods.registry import parse_method
    from roofline.units import B, L

    hw = load_hardware("H200")
    roof = roofline_for(hw, tp=1, options=engine_options("sglang", hw))
    graph = build_graph(load_model("Qwen3-30B-A3B"), parse_method("bf16"), "decode", engine_ops=("q_copy",))
    op = next(o for o in graph.ops if o.name == "q_copy")
    total = roof.op_times(op).total
    assert float(total.subs({B: 16, L: 2048})) == pytest.approx(COPY_LATENCY_S + 262144 / COPY_BW, rel=1e-6)
    assert float(total.subs({B: 1, L: 2048})) == 0.0
    assert float(total.subs({B: 2, L: 2048})) == pytest.approx(COPY_LATENCY_S + 32768 / COPY_BW, rel=1e-6)
    assert "q_copy" not in {o.name for o in build_graph(load_model("Qwen3-30B-A3B"), parse_method("bf16"),
                                                         "decode").ops}


def test_the_fused_moe_runs_its_padded_rows_at_the_measured_rate():
    """Eight prompts (M 8,192): 73,664 padded rows x 2 x 3 x 2,048 x 768 FLOPs / 508.06 TFLOP/s = 1,368.3 us, past the
    weights' stream (1.21 GB / 4.04 TB/s ~ 0.3 ms); the row adds its two calls' latency (21.09 us split over them)
    and the activation's issue term (run 4 measured 1,382.4 us less the replay)."""
    row = _rows(8)["experts"]
    compute = 73664 * 2 * 3 * 2048 * 768 / MOE_FLOPS
    assert compute == pytest.approx(1368.3e-6, rel=1e-4)
    assert row["time_s"] - row["issue_s"] - MOE_LATENCY_S == pytest.approx(compute, rel=1e-4)
