"""An unquantized model at a quantized --weight-dtype is planned as an engine stores it (roofline.planned_weights).

Every expected figure is derived by hand from the models' shapes and the formats' tensors (vLLM
quantization/*.py create_weights); the planner's own output is never the reference.

Llama-3.1-8B: d = 4096, 32 layers; q and o 4096 x 4096, k and v 1024 x 4096, gate and up 14336 x 4096, down
4096 x 14336: 218,103,808 converted weights a layer, 6,979,321,856 in all; embed_tokens and lm_head 128,256 x 4096
= 525,336,576 each (untied); two RMSNorms of 4096 a layer and a final one (266,240). 8,030,261,248 parameters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.catalogue import load_model
from roofline.catalogue.hf import model_from_hf_config
from roofline.costmodel import build_graph
from roofline.methods import parse_method
from roofline.planned_weights import planned_quantization
from roofline.planner.memory import weights_per_gpu
from roofline.specs import Workload
from roofline.units import B
from tests.cli_run import run

LINEAR = 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096)
TABLE = 128_256 * 4096  # the embedding, and the LM head beside it
LAYER_NORMS, FINAL_NORM = 32 * 2 * 4096, 4096
LLAMA8 = load_model("Llama-3.1-8B")


def _weights(model, weight_dtype, expert=None, tp=1, pp=1):
    return weights_per_gpu(model, Workload(context_tokens=4096, weight_dtype=weight_dtype, expert_weight_dtype=expert,
                                           tp=tp, pp=pp))


def test_hand_constants_are_llama_8b():
    assert LINEAR == 6_979_321_856 and TABLE == 525_336_576
    assert LINEAR + 2 * TABLE + LAYER_NORMS + FINAL_NORM == 8_030_261_248


def test_int4_keeps_the_embedding_and_head_at_bf16_with_w4a16_group_scales():
    # int4 codes; one bf16 scale per 128 weights (LINEAR / 64 bytes) and an int64 weight_shape [2] (16 B) for
    # each of the 224 matrices (compressed-tensors W4A16); the tables and norms at 2 bytes
    codes, scales = LINEAR // 2, LINEAR // 64 + 32 * 7 * 16
    kept = 2 * (2 * TABLE + LAYER_NORMS + FINAL_NORM)
    assert _weights(LLAMA8, "int4") == codes + scales + kept == 5_700_595_200
    # 5.31 GiB: the all-int4 count 8,030,261,248 / 2 = 3.74 GiB left the two tables' 1.5 bytes a weight out
    assert 5_700_595_200 / 2**30 == pytest.approx(5.309, abs=1e-3)


def test_fp8_is_vllm_online_fp8_one_fp32_scale_a_matrix():
    assert _weights(LLAMA8, "fp8") == LINEAR + 224 * 4 + 2 * (2 * TABLE + LAYER_NORMS + FINAL_NORM) == 9_081_201_536


def test_a_tied_table_is_counted_once():
    # Qwen3-0.6B: d 1024, 28 layers, q 2048 x 1024, k and v 1024 x 1024, o 1024 x 2048, gate and up 3072 x 1024,
    # down 1024 x 3072; one 151,936 x 1024 table (tie_word_embeddings); norms 2 x 1024 + q_norm and k_norm of 128 a
    # layer and a final 1024
    linear = 28 * (2 * 2048 * 1024 + 2 * 1024 * 1024 + 3 * 3072 * 1024)
    table, norms = 151_936 * 1024, 28 * (2 * 1024 + 2 * 128) + 1024
    assert linear + table + norms == 596_049_920  # the model's parameters
    expected = linear // 2 + linear // 64 + 28 * 7 * 16 + 2 * (table + norms)
    assert _weights(load_model("Qwen3-0.6B"), "int4") == expected == 538_381_376


# Qwen3-30B-A3B: d 2048, 48 layers; q 4096 x 2048, k and v 512 x 2048, o 2048 x 4096; 128 experts of gate and up
# 768 x 2048 and down 2048 x 768; router 128 x 2048; untied tables 151,936 x 2048; norms 2 x 2048 + 2 x 128 a layer
ATTN = 48 * (2 * 4096 * 2048 + 2 * 512 * 2048)
EXPERTS = 48 * 128 * 3 * 768 * 2048
QWEN_KEPT = 2 * (2 * 151_936 * 2048 + 48 * 128 * 2048 + 48 * (2 * 2048 + 2 * 128) + 2048)
QWEN_MOE = load_model("Qwen3-30B-A3B")


def test_moe_fp8_adds_one_fp32_scale_per_expert_matrix():
    # Fp8MoEMethod: one fp32 scale per expert's gate, up and down; 4 per layer for attention
    expected = ATTN + EXPERTS + 48 * (4 + 3 * 128) * 4 + QWEN_KEPT
    assert _weights(QWEN_MOE, "fp8") == expected == 31_167_320_832


def test_expert_dtype_takes_its_own_scheme():
    # attention fp8 (one fp32 scale a matrix); the experts W4A16 (bf16 per 128, 16 B of shape per matrix)
    experts = EXPERTS // 2 + EXPERTS // 64 + 48 * 128 * 3 * 16
    assert _weights(QWEN_MOE, "fp8", "int4") == ATTN + 48 * 4 * 4 + experts + QWEN_KEPT == 17_125_012_224
    # bf16 beside experts at int4's scheme: attention unconverted
    assert _weights(QWEN_MOE, "bf16", "int4") == 2 * ATTN + experts + QWEN_KEPT
    # int4 beside bf16 experts: the experts unconverted
    attention = ATTN // 2 + ATTN // 64 + 48 * 4 * 16
    assert _weights(QWEN_MOE, "int4", "bf16") == attention + 2 * EXPERTS + QWEN_KEPT == 59_719_449_600


def test_ep2_splits_the_experts_codes_and_scales():
    experts = EXPERTS // 2 + EXPERTS // 64 + 48 * 128 * 3 * 16  # half of them on each of the 2 replicas
    w = weights_per_gpu(QWEN_MOE, Workload(context_tokens=4096, weight_dtype="fp8", expert_weight_dtype="int4", ep=2))
    assert w == ATTN + 48 * 4 * 4 + experts / 2 + QWEN_KEPT == 9_650_615_040


def test_experts_only_mxfp4_is_the_dtype_count():
    # mxfp4's 17/32 bytes hold its e8m0 scale: bf16 everywhere else, as before the what-if
    assert _weights(QWEN_MOE, "bf16", "mxfp4") == 2 * (30_532_122_624 - EXPERTS) + EXPERTS * 17 // 32


def test_tp2_splits_matrices_scales_and_tables_and_replicates_norms():
    halves = (LINEAR // 2 + LINEAR // 64 + 32 * 7 * 16 + 2 * 2 * TABLE) / 2
    assert _weights(LLAMA8, "int4", tp=2) == halves + 2 * (LAYER_NORMS + FINAL_NORM) == 2_850_563_840


def test_pp2_puts_the_bf16_tables_on_the_end_stages():
    # 16 layers a stage (codes, scales, norms at bf16) and the larger end: the head and the final norm
    layer = 218_103_808 // 2 + 218_103_808 // 64 + 7 * 16 + 2 * 2 * 4096
    assert _weights(LLAMA8, "int4", pp=2) == 16 * layer + 2 * (TABLE + FINAL_NORM) == 2_850_301_696


def test_not_a_what_if():
    assert planned_quantization(LLAMA8, "bf16", "bf16") is None
    assert planned_quantization(LLAMA8, "fp32", "fp32") is None
    assert planned_quantization(LLAMA8, "fp4", "fp4") is None  # a bare width, no engine's format: as chosen
    assert _weights(LLAMA8, "fp4") == 8_030_261_248 // 2


def _head_and_embedding(model, dtype):
    graph = build_graph(model, parse_method("bf16"), "decode", weight_dtype=dtype)
    ops = graph.by_name()
    return [float(ops[name][0].traffic["weights"].subs({B: 1})) for name in ("lm_head", "embedding")]


def test_decode_reads_the_head_and_embedding_row_at_bf16():
    # one token: the head's 128,256 x 4096 weights and one 4096-wide row of the table, 2 bytes each
    assert _head_and_embedding(LLAMA8, "int4") == [2 * TABLE, 2 * 4096]
    assert _head_and_embedding(LLAMA8, "fp8") == [2 * TABLE, 2 * 4096]
    assert _head_and_embedding(LLAMA8, "fp4") == [TABLE / 2, 4096 / 2]  # planned as chosen


def test_a_quantized_checkpoint_reads_its_head_at_bf16_too():
    checkpoint = LLAMA8.model_copy(update={"quantization": planned_quantization(LLAMA8, "fp8", "fp8")})
    assert _head_and_embedding(checkpoint, "fp8") == [2 * TABLE, 2 * 4096]


def test_plan_says_what_the_what_if_assumes(capsys):
    rc, out, err = run(capsys, "plan", "--model", "Llama-3.1-8B", "--method", "bf16", "--weight-dtype", "int4")
    assert rc == 0, err
    assert "weights: Llama-3.1-8B has no quantization_config" in out and "W4A16" in out
    assert "the embedding, the LM head, norms, routers and biases at bf16" in out


def test_capacity_states_the_what_if(capsys):
    rc, out, err = run(capsys, "capacity", "--model", "Llama-3.1-8B", "--engine", "vllm", "--weight-dtype", "fp8",
                       "--json")
    assert rc == 0, err
    assert "vLLM online fp8" in json.loads(out)["checkpoint_read"]["weights"]


# a real checkpoint at its stored widths is placed the same way (its bytes: roofline.stored_bytes)
DATA = Path(__file__).parent / "data" / "hf"


def test_a_block_fp8_checkpoint_at_pp2_puts_its_bf16_tables_on_the_end_stages():
    data = json.loads((DATA / "Llama-3.1-8B" / "config.json").read_text())
    data["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    model = model_from_hf_config(data, where="cfg.json", name="m")
    # a layer: 218,103,808 fp8 codes, 13,312 fp32 scales of 128 x 128 blocks, two bf16 norms of 4096
    layer = 218_103_808 + 13_312 * 4 + 2 * 2 * 4096
    assert _weights(model, "fp8", pp=2) == 16 * layer + 2 * (TABLE + FINAL_NORM) == 4_541_456_384


def test_a_checkpoints_expert_scales_split_over_ep():
    model = load_model(str(DATA / "Qwen3-30B-A3B-FP8" / "config.json"))
    # 128 x 128 fp32 blocks: attention 512 + 64 + 64 + 512 a layer; an expert's gate, up (768 x 2048) and down
    # (2048 x 768) 3 x 6 x 16 = 288; half the experts (codes and scales) on each of the 2 replicas
    attention = ATTN + 48 * 1152 * 4
    experts = EXPERTS + 48 * 128 * 288 * 4
    w = weights_per_gpu(model, Workload(context_tokens=4096, weight_dtype="fp8", ep=2))
    assert w == attention + experts / 2 + QWEN_KEPT == 16_675_491_840
