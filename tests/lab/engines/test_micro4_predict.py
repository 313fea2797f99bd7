"""validate/engines/micro4_predict.py: every micro4.py case has the planner's prediction, each bounded by hand."""

import ast
import json
from pathlib import Path

import pytest

from validate.engines.micro4_predict import predict

HERE = Path(__file__).resolve().parents[3] / "validate" / "engines"


@pytest.fixture(scope="module")
def predicted():
    return predict("H200", "vllm")


def test_every_family_micro4_times_is_predicted(predicted):
    # micro4.py's result families: the keys of its `res` dict, less the bookkeeping ones
    tree = ast.parse((HERE / "micro4.py").read_text())
    keys = {k.value for node in ast.walk(tree) if isinstance(node, ast.Dict)
            for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    assert {"gemm", "fa3_engine", "kv_write", "sampler", "graph_floor"} <= keys
    cases = json.loads((HERE / "micro4-cases.json").read_text())
    g = cases["gemm"]
    assert len(predicted["gemm"]) == len(g["shapes"]) * len(set(g["decode_M"]) | set(g["prefill_M"]))
    assert len(predicted["sampler"]) == len(cases["sampler"]["cases"])


def test_a_decode_gemm_is_predicted_no_faster_than_its_weights_stream(predicted):
    # Llama-3.1-8B's gate/up: 28,672 x 4,096 bf16 = 234,881,024 bytes, at the H200's measured read bandwidth
    # (hardware/H200.yaml read_bytes_per_s 4.486e12): >= 52.4 us whatever M
    up = [p for p in predicted["gemm"] if p["model"] == "Llama-3.1-8B" and p["op"] == "mlp_up" and "decode_row_s" in p]
    assert up and all(p["decode_row_s"] >= 28672 * 4096 * 2 / 4.486e12 for p in up)


def test_the_sampler_is_predicted_zero_beside_what_the_engine_spent(predicted):
    row = next(p for p in predicted["sampler"] if p["B"] == 256 and p["V"] == 128256)
    # run 2's prof (Llama-3.1-8B, B = 256): _gumbel_sample 238.4 + argmax 5.5 + logits' fp32 cast 101.4 us
    assert row["s"] == 0.0 and row["in_engine_s"] == pytest.approx(345.2e-6, rel=0.01)
