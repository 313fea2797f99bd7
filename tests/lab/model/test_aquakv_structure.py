"""aquakv's kernel structure (validate/ops/aquakv/structure.py -> validate/model/structure/aquakv.json) and the
family's prediction from it (validate.model.families.aquakv): launches, wgmma operand bytes, the clock the
on-chip rates run at, and the ceiling that binds. Pure Python: no GPU, no compile."""


import pytest

from validate.model import kernel_structure as ks
from validate.model.families import aquakv as fam
from validate.model.hardware import load_hardware
from validate.ops.aquakv.structure import wgmma_shared_bytes

PARAMS = {"method": "aquakv-2", "num_heads": 24, "num_kv_heads": 8, "head_dim": 128}
D = 1024  # d_kv of Llama-3.2-3B: 8 KV heads x 128


def case(batch: int, context: int) -> dict:
    return {**PARAMS, "batch": batch, "context": context}


# two HGMMA lines in cuobjdump's format: A by descriptor (A and B read from shared memory), A from registers (B only)
SASS = """  /*0db0*/  HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8].tnspB, RZ, !UPT ;  /* 0x43e00000081879f0 */
    /* 0x000fde000c7018ff */
  /*0dd0*/  HGMMA.64x128x16.F32.BF16 R24, R88, gdesc[UR12].tnspB, R24 ;  /* 0x43e000000c1879f0 */
    /* 0x000fde000c7018ff */
"""


def test_wgmma_shared_bytes_by_operand() -> None:
    # a warpgroup's 64x256x16: A 64x16 + B 16x256 bf16 = 10,240 B; 64x128x16 with A in registers: B 16x128 = 4,096 B;
    # one warp's share is a quarter
    assert wgmma_shared_bytes(SASS) == (10240 + 4096) // 4


def test_compiled_wgmma_bytes_are_the_tiles_operands() -> None:
    # per program, the tile's operands pass shared memory once per 64-row warpgroup: (64 x BLOCK_K A + BLOCK_K x
    # BLOCK_N B) x 2 B per k-step, d_kv / BLOCK_K k-steps per input (K^: 1 input, V^: 2)
    kernels = ks.kernels("aquakv")["kernels"]
    assert {"small_k", "small_v", "big_k", "big_v"} <= set(kernels)
    for k in kernels.values():
        per_step = (k["block_m"] // 64) * (64 * k["block_k"] + k["block_k"] * k["block_n"]) * 2
        assert k["executed"]["wgmma_shared_bytes"] * k["warps"] == per_step * k["inputs"] * D // k["block_k"]
        assert k["executed"]["hgmma_flops"] * k["warps"] == 2 * k["block_m"] * k["block_n"] * k["inputs"] * D
        assert k["executed"]["spills"] == 0


@pytest.mark.parametrize(("batch", "context", "rows", "launch"), [
    (1, 1024, 896, ("small", 14 * 8)),  # l_q = 1024 - 4 sinks - 124 of the 128-token buffer; 64 x 128 tiles
    (8, 65536, 8 * 65408, ("big", 4088 * 4)),  # from 32,768 rows on: 128 x 256 tiles
])
def test_launches(batch: int, context: int, rows: int, launch: tuple) -> None:
    assert fam.rows(case(batch, context)) == rows
    size, programs = launch
    assert fam.launches(case(batch, context)) == [(f"{size}_k", programs), (f"{size}_v", programs)]


def test_structured_prediction_work_and_ceiling() -> None:
    hw = load_hardware("H100-SXM")
    m = hw.measured
    p = case(1, 4096)  # 3,968 rows: 62 x 8 = 496 small-tile programs per launch, 4 waves of 132 SMs
    pred = fam.predict_params(p, hw)
    assert pred["structure"] == ["small_k", "small_v"]
    assert pred == {**pred, **fam.work(p)}  # the reported work stays the op's algorithmic bytes and FLOPs
    steps = 496 * (4 * 132 / 496)
    k, v = (ks.kernels("aquakv")["kernels"][n] for n in ("small_k", "small_v"))
    shared = sum(steps * s["warps"] * (s["executed"]["wavefronts"] * 128 + s["executed"]["wgmma_shared_bytes"])
                 for s in (k, v))
    assert pred["shared_s"] == pytest.approx(shared / m.shared_memory_bytes_per_s)  # the spec's (boost) clock
    # matmul: the two launches' GEMMs 2 x 64 x 128 x (1 + 2) d_kv per program at the measured GEMM rate
    mma = steps * 2 * 64 * 128 * 3 * D / m.gemm_flops_per_s["bf16"]
    # issue: the longest of the dispatch (every instruction at the measured mixed rate) and the pipes (ALU: integer,
    # bf16 packs, I2F; FMA: FP32; XU: F2I, MUFU), each class at its rate (kernel_structure.class_rates)
    rates = ks.class_rates(hw)

    def warp_issue(c: dict) -> float:
        alu = 32 * (c.get("int", 0) / rates["int"] + c.get("f2fp", 0) / rates["f2fp"] + c.get("i2f", 0) / rates["i2f"])
        xu = 32 * (c.get("f2i", 0) / rates["f2i"] + c.get("mufu", 0) / rates["mufu"])
        return max(32 * sum(c.values()) / rates["dispatch"], alu, 32 * c.get("fp", 0) / rates["fp"], xu)

    issue = sum(steps * s["warps"] * warp_issue(s["executed"]["classes"]) for s in (k, v))
    assert pred["compute_s"] == pytest.approx(mma + issue)
    # L2: beyond the op's own bytes, each of the 8 column tiles (BLOCK_N 128 of d_kv 1024) re-reads the 3,968 rows of
    # bf16 activations (K^: 1 input, V^: 2) and each of the 62 row tiles (BLOCK_M 64) the bf16 weight [inputs x d_kv,
    # d_kv]: 7 x 3968 x 1024 x 2 + 61 x 1024 x 1024 x 2 = 184,811,520 B (K^), twice that (V^)
    reread = 3 * (7 * 3968 * D * 2 + 61 * D * D * 2)
    assert reread == 3 * 184_811_520
    assert pred["l2_s"] == pytest.approx((fam.work(p)["bytes"] + reread) / m.l2_bytes_per_s)
    ceilings = {"shared-memory": pred["shared_s"], "compute": pred["compute_s"], "l2": pred["l2_s"]}
    assert pred["bound"] == max(ceilings, key=ceilings.get)
    # the catalogue's measured section charges each kernel the op launches its fixed time on top (one: the op's count)
    assert pred["time_s"] == pytest.approx(m.kernel_overhead_s + max(*ceilings.values(), pred["memory_s"]))


def test_unknown_heads_fall_back_to_the_op() -> None:
    hw = load_hardware("H100-SXM")
    p = {**case(1, 4096), "num_kv_heads": 4}  # a compile at 8 KV heads says nothing about 4
    assert fam.structured(p, hw) is None
    assert "structure" not in fam.predict_params(p, hw)
