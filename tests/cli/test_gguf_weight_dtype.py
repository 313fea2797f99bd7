"""--weight-dtype gguf:<preset>: accepted under --engine llamacpp, refused elsewhere in one line (exit 2)."""

from __future__ import annotations

import json

import pytest

from roofline.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_capacity_llamacpp_reports_the_gpu_and_host_split(capsys):
    code, out, _ = _run(capsys, "capacity", "--model", "Llama-3.1-8B", "--engine", "llamacpp", "--hardware", "H200",
                        "--weight-dtype", "gguf:Q4_K_M", "--max-model-len", "8192", "--json")
    assert code == 0
    rule = [r for r in json.loads(out)["rules"] if "gguf:Q4_K_M" in r][0]
    # 4403.49 MiB on the GPU, 281.81 MiB token_embd in host memory (test_gguf_weights' hand counts)
    assert "4,617,396,224 B on the GPU" in rule and "token_embd 295,501,824 B" in rule


@pytest.mark.parametrize("argv, needle", [
    (("capacity", "--engine", "vllm", "--weight-dtype", "gguf:Q4_K_M"), "--engine vllm loading GGUF is not modelled"),
    (("capacity", "--engine", "llamacpp", "--weight-dtype", "gguf:Q4_K_X"), "GGUF presets: gguf:F16"),
    (("capacity", "--engine", "llamacpp", "--weight-dtype", "q4_k_m"), "is not a weight dtype"),
    (("plan", "--engine", "sglang", "--weight-dtype", "gguf:Q8_0"), "--engine sglang loading GGUF"),
])
def test_refusals_are_one_line(capsys, argv, needle):
    code, _, err = _run(capsys, *argv[:1], "--model", "Llama-3.1-8B", *argv[1:])
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("roofline: error: --weight-dtype") and needle in err


def test_plan_llamacpp_q4_k_m_steps_faster_than_f16(capsys):
    def tpot(dtype):
        code, out, _ = _run(capsys, "plan", "--model", "Llama-3.1-8B", "--hardware", "H200", "--engine", "llamacpp",
                            "--weight-dtype", dtype, "--context", "4096", "--batch", "1", "--method", "fp16", "--json")
        assert code == 0
        row = json.loads(out)["results"][0]
        return row["tpot_s"], row["memory"]["weights_bytes"]

    (t16, w16), (t4, w4) = tpot("gguf:F16"), tpot("gguf:Q4_K_M")
    assert w4 == 4_617_396_224 + 295_501_824 and w16 == 15_010_381_824 + 1_050_673_152
    assert t4 < t16
