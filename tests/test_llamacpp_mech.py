"""llama.cpp run 2's kit (validate/engines/llamacpp_mech.py, llamacpp_client.py --greedy): the test-backend-ops test
file, the perf-line parser, the per-op roofline law and the compare, on text written to the tool's printf formats."""

from __future__ import annotations

import json
import struct
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from validate.engines import llamacpp_client
from validate.engines import llamacpp_mech as mech

HEADER = """
    enum ggml_op {
        GGML_OP_NONE = 0,

        GGML_OP_DUP,
        GGML_OP_ADD, // a comment, with a comma
        GGML_OP_MUL_MAT,
        GGML_OP_FLASH_ATTN_EXT,

        GGML_OP_COUNT,
    };
"""

# Captured: `test-backend-ops perf -b CPU --test-file F` of a CPU build of the same tree (0c1e570, 2026-11-30), F the
# first two MUL_MAT lines and the two kv-512 attention lines of `testfile`; ANSI colours kept as printed
# (tests/data/llamacpp/ops_perf_cpu.txt).
CAPTURED = (Path(__file__).parent / "data" / "llamacpp" / "ops_perf_cpu.txt").read_text()
# print_perf_console's line where the backend refuses (tests/test-backend-ops.cpp: printf("not supported\\n"))
UNSUPPORTED = ("  FLASH_ATTN_EXT(type=f32,ne=[128,32,1,1],op_params=[0:1035273459],sources=f32[128,1,32,1],"
               "f16[128,8192,8,1],f16[128,8192,8,1],f16[8192,1,1,1]): not supported\n")
PERF_TEXT = CAPTURED + UNSUPPORTED


def test_op_numbers_come_from_the_header_enum():
    assert mech.ggml_op_number(HEADER, "GGML_OP_MUL_MAT") == 3
    assert mech.ggml_op_number(HEADER, "GGML_OP_FLASH_ATTN_EXT") == 4


def test_test_file_lines_follow_make_test_cases_from_file():
    lines = mech.test_lines(HEADER)
    # 4 shapes x 10 n, lm_head at its 8 n <= 512, 2 x 5 attention cases
    assert len(lines) == 4 * 10 + 8 + 10
    assert lines[0] == "3 0 4096 1 1 1 0 2 1 4096 4096 1 1 0 0 0 0 0 4096 1 1 1 0 0 0 0 -"
    down_8192 = "3 0 4096 8192 1 1 0 2 1 14336 4096 1 1 0 0 0 0 0 14336 8192 1 1 0 0 0 0 -"
    assert down_8192 in lines
    assert not any(" 128256 2048 " in s or "4096 128256 1 1 0 0 0 0 0 4096 2048" in s for s in lines)
    assert lines[-1].startswith("3 0 128256 512 1 1 0 2 1 4096 128256 ")
    fa = lines[4 * 7 + 9].split()
    scale = struct.unpack("<f", struct.pack("<i", int(fa[7])))[0]
    assert fa[:7] == ["4", "0", "128", "32", "512", "1", "3"] and scale == pytest.approx(128 ** -0.5)
    assert fa[10:] == ["4", "0", "128", "512", "32", "1", "0", "0", "0", "0", "1", "128", "8192", "8", "1",
                       "0", "0", "0", "0", "1", "128", "8192", "8", "1", "0", "0", "0", "0",
                       "1", "8192", "512", "1", "1", "0", "0", "0", "0", "-"]


def test_perf_lines_read_the_console_format():
    got = mech.perf_lines(PERF_TEXT)
    assert got == {"mm-qo-n1": {"supported": True, "runs": 512, "us": 2724.82, "kb": 32800, "gib_s": 11.48},
                   "mm-qo-n2": {"supported": True, "runs": 512, "us": 2221.41, "kb": 32832, "gib_s": 14.10},
                   "fa-n1-kv512": {"supported": True, "runs": 4032, "us": 921.94, "kb": 2081, "gib_s": 2.15},
                   "fa-n512-kv512": {"supported": True, "runs": 443, "us": 133957.01, "kb": 18944, "gib_s": 0.13},
                   "fa-n1-kv8192": {"supported": False}}


