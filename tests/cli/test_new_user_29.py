"""Trying the tool as a new user (session 29, validate/notes/2026-11-30-new-user-29.md): real configs of families
not tried before (tests/data/hf/<name>/SOURCE.md), counted by hand here; vLLM v0.24.0's source for the engine.

poolside/Laguna-XS.2-FP8 (laguna, verbatim): d 2,048, 40 layers in fours of one full (48 query heads) and three
sliding of 512 (64 query heads), 8 KV heads of 128 everywhere, q / k norms of 128, a per-head output gate g_proj
(d x the layer's heads, `gating` true: vllm/model_executor/models/laguna.py LagunaAttention); layer 0 a dense gated
MLP of 8,192, layers 1-39 256 experts of 512 (top 8), one shared expert of 512, a router of 256 x d with an
e_score_correction_bias of 256; vocabulary 100,352 untied.
  full layer: q 2,048 x 6,144 + k, v 2 x 2,048 x 1,024 + o 6,144 x 2,048 + g 2,048 x 48 + norms 256 = 29,458,688
  sliding layer: q 2,048 x 8,192 + k, v + o 8,192 x 2,048 + g 2,048 x 64 + 256 = 37,880,064
  MoE layer: 256 x 3 x 2,048 x 512 + 3 x 2,048 x 512 + 256 x 2,048 + 256 = 808,976,640
  total: 2 x 100,352 x 2,048 + 10 full + 30 sliding + 3 x 2,048 x 8,192 + 39 MoE + 40 x 2 x 2,048 + 2,048
  = 33,442,617,088.
Its quantization_config: fp8 blocks of 128 x 128 on every Linear (fp32 scale per block), ignoring lm_head, the
attention projections (q / k / v / o / g by `re:` patterns) and the router; kv_cache_scheme fp8.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run

from roofline.accounting import parameter_count
from roofline.catalogue import load_model
from roofline.stored_bytes import stored_bytes

LAGUNA = str(Path(__file__).resolve().parents[1] / "data" / "hf" / "Laguna-XS.2-FP8" / "config.json")


def _json(capsys, *argv) -> dict:
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_laguna_per_layer_heads_are_counted_not_refused():
    full = 2048 * 6144 + 2 * 2048 * 1024 + 6144 * 2048 + 2048 * 48 + 256
    sliding = 2048 * 8192 + 2 * 2048 * 1024 + 8192 * 2048 + 2048 * 64 + 256
    moe = 256 * 3 * 2048 * 512 + 3 * 2048 * 512 + 256 * 2048 + 256
    assert (full, sliding, moe) == (29_458_688, 37_880_064, 808_976_640)
    total = 2 * 100352 * 2048 + 10 * full + 30 * sliding + 3 * 2048 * 8192 + 39 * moe + 40 * 2 * 2048 + 2048
    assert parameter_count(load_model(LAGUNA)).total == total == 33_442_617_088


def test_laguna_fp8_checkpoint_stores_the_mlps_in_fp8_blocks_and_attention_in_bf16():
    got = stored_bytes(load_model(LAGUNA))
    dense, expert, shared = 3 * 8192 * 2048, 3 * 512 * 2048, 3 * 512 * 2048
    assert got.codes == dense + 39 * (256 * expert + shared) == 31_579_963_392
    # blocks: dense gate / up 64 x 16, down 16 x 64; an expert's (or the shared one's) 4 x 16, 16 x 4
    assert got.scales == 4 * (3 * 1024 + 39 * 257 * 3 * 64) == 7_709_952
    assert got.decoder == 2 * (33_442_617_088 - got.codes) + got.codes + got.scales


def test_laguna_under_vllm_pages_and_requests_at_once(capsys):
    """kv_cache_scheme fp8: 10 full layers x 2 x 8 x 128 x 1 B = 20,480 B a token. vLLM groups 10 full and 30
    sliding layers into 4 groups of 10; a 50 GiB pool holds 50 x 2^30 // (16 x 2,048 B x 10) = 163,840 blocks. At
    65,536 tokens a running request holds 4,096 full blocks and 4,096 - (65,536 - 512) // 16 = 32 per sliding
    group; one is admitted with 4,096 + 3 x min(4,096, cdiv(511 + 8,192, 16) + 1 = 545) = 5,731 free."""
    cap = _json(capsys, "capacity", "--model", LAGUNA, "--engine", "vllm", "--kv-memory-gib", "50",
                "--max-model-len", "65536")
    assert cap["bytes_per_token"] == 20_480 and cap["num_blocks"] == 163_840
    assert cap["sequences_at_once"] == (163_840 - 5_731) // (4_096 + 3 * 32) + 1 == 38
    assert cap["max_concurrency"] == 163_840 / 5_731


def test_tp_must_divide_every_layers_heads(capsys, tmp_path):
    """vLLM's LagunaAttention asserts tp divides its layer's heads: 36 heads a sliding layer at tp 8 is refused,
    though the model-level 48 divides."""
    data = json.loads(Path(LAGUNA).read_text())
    data |= {"num_key_value_heads": 4, "num_attention_heads_per_layer": [48, 36, 36, 36] * 10}
    path = tmp_path / "laguna-36" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    rc, out, err = run(capsys, "capacity", "--model", str(path), "--engine", "vllm", "--hardware", "H200", "--tp", "8")
    assert (rc, out) == (2, "") and "36 attention heads of some layers" in err and err.count("\n") == 1
    data["num_attention_heads_per_layer"] = [48, 36] * 20
    path.write_text(json.dumps(data))
    rc, out, err = run(capsys, "show", "model", str(path))
    assert rc == 0, err  # per-layer heads need not follow layer_types' period
    data["num_attention_heads_per_layer"] = [48, 30] * 20
    path.write_text(json.dumps(data))
    rc, out, err = run(capsys, "show", "model", str(path))
    assert rc == 2 and "num_attention_heads_per_layer: 30 heads is not a multiple of num_key_value_heads 4" in err


# EXAONE-MoE at K-EXAONE's widths in 4 layers, as a public engine test writes it (EXAONE_MOE_CONFIG; index id
# 4294797590): is_moe_layer [false, true, true, true], first_last_k_dense_replace 1, no mlp_layer_types nor
# first_k_dense_replace. d 6,144, 64 / 8 heads of 128 with q / k norms, dense MLP 18,432, 128 experts of 2,048 and one
# shared, vocabulary 153,600 untied.
EXAONE_MOE = {
    "architectures": ["ExaoneMoEForCausalLM"], "model_type": "exaone_moe", "first_last_k_dense_replace": 1,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 6144, "intermediate_size": 18432,
    "is_moe_layer": [False, True, True, True], "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
    "max_position_embeddings": 262144, "moe_intermediate_size": 2048, "num_attention_heads": 64, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 4, "num_key_value_heads": 8, "num_shared_experts": 1,
    "sliding_window": 128, "tie_word_embeddings": False, "vocab_size": 153600}


def _exaone(tmp_path, **change) -> str:
    path = tmp_path / "exaone" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({k: v for k, v in (EXAONE_MOE | change).items() if v is not None}))
    return str(path)


def test_exaone_moe_first_layer_is_dense_as_vllm_and_transformers_build_it(tmp_path, capsys):
    """vLLM's exaone_moe.py builds the MoE where is_moe_layer[i]; transformers' ExaoneMoeConfig without
    mlp_layer_types makes the first first_k_dense_replace (default 1) layers dense. Both: layer 0 dense. It was
    counted as a MoE layer (4,530,634,752 parameters too many)."""
    attention = 6144 * 8192 + 2 * 6144 * 1024 + 8192 * 6144 + 2 * 128
    moe = 128 * 3 * 6144 * 2048 + 3 * 6144 * 2048 + 128 * 6144
    total = 2 * 153600 * 6144 + 4 * attention + 3 * 6144 * 18432 + 3 * moe + 4 * 2 * 6144 + 6144
    assert total == 17_291_336_704
    for change in ({}, {"is_moe_layer": None}):  # vLLM's key, or transformers' default
        assert parameter_count(load_model(_exaone(tmp_path, **change))).total == total
    rc, out, err = run(capsys, "show", "model", _exaone(tmp_path, is_moe_layer=[True, False, True, True]))
    assert rc == 2 and "is_moe_layer: only leading dense layers then MoE ones are modelled" in err


def test_glm_4_7_flash_mla_moe_by_hand(capsys):
    """zai-org/GLM-4.7-Flash (glm4_moe_lite, tests/data/hf/GLM-4.7-Flash): MLA with q_lora 768, kv_lora 512, 20 heads
    of qk 192 + 64 and v 256; 47 layers, the first dense (10,240), then 64 experts of 1,536 (top 4) and one shared;
    vocabulary 154,880 untied. Per layer: q_a 2,048 x 768 + its norm 768 + q_b 768 x 20 x 256 + kv_a 2,048 x 576 +
    its norm 512 + kv_b 512 x 20 x (192 + 256) + o 20 x 256 x 2,048 = 21,759,232. KV: the 576-wide latent, 47 x 576
    x 2 B = 54,144 B a token (vLLM: --kv-cache-dtype fp8 halves it)."""
    path = str(Path(LAGUNA).parents[1] / "GLM-4.7-Flash" / "config.json")
    mla = 2048 * 768 + 768 + 768 * 20 * 256 + 2048 * 576 + 512 + 512 * 20 * 448 + 20 * 256 * 2048
    moe = 64 * 3 * 2048 * 1536 + 3 * 2048 * 1536 + 64 * 2048
    total = 2 * 154880 * 2048 + 47 * mla + 3 * 2048 * 10240 + 46 * moe + 47 * 2 * 2048 + 2048
    assert (mla, total) == (21_759_232, 29_943_390_976)
    assert parameter_count(load_model(path)).total == total
    for dtype, per_token in (("auto", 54_144), ("fp8", 27_072)):
        cap = _json(capsys, "capacity", "--model", path, "--engine", "vllm", "--kv-memory-gib", "40",
                    "--kv-cache-dtype", dtype)
        assert cap["bytes_per_token"] == per_token and cap["block_size"] == 64  # MLA backends' 64-token blocks
