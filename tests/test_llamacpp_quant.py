"""llama.cpp run 4's kit (validate/engines/llamacpp_quant.py): the test file, the perf-line and llama-quantize readers,
on llama.cpp's own output: tests/data/llamacpp/run4-cpu/ holds the CPU check (llama.cpp 0c1e570 built here with
-DGGML_CUDA=OFF; `llamacpp_run4.sh` with LLAMACPP_CASES=llamacpp_cases_run4_cpu.json on the tiny-llama GGUF, 2026-11-30)
and `llama-quantize --dry-run` of run 1's dummy F16 Llama-3.1-8B GGUF (written here by llamacpp_model.py) at nine file
types (dry-8b-TYPE.log, the tensor lines and totals kept). Figures below are read off those lines or counted by hand."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import pytest

from validate.engines import llamacpp_quant as quant

DATA = Path(__file__).parent / "data" / "llamacpp" / "run4-cpu"
MIB = 1 << 20
HEADER = """
    enum ggml_type {
        GGML_TYPE_F32     = 0,
        GGML_TYPE_F16     = 1,
        GGML_TYPE_Q4_0    = 2,
        // GGML_TYPE_Q4_2 = 4, support has been removed
        GGML_TYPE_Q8_0    = 8,
        GGML_TYPE_Q4_K    = 12,
        GGML_TYPE_Q6_K    = 14,
        GGML_TYPE_I32     = 26,
        GGML_TYPE_I64     = 27,
    };
    enum ggml_op {
        GGML_OP_NONE = 0,
        GGML_OP_ADD,
        GGML_OP_MUL,
        GGML_OP_RMS_NORM,
        GGML_OP_MUL_MAT,
        GGML_OP_SET_ROWS,
        GGML_OP_ROPE,
        GGML_OP_GLU,
        GGML_OP_COUNT,
    };
    enum ggml_glu_op {
        GGML_GLU_OP_REGLU,
        GGML_GLU_OP_GEGLU,
        GGML_GLU_OP_SWIGLU,
    };