def test_roofline_law_per_op():
    ms = SimpleNamespace(gemm_stream_bytes_per_s=4e12, gemm_shape_flops_per_s={"bf16": 5e14}, gemm_latency_s=5e-6,
                         decode_attention_bytes_per_s=4e12, decode_attention_latency_s=8e-6,
                         attention_flops_per_s={128: 6e14}, read_bytes_per_s=4.4e12)
    ops = mech.roofline_ops(SimpleNamespace(measured=ms))
    # q at n 1: 2*4096*4096 + 4*4096 + 4*4096 bytes over 4e12, FLOPs 3.4e7 / 5e14 smaller
    assert ops["mm-qo-n1"] == pytest.approx((33554432 + 32768) / 4e12 + 5e-6)
    # down at n 8192: 2 * 14336 * 4096 * 8192 FLOPs = 9.62e11 over 5e14
    assert ops["mm-down-n8192"] == pytest.approx(962072674304 / 5e14 + 5e-6)
    # attention n 1 kv 8192: q and out 2 x 16 kB, K+V 2 x 2 x 128 x 8192 x 8 B, mask 16 kB
    assert ops["fa-n1-kv8192"] == pytest.approx((32768 + 33554432 + 16384) / 4e12 + 8e-6)
    # attention n 512 kv 2048: 4 x 32 x 512 x 2048 x 128 FLOPs over 6e14
    assert ops["fa-n512-kv2048"] == pytest.approx(17179869184 / 6e14)


def _serve_doc(tpots: list[float], per_token_ms: float) -> dict:
    res = []
    for i, tp in enumerate(tpots):
        chunks = [[1.0 + i + k * tp, 1] for k in range(11)]
        res.append({"send_s": 0.5 + i, "end_s": chunks[-1][0], "chunks": chunks, "error": None,
                    "timings": {"prompt_ms": 40.0, "predicted_ms": 10 * per_token_ms, "predicted_n": 10}})
    return {"results": res}


def test_compare_on_a_results_folder(tmp_path):
    (tmp_path / "ops.txt").write_text(PERF_TEXT)
    bench = [{"n_prompt": 8192, "n_gen": 0, "n_depth": 0, "avg_ns": 4e8, "stddev_ns": 0, "avg_ts": 20480.0}]
    (tmp_path / "bench-fa-on.json").write_text(json.dumps(bench))
    (tmp_path / "bench-fa-off.json").write_text(json.dumps([dict(bench[0], avg_ns=5e8)]))
    (tmp_path / "serve-np8-greedy.json").write_text(json.dumps(_serve_doc([0.008, 0.009, 0.010], 8.5)))
    pred = {"ops_s": {"mm-qo-n1": 1e-5, "mm-qo-n2": 1e-5, "fa-n1-kv8192": 2e-5}, "layer_matmuls_s": {"1": 1e-3},
            "hypotheses": mech.HYPOTHESES}
    rows = {(r["family"], r["case"]): r for r in mech.compare(tmp_path, pred)}
    assert rows[("mm", "mm-qo-n1")]["measured"] == pytest.approx(2724.82e-6)
    assert rows[("mm", "mm-qo-n1")]["ratio"] == pytest.approx(272.482)
    assert rows[("op-unsupported", "fa-n1-kv8192")]["measured"] is None
    assert rows[("layer-mm", "n1")]["measured"] is None  # k, v, gate, up, down not timed in this text
    assert rows[("H2", "fa off/on pp8192")]["measured"] == pytest.approx(1.25)
    assert rows[("H2", "tok/s fa on pp8192")]["measured"] == pytest.approx(20480.0)
    assert rows[("H2", "tok/s fa on pp8192")]["predicted"] == 22460.0
    assert rows[("H3", "tpot np8 greedy")]["measured"] == pytest.approx(0.009)
    assert rows[("H3", "tpot np8 greedy")]["predicted"] == 0.0098
    assert rows[("H3-server", "decode s/token np8 greedy")]["measured"] == pytest.approx(0.0085)
    assert rows[("H3", "tpot np1 default")]["measured"] is None


def test_layer_matmuls_sum_the_layer_shapes():
    t = {f"mm-{s}-n4": v for s, v in {"qo": 1.0, "kv": 2.0, "gate_up": 3.0, "down": 4.0}.items()}
    assert mech.layer_matmuls_s(t, 4) == 32 * (2 * 1 + 2 * 2 + 2 * 3 + 4)
    assert mech.layer_matmuls_s(t, 8) is None


class _Sink(BaseHTTPRequestHandler):
    bodies: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'data: {"tokens": [7], "stop": false}\n\n')
        self.wfile.write(b'data: {"tokens": [8], "stop": true, "timings": {"prompt_ms": 1.0}}\n\n')

    def log_message(self, *a):
        pass


@pytest.mark.parametrize("greedy", [False, True])
def test_client_greedy_sends_the_top_k_1_chain(greedy):
    srv = HTTPServer(("127.0.0.1", 0), _Sink)
    th = threading.Thread(target=srv.handle_request, daemon=True)
    th.start()
    _Sink.bodies.clear()
    rec = llamacpp_client.one(srv.server_address[1], [1, 2, 3], 2, 0.0, greedy)
    th.join(5)
    srv.server_close()
    assert rec["error"] is None and [c[1] for c in rec["chunks"]] == [1, 1]
    body = _Sink.bodies[0]
    if greedy:
        assert body["samplers"] == ["top_k"] and body["top_k"] == 1
    else:
        assert "samplers" not in body and "top_k" not in body


