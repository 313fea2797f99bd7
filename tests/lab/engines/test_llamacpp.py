"""validate/engines/llamacpp_*: the GGUF generator's tensors, the client's schedule and stream arithmetic, the log
readers and the comparison. Log expectations are llama.cpp's own lines: tests/data/llamacpp/ holds the start-up log,
batched-bench table and llama-bench JSON of the CPU check (llama.cpp 0c1e570 built here with -DGGML_CUDA=OFF, serving
the tiny-llama GGUF llamacpp_model.py wrote; validate/engines/README.md), each figure below read off those lines or
worked out by hand."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from validate.engines import llamacpp_client as client
from validate.engines import llamacpp_compare as compare
from validate.engines import llamacpp_logs as logs
from validate.engines import llamacpp_model as gen
from validate.engines import models

DATA = Path(__file__).resolve().parents[2] / "data" / "llamacpp"
MIB = 1 << 20


def test_llama31_8b_file_holds_the_published_parameter_count():
    # Llama-3.1-8B: 8,030,261,248 parameters (the Hub's safetensors total for meta-llama/Llama-3.1-8B) =
    # 2 x 128256 x 4096 (embedding, LM head) + 32 x (2 x 4096^2 + 2 x 1024 x 4096 + 3 x 14336 x 4096) + 65 x 4096 norms
    h = gen.hparams(models.config("Llama-3.1-8B"))
    shapes = gen.tensors(h)
    assert sum(math.prod(s) for _, s in shapes) == 8_030_261_248
    assert dict(shapes)["blk.0.attn_k.weight"] == (1024, 4096)  # 8 KV heads x 128
    assert dict(shapes)["blk.31.ffn_down.weight"] == (4096, 14336)


def test_tiny_file_has_the_tensor_count_llama_cpp_loaded():
    # server-cpu.log: "llama_model_loader: loaded meta data with ... and 21 tensors"
    text = (DATA / "server-cpu.log").read_text()
    assert "and 21 tensors" in text
    assert len(gen.tensors(gen.hparams(models.config("tiny-llama")))) == 21


def test_tied_embeddings_refused_with_exit_2(capsys):
    cfg = {**models.config("tiny-llama"), "tie_word_embeddings": True}
    with pytest.raises(SystemExit) as e:
        gen.hparams(cfg)
    assert e.value.code == 2
    assert "tie_word_embeddings" in capsys.readouterr().err


def test_poisson_schedule_has_the_rate_and_is_replayable():
    a, b = client.schedule(7, 4.0, 4000), client.schedule(7, 4.0, 4000)
    assert a == b and a[0] == 0.0
    assert all(y >= x for x, y in zip(a, a[1:], strict=False))
    assert 3999 / a[-1] == pytest.approx(4.0, rel=0.05)  # mean gap 1/rate
    assert client.schedule(7, 0.0, 5) == [0.0] * 5  # closed loop: all ready at 0


def test_prompts_differ_between_requests_and_stay_ordinary_tokens():
    p0, p1 = client.prompt_ids(1, 0, 64), client.prompt_ids(1, 1, 64)
    assert len(p0) == 64 and p0 != p1 and p0 == client.prompt_ids(1, 0, 64)
    assert min(p0 + p1) >= 128 and max(p0 + p1) < 100_000


def test_request_times_split_held_back_tokens_over_their_chunk():
    # sent at 1.0; chunks at 1.5 (1 token), 1.6 (2 tokens: one held back for UTF-8), 1.7 (1 token)
    rec = {"send_s": 1.0, "end_s": 1.75, "error": None, "chunks": [[1.5, 1], [1.6, 2], [1.7, 1], [1.71, 0]],
           "timings": {"prompt_ms": 12.0, "predicted_ms": 200.0, "predicted_n": 4}}
    t = logs.request_times(rec)
    assert t["ttft_s"] == pytest.approx(0.5)
    assert t["tokens"] == 4
    assert t["tpot_s"] == pytest.approx(0.2 / 3)  # (1.7 - 1.5) / (4 - 1)
    assert t["itl_median_s"] == pytest.approx(0.075)  # median of the gaps 0.1 / 2 and 0.1 / 1
    assert t["e2e_s"] == pytest.approx(0.75)
    assert t["server_prompt_s"] == pytest.approx(0.012)
    assert logs.request_times({**rec, "error": "HTTP 503"}) is None


def test_start_up_log_read_from_llama_cpp_lines():
    # server-cpu.log: -c 8192 -np 4 on tiny-llama (2 layers, 4 KV heads x 64), f16 cache, no --kv-unified
    m = logs.server_memory((DATA / "server-cpu.log").read_text())
    # "CPU KV buffer size = 16.00 MiB"; by hand 2 layers x 4 streams x 2048 cells x (K + V) x 256 x 2 B = 16 MiB
    assert m["kv_buffer_bytes"] == {"CPU": 16 * MIB} == {"CPU": 2 * 4 * 2048 * 2 * 256 * 2}
    # "size = 16.00 MiB (2048 cells, 2 layers, 4/4 seqs)": cells per stream, n_seq_max / n_stream
    assert (m["kv"]["cells_per_stream"], m["kv"]["streams"], m["kv"]["cells"]) == (2048, 4, 8192)
    assert m["kv"]["k_type"] == "f16" and m["kv"]["k_bytes"] == 8 * MIB
    # "sched_reserve: CPU compute buffer size = 6.01 MiB"
    assert m["compute_buffer_bytes"] == {"CPU": pytest.approx(6.01 * MIB)}
    # "CPU_Mapped model buffer size = 127.75 MiB"; by hand 2 x 128256 x 256 x 2 (embedding, head)
    # + 2 x (4 x 256^2 + 3 x 512 x 256) x 2 + 5 x 256 x 4 (f32 norms) = 133,960,704 B, printed to 0.01 MiB
    assert m["model_buffer_bytes"]["CPU_Mapped"] == pytest.approx(133_960_704, abs=0.005 * MIB)
    assert (m["n_ctx"], m["n_ctx_seq"], m["n_seq_max"], m["n_ubatch"]) == (8192, 2048, 4, 512)
    assert m["slots"] == {"n_slots": 4, "n_ctx_slot": 2048, "kv_unified": False}


def test_batched_bench_table_rows():
    rows = logs.batched_rows((DATA / "batched-cpu.log").read_text())
    assert [(r["pp"], r["tg"], r["pl"], r["n_kv"]) for r in rows] == [(32, 8, 1, 40), (32, 8, 2, 80), (32, 8, 4, 160)]
    # "|    32 |      8 |    4 |    160 |    0.064 |  2002.25 |    0.844 |    37.91 |    0.908 |   176.21 |"
    assert (rows[2]["t_pp_s"], rows[2]["t_tg_s"], rows[2]["s_tg_tok_per_s"]) == (0.064, 0.844, 37.91)


def test_llama_bench_json_entries():
    e = logs.bench_entries((DATA / "bench-pp-cpu.json").read_text())
    assert [(x["n_prompt"], x["n_gen"], x["n_depth"]) for x in e] == [(64, 0, 0), (256, 0, 0)]
    assert e[0]["avg_s"] == pytest.approx(0.305029845)  # "avg_ns": 305029845
    assert e[1]["stddev_s"] == pytest.approx(0.049147623)  # "stddev_ns": 49147623


def test_compare_reads_a_run_folder_and_gives_ape(tmp_path):
    res = tmp_path / "run"
    res.mkdir()
    shutil.copy(DATA / "server-cpu.log", res / "mem-c8192-np4.log")
    shutil.copy(DATA / "batched-cpu.log", res / "batched.log")
    shutil.copy(DATA / "bench-pp-cpu.json", res / "bench-pp.json")
    pred = {"memory": [{"c": 8192, "np": 4, "kv_bytes": 32 * MIB, "cells": 8192, "weights_bytes": None,
                        "compute_bytes": None},
                       {"c": 4096, "np": 1, "kv_bytes": 1.0, "cells": 1, "weights_bytes": 1.0, "compute_bytes": 1.0}],
            "batched": [{"pp": 32, "tg": 8, "pl": 4, "decode_step_s": 1.5 * 0.844 / 8, "prefill_s": 0.032}],
            "prefill": [{"n_prompt": 256, "prefill_s": 0.220416796 / 2}], "tg": [], "served": {}}
    rows = {r["case"]: r for r in compare.memory_rows(res, pred) + compare.step_rows(res, pred)}
    assert rows["c8192-np4 KV bytes"]["ape"] == pytest.approx(1.0)  # 32 MiB against the log's 16
    assert rows["c8192-np4 KV cells"]["ape"] == 0.0
    assert rows["c4096-np1 KV bytes"]["measured"] is None  # no log for that start: not measured
    assert rows["pp32 B4"]["ape"] == pytest.approx(0.5)
    assert rows["pp32 B4 (B x pp)"]["ape"] == pytest.approx(0.5)  # 0.032 against 0.064
    assert rows["llama-bench pp256"]["ape"] == pytest.approx(0.5)
    s = compare.summary(list(rows.values()))
    assert s["memory"]["cases"] == 2 and s["decode"]["cases"] == 1


def test_compare_refuses_a_missing_folder_with_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "validate.engines.llamacpp_compare", str(tmp_path / "none"),
                        "--predicted", str(tmp_path / "p.json")], capture_output=True, text=True)
    assert r.returncode == 2 and "RESULTS_DIR" in r.stderr


def test_committed_prediction_has_llama_cpp_cache_sizes():
    # Llama-3.1-8B: 2 (K, V) x 8 KV heads x 128 x 32 layers x 2 B = 131,072 B a cell; cells pad256(c / np) x np
    pred = json.loads((DATA.parents[2] / "validate/results/engines/h200-llamacpp-run1-predicted.json").read_text())
    kv = {(m["c"], m["np"]): (m["kv_bytes"], m["cells"]) for m in pred["memory"]}
    assert kv[(32768, 8)] == (32768 * 131072, 32768)
    assert kv[(131072, 16)] == (131072 * 131072, 131072)
    assert {(b["pp"], b["pl"]) for b in pred["batched"]} == {(p, b) for p in (128, 1024)
                                                                for b in (1, 2, 4, 8, 16, 32, 64)}
    assert set(pred["served"]) == {"r4", "r8", "r16", "c4"} and all("error" not in v for v in pred["served"].values())
