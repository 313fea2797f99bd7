"""llama.cpp runs 17 and 18b's kits (validate/engines/llamacpp_ops17.py, cublas_first_call.py): the split layout's
lines, case keys read back from test-backend-ops' printed shapes, the compares on the committed runs (figures read off
their ops.txt, batched-bench tables and first-call JSON by hand)."""

from __future__ import annotations

from pathlib import Path

import pytest

from validate.engines import llamacpp_mech as mech
from validate.engines import llamacpp_ops17 as ops17

HEADER = "enum ggml_op {\n GGML_OP_NONE = 0,\n GGML_OP_DUP,\n GGML_OP_MUL_MAT,\n GGML_OP_FLASH_ATTN_EXT,\n};\n"
ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "validate/results/engines/nvidia-h200-llamacpp-2026-12-01-run17"
PRED = ROOT / "validate/results/engines/h200-llamacpp-run17-predicted.json"


def test_split_streams_are_the_fourth_dimension_of_every_source():
    line = ops17.test_lines(HEADER)[1].split()  # the first case's 17 streams of one row over 1,280 cells
    assert line[:7] == ["3", "0", "128", "32", "1", "17", "3"]  # FLASH_ATTN_EXT -> F32 [128, 32, 1, 17], 3 params
    srcs = " ".join(line[10:])  # n_src, then per source its type, ne0..3, nb0..3 (0: contiguous)
    assert srcs.startswith("4 0 128 1 32 17 0 0 0 0 1 128 1280 8 17 ")
    assert srcs.endswith("1 1280 1 1 17 0 0 0 0 -")


def test_case_keys_tell_streams_and_shapes_apart():
    assert mech.case_key("FLASH_ATTN_EXT", [(128, 1, 32, 17), (128, 1280, 8, 17), (128, 1280, 8, 17)]) \
        == "fa-n1-kv1280-s17"
    long_view = (128, 40960, 8, 1)
    assert mech.case_key("FLASH_ATTN_EXT", [(128, 512, 32, 1), long_view, long_view]) == "fa-n512-kv40960"
    assert mech.case_key("MUL_MAT", [(4096, 14336, 1, 1), (4096, 24, 1, 1)]) == "mm-gate_up-n24"
    assert mech.case_key("MUL_MAT", [(4096, 4097, 1, 1), (4096, 24, 1, 1)]) is None


def test_the_committed_run_compares_as_read_by_hand():
    import json
    rows = {(r["family"], r["case"]): r for r in ops17.compared(RUN, json.loads(PRED.read_text()))}
    # ops.txt: FLASH_ATTN_EXT ne=[128,32,1,16] 27.70 us/run, ne=[128,32,1,17] 31.97 us/run
    assert rows[("op", "fa-n1-kv1280-s16")]["measured"] == pytest.approx(27.70e-6)
    h3 = rows[("H", "H3 split 17 / 16 streams")]
    assert h3["measured"] == pytest.approx(31.97 / 27.70) and h3["ratio"] == "held"
    # hang-kvu32.log's table: |  1024 |  32 |  32 | 33792 | 2.382 | ... | 0.499 | ...
    assert rows[("hang T_PP", "kvu32")]["measured"] == pytest.approx(2.382)
    assert rows[("hang step", "kvu32")]["measured"] == pytest.approx(0.499 / 32)
    # test-backend-ops stalled after mm-gate_up-n20: down was never timed, so no layer sum at 17 columns
    assert rows[("op", "mm-down-n17")]["measured"] is None and rows[("layer", "n17")]["measured"] is None


def test_run18b_sums_each_process_first_calls_as_read_by_hand():
    import json

    from validate.engines import cublas_first_call as fc
    res = ROOT / "validate/results/engines/nvidia-h200-llamacpp-2026-12-01-run18b"
    lines = fc.report_ggml(res, json.loads((ROOT / "validate/results/engines/h200-llamacpp-run18b-predicted.json")
                                           .read_text()))
    # first-call-ggml-3.json, n 17: (11.888 - 0.069) + (0.055 - 0.020) + (31.384 - 0.081) + (0.248 - 0.057)
    # + (37.624 - 0.388) ms = 80.584 ms
    assert " 80.6 (" in next(s for s in lines if s.startswith("first-call-ggml-3"))
    assert lines[-2].startswith("H1 n 17's sum: median 105.0 ms: held")
    assert lines[-1].endswith("held")