# Captured: llamacpp_run3.sh's CPU check (2026-11-30, tiny-llama, llamacpp_cases_run3_cpu.json, a CPU build of the same
# tree): two llama-server -np 2 start-ups and closed loops (one with --kv-unified), llama-batched-bench -lv 4 -npl 1,2
# -npp 32 -ntg 8 without and with -kvu (tests/data/llamacpp/run3-cpu/).
RUN3_CPU = Path(__file__).parent / "data" / "llamacpp" / "run3-cpu"


def _k_pred(server: dict, bench: dict) -> dict:
    names = {"np2-split": 0, "np2-unified": 1}
    k = {"server_decode_s_per_token": {"source": {n: server[n] for n in names}},
         "server_kv_unified": names,
         "batched_step_s": {"source": {m: {"1": bench[m], "2": bench[m]} for m in ("split", "unified")}},
         "batched_streams": {"source": {"split": 2, "unified": 1}}}
    return {"ops_s": {}, "layer_matmuls_s": {}, "hypotheses": {**{k: v for k, v in mech.HYPOTHESES.items()
                                                                  if k.startswith("H1")}, "K_served_step": k}}


def test_compare_reads_run3_files():
    pred = _k_pred({"np2-split": 0.05, "np2-unified": 0.05}, {"split": 0.01, "unified": 0.01})
    rows = {(r["family"], r["case"]): r for r in mech.compare(RUN3_CPU, pred)}
    # the closed loop's two requests: timings.predicted_ms 1330.929 and 782.721 over 16 tokens each; the median of two
    # is their mean: (1330.929 + 782.721) / 32 ms
    assert rows[("K-server", "np2-split source")]["measured"] == pytest.approx(2113.650 / 32 / 1e3)
    assert rows[("K-server", "np2-unified source")]["measured"] == pytest.approx((648.241 + 479.259) / 32 / 1e3)
    # "initializing, n_slots = 2, n_ctx_slot = 1024, kv_unified = 'false'" / "... 2048, kv_unified = 'true'"
    assert rows[("K-layout", "server np2-split kv_unified")]["measured"] == 0
    assert rows[("K-layout", "server np2-unified kv_unified")]["measured"] == 1
    # "llama_kv_cache: size = 4.00 MiB (1024 cells, 2 layers, 2/2 seqs)" without -kvu, "(2048 cells, ..., 2/1 seqs)"
    assert rows[("K-layout", "batched split streams source")]["measured"] == 2
    assert rows[("K-layout", "batched unified streams source")]["measured"] == 1
    # table rows "| 32 | 8 | 2 | 80 | ... | 0.057 | ..." and "| 32 | 8 | 1 | 40 | ... | 0.048 | ...": T_TG / 8
    assert rows[("K-bench", "split B2 source")]["measured"] == pytest.approx(0.057 / 8)
    assert rows[("K-bench", "split B2 source")]["ratio"] == pytest.approx(0.057 / 8 / 0.01)
    assert rows[("K-bench", "unified B1 source")]["measured"] == pytest.approx(0.048 / 8)
    assert not any(f.startswith("H2") or f.startswith("H3") for f, _ in rows)


def test_compare_run3_leaves_missing_files_unmeasured(tmp_path):
    rows = mech.compare(tmp_path, _k_pred({"np2-split": 0.05, "np2-unified": 0.05}, {"split": 0.01, "unified": 0.01}))
    k_rows = [r for r in rows if r["family"].startswith("K")]
    assert len(k_rows) == 2 * 2 + 2 + 2 * 2  # server (decode, layout) x 2, streams x 2, steps B1, B2 x 2
    assert all(r["measured"] is None and r["ratio"] is None for r in k_rows)


def test_run3_prediction_holds_both_readings_per_run():
    k = mech.HYPOTHESES_RUN3["K_served_step"]
    cases = json.loads((Path(mech.__file__).parent / "llamacpp_cases_run3.json").read_text())
    names = {r[0] for r in cases["serve"]["runs"]}
    for reading in ("A", "source"):
        assert set(k["server_decode_s_per_token"][reading]) == names
        assert set(k["batched_step_s"][reading]) == {n for n, _ in cases["batched"]["runs"]}
        for steps in k["batched_step_s"][reading].values():
            assert set(map(int, steps)) == set(cases["batched"]["npl"])
    assert set(k["server_kv_unified"]) == names