"""


def test_enum_values_honour_explicit_numbers_and_comments():
    assert quant.enum_value(HEADER, "ggml_type", "GGML_TYPE_Q4_K") == 12
    assert quant.enum_value(HEADER, "ggml_type", "GGML_TYPE_I64") == 27
    assert quant.enum_value(HEADER, "ggml_glu_op", "GGML_GLU_OP_SWIGLU") == 2
    with pytest.raises(ValueError, match="GGML_TYPE_Q9"):
        quant.enum_value(HEADER, "ggml_type", "GGML_TYPE_Q9")


def test_test_file_lines_follow_make_test_cases_from_file():
    lines = quant.test_lines(HEADER)
    ops = quant.CASES["ops"]
    small = 7 * len(ops["small_n"])
    layer = len(ops["weights"]) * 4 * (len(ops["n_decode"]) + len(ops["n_prefill"]))
    assert len(lines) == small + layer + len(ops["lm_head_weights"]) * len(ops["lm_head_n"])
    names = [s.split()[-1] for s in lines]
    assert len(set(names)) == len(names)
    # RMS_NORM (op 3) out f32 [4096, 1], one param (eps's float bits), one f32 source, named
    eps = struct.unpack("<i", struct.pack("<f", 1e-5))[0]
    assert lines[0] == f"3 0 4096 1 1 1 1 {eps} 1 0 4096 1 1 1 0 0 0 0 rms_norm-n1"
    rope = next(s for s in lines if s.endswith("rope_k-n8")).split()
    # ROPE op 6, out [128, 8, 8], 11 params (mode 0, 128 dims, n_ctx_orig 131072, base 500000 as float bits), then
    # 3 sources: the f32 input, i32 positions [8], f32 freq factors [64]
    assert rope[:7] == ["6", "0", "128", "8", "8", "1", "11"]
    assert rope[7:12] == ["0", "128", "0", "0", "131072"]
    assert struct.unpack("<f", struct.pack("<i", int(rope[12])))[0] == 500000.0
    assert rope[18:] == ["3", "0", "128", "8", "8", "1", "0", "0", "0", "0", "26", "8", "1", "1", "1", "0", "0", "0",
                         "0", "0", "64", "1", "1", "1", "0", "0", "0", "0", "rope_k-n8"]
    setr = next(s for s in lines if s.endswith("set_rows-n64")).split()
    assert setr[:7] == ["5", "1", "1024", "32768", "1", "1", "0"] and setr[8] == "0" and setr[17] == "27"
    glu = next(s for s in lines if s.endswith("glu-n1")).split()
    assert glu[:9] == ["7", "0", "14336", "1", "1", "1", "2", "2", "0"]
    mm = next(s for s in lines if s.endswith("mm-q4_K-down-n2048")).split()
    assert mm[:8] == ["4", "0", "4096", "2048", "1", "1", "0", "2"] and mm[8:13] == ["12", "14336", "4096", "1", "1"]
    assert any(s.endswith("mm-q6_K-lm_head-n512") for s in lines)
    assert not any(s.endswith("mm-q4_0-lm_head-n1") for s in lines)


def test_perf_lines_key_on_the_case_name():
    got = quant.perf_lines((DATA / "ops.txt").read_text())
    assert len(got) == 15
    assert got["rms_norm-n1"] == {"supported": True, "runs": 270336, "us": 3.70, "kb": 32, "gib_s": 8.24}
    assert got["glu-n1"]["us"] == 5.57  # printed as SWIGLU(name=glu-n1,...)
    assert got["mm-q4_K-down-n1"]["us"] == 2696.88
    line = ("  MUL_MAT(name=mm-q6_K-qo-n1,type=f32,ne=[4096,1,1,1],op_params=[],sources=q6_K[4096,4096,1,1]): "
            "not supported")
    assert quant.perf_lines(line) == {"mm-q6_K-qo-n1": {"supported": False}}


def test_quantize_log_reads_every_tensor_and_the_total():
    tiny = quant.quant_log((DATA / "quant-Q4_K_M.log").read_text())
    assert len(tiny["tensors"]) == 21  # the tiny GGUF's 21 tensors
    out = tiny["tensors"]["output.weight"]
    assert out == {"shape": [256, 128256, 1, 1], "src": "f16", "type": "q6_K", "bytes": 25.69 * MIB}
    assert tiny["tensors"]["output_norm.weight"]["type"] == "f32"


def use_more_bits(i: int, n: int) -> bool:
    # src/llama-quant.cpp use_more_bits: the first and last eighth of the layers and every third between
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def test_dry_run_q4_k_m_of_the_8b_is_the_hand_count():
    # Q4_K_M by hand: Q4_K (144 B / 256) everywhere, Q6_K (210 B / 256) for output.weight and for attn_v and ffn_down
    # in use_more_bits layers (16 of 32), norms F32
    d = quant.quant_log((DATA / "dry-8b-Q4_K_M.log").read_text())
    assert len(d["tensors"]) == 291
    more = [i for i in range(32) if use_more_bits(i, 32)]
    assert len(more) == 16
    q6 = {"output.weight"} | {f"blk.{i}.attn_v.weight" for i in more} | {f"blk.{i}.ffn_down.weight" for i in more}
    assert {k for k, v in d["tensors"].items() if v["type"] == "q6_K"} == q6
    q4k, q6k = 144 / 256, 210 / 256
    vocab, h, kv, ff = 128256, 4096, 1024, 14336
    layer = (2 * h * h + 2 * h * kv + 3 * h * ff) * q4k + 2 * h * 4
    extra = (h * kv + h * ff) * (q6k - q4k)
    total = vocab * h * q4k + vocab * h * q6k + h * 4 + 32 * layer + 16 * extra
    assert d["quant_bytes"] == pytest.approx(total, abs=0.005 * MIB)  # printed to 0.01 MiB
    assert Counter(v["type"] for v in d["tensors"].values()) == {"q4_K": 193, "q6_K": 33, "f32": 65}


def test_dry_run_q8_0_and_q4_0_keep_norms_and_pick_the_output_type():
    q8 = quant.quant_log((DATA / "dry-8b-Q8_0.log").read_text())
    assert {v["type"] for k, v in q8["tensors"].items() if k.endswith("norm.weight")} == {"f32"}
    assert {v["type"] for k, v in q8["tensors"].items() if not k.endswith("norm.weight")} == {"q8_0"}
    # 8,030,261,248 parameters less 65 x 4096 norms at 34 B / 32, the norms at 4 B
    assert q8["quant_bytes"] == pytest.approx((8_030_261_248 - 65 * 4096) * 34 / 32 + 65 * 4096 * 4, abs=0.005 * MIB)
    q4 = quant.quant_log((DATA / "dry-8b-Q4_0.log").read_text())
    assert q4["tensors"]["output.weight"]["type"] == "q6_K"
    assert q4["tensors"]["token_embd.weight"]["type"] == "q4_0"


@pytest.mark.parametrize("preset", ["Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_M", "Q4_K_S", "Q4_0", "Q3_K_M", "Q2_K"])
def test_planner_gives_every_tensor_the_type_llama_quantize_chose(preset):
    # roofline.gguf_quant (rules read from src/llama-quant.cpp) against llama-quantize's own --dry-run of the 8B:
    # each of the 291 tensors' type, and the total it printed (to 0.01 MiB). Published files carry one more tensor
    # (rope_freqs.weight, 64 f32) that llamacpp_model.py does not write.
    from roofline.catalogue.store import load_model
    from roofline.gguf_quant import quantized_tensors

    dry = quant.quant_log((DATA / f"dry-8b-{preset}.log").read_text())
    ours = {t.name: t for t in quantized_tensors(load_model("Llama-3.1-8B"), preset)}
    assert {k: v["type"] for k, v in dry["tensors"].items()} == {k: t.type for k, t in ours.items()}
    assert sum(t.bytes for t in ours.values()) == pytest.approx(dry["quant_bytes"], abs=0.005 * MIB)
