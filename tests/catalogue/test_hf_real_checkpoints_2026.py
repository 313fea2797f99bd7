"""Real published config.json files of 2025-2026 checkpoints, as a new user brings them (session 18).

Each was run through `roofline kv / plan / capacity --model FILE` and checked by hand against its config and its
model card (tests/data/hf/<name>/SOURCE.md: where each file comes from). Six answers were silently wrong before
this change; every expected number below is derived by hand from the config's fields in the test's docstring.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from roofline.accounting import kv_bytes_per_token, parameter_count
from roofline.catalogue.store import load_model
from roofline.errors import SpecError
from roofline.stored_bytes import Matrix, converted, stored_bytes

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"


def _model(name: str):
    return load_model(str(DATA / name / "config.json"))


def test_modelopt_settings_beside_config_json_are_read():
    """nvidia/Llama-3.1-70B-Instruct-FP8's config.json has no quantization_config: ModelOpt wrote quant_algo FP8,
    kv_cache_quant_algo FP8 and exclude_modules [lm_head] to hf_quant_config.json (vLLM reads that file). Before,
    the checkpoint was planned at bf16 (141.1 GB). By hand (hidden 8192, 64 heads x 128, 8 KV heads, MLP 28672,
    80 layers, vocab 128256, untied):
    codes, one fp8 byte per weight: 80 x (2 x 8192 x 8192 + 2 x 1024 x 8192 + 3 x 8192 x 28672) = 68,451,041,280;
    scales, fp32 weight_scale and input_scale per matrix (ModelOptFp8LinearMethod): 80 x 7 x 8 = 4,480;
    kept at bf16: embed + lm_head 2 x 128256 x 8192 x 2 = 4,202,692,608 plus norms (2 x 80 + 1) x 8192 x 2 =
    2,637,824 -> 4,205,330,432."""
    model = _model("Llama-3.1-70B-Instruct-FP8")
    q = model.quantization
    assert (q.method, q.weight_dtype, q.kv_cache_dtype, q.modules_not_converted) == ("modelopt", "fp8", "fp8",
                                                                                     ["lm_head"])
    stored = stored_bytes(model)
    assert (stored.codes, stored.scales, stored.kept) == (68_451_041_280, 4_480, 4_205_330_432)


def test_a_name_announcing_a_quantization_without_its_settings_is_refused(tmp_path):
    """The same config.json alone in a folder named like its checkpoint (…-FP8): nothing says how it is stored,
    the name says FP8, so bf16 would be silently wrong by 2x: one line naming quantization_config."""
    folder = tmp_path / "Llama-3.1-70B-Instruct-FP8"
    folder.mkdir()
    shutil.copyfile(DATA / "Llama-3.1-70B-Instruct-FP8" / "config.json", folder / "config.json")
    with pytest.raises(SpecError, match=r"config\.json: quantization_config: missing, but the name "
                                        r"'Llama-3\.1-70B-Instruct-FP8' says FP8.*hf_quant_config\.json"):
        load_model(str(folder / "config.json"))
    plain = tmp_path / "llama-70b"  # no announcement: a bf16 checkpoint as far as anything can tell
    plain.mkdir()
    shutil.copyfile(folder / "config.json", plain / "config.json")
    assert load_model(str(plain / "config.json")).quantization is None


def test_the_cli_refuses_it_in_one_line_with_status_2(tmp_path, capsys):
    from roofline.cli import main

    folder = tmp_path / "Qwen3-235B-A22B-NVFP4"
    folder.mkdir()
    shutil.copyfile(DATA / "Qwen3-235B-A22B-NVFP4" / "config.json", folder / "config.json")
    status = main(["kv", "--model", str(folder / "config.json"), "--context", "32768"])
    out = capsys.readouterr()
    err = out.err.strip()
    assert status == 2 and out.out == "" and len(err.splitlines()) == 1 and "quantization_config: missing" in err


def test_modelopt_quantization_config_without_quant_method():
    """Qwen3-32B-FP8-Static-PerTensor's quantization_config names producer modelopt and quant_algo FP8 but no
    quant_method (refused before). Per-tensor FP8 (scale group -1): codes one byte per weight, by hand (hidden
    5120, 64 x 128 query, 8 x 128 KV, MLP 25600, 64 layers): 64 x (2 x 5120 x 8192 + 2 x 5120 x 1024 +
    3 x 5120 x 25600) = 31,205,621,760; kv_cache_scheme "FP8" names the KV dtype."""
    model = _model("Qwen3-32B-FP8-Static-PerTensor")
    q = model.quantization
    assert (q.method, q.weight_dtype, q.scale_group, q.kv_cache_dtype) == ("modelopt", "fp8", -1, "fp8")
    assert stored_bytes(model).codes == 31_205_621_760


def test_glm5_fp8_converts_its_attention():
    """zai-org/GLM-5-FP8's modules_to_not_convert lists norms, `self_attn.indexer.k_norm`, `self_attn.indexers_proj`
    and `mlp.gate`, never q_a_proj ... o_proj: the attention, the three dense layers' MLP and the shared experts are
    fp8 like the routed experts. Before, the substring 'attn' in a kept norm made it experts-only (the rest planned
    at bf16: 763.22 GB instead of 746.11 GB)."""
    model = _model("GLM-5-FP8")
    assert model.quantization.experts_only is False
    for name in ("model.layers.3.self_attn.q_a_proj", "model.layers.3.self_attn.o_proj", "model.layers.0.mlp.up_proj",
                 "model.layers.5.mlp.shared_experts.down_proj"):
        assert converted(Matrix(name, 1, 1), model), name


def test_kimi_k25_nvfp4_kept_names_lose_the_wrapper_prefix():
    """nvidia/Kimi-K2.5-NVFP4 keeps `language_model.model.layers.N.self_attn*` (a multimodal wrapper's names; vLLM's
    ModelOpt is_layer_excluded strips `language_model.`): the attention stays bf16. It does not keep the shared
    experts or layer 0's dense MLP, so those are NVFP4 and the checkpoint is not experts-only. Before, no kept name
    matched and the attention was planned at NVFP4. Kimi-K2.6-NVFP4 also keeps `layers.0*` and `shared_experts*`:
    experts-only, layer 0's MLP bf16."""
    k25, k26 = _model("Kimi-K2.5-NVFP4"), _model("Kimi-K2.6-NVFP4")
    attention = Matrix("model.layers.1.self_attn.q_a_proj", 1, 1)
    shared = Matrix("model.layers.1.mlp.shared_experts.up_proj", 1, 1)
    dense = Matrix("model.layers.0.mlp.up_proj", 1, 1)
    assert not converted(attention, k25) and converted(shared, k25) and converted(dense, k25)
    assert not k25.quantization.experts_only
    assert k26.quantization.experts_only and not converted(shared, k26) and not converted(dense, k26)


def test_kimi_k25_reads_its_text_config_quantization():
    """moonshotai/Kimi-K2.5 (refused before: text_config model_type kimi_k2) writes compressed-tensors W4A16,
    group 32, in text_config only, ignoring self_attn, shared_experts and the dense MLP: only the routed experts
    are int4. By hand: 60 MoE layers x 384 experts x 3 x 7168 x 2048 weights / 2 = 507,343,011,840 bytes of codes.
    Parameters (model card: 1T total, 32B activated): 1,026.4 B and 32.9 B (input embedding included)."""
    model = _model("Kimi-K2.5")
    q = model.quantization
    assert (q.method, q.weight_dtype, q.scale_group) == ("compressed-tensors", "int4", 32)
    assert stored_bytes(model).codes == 60 * 384 * 3 * 7168 * 2048 // 2 == 507_343_011_840
    count = parameter_count(model)
    assert round(count.total / 1e9) == 1026 and round(count.active / 1e9) == 33


def test_nemotron_nano_nvfp4_experts_only_on_its_moe_blocks():
    """NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 (settings in hf_quant_config.json): 23 of its 52 blocks are MoE
    (hybrid_override_pattern 'E'), 23 Mamba-2, 6 attention. Before, the stored bytes put experts on all 52 blocks
    (kept bytes came out negative). By hand, relu^2 experts (up, down) of width 1856 and one shared expert of
    3712 on hidden 2688, NVFP4 half a byte per weight: 23 x (128 x 2 x 2688 x 1856 + 2 x 2688 x 3712) / 2 =
    14,916,894,720; the attention projections (backbone.layers.N.mixer.q_proj ...) are excluded."""
    model = _model("NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")
    stored = stored_bytes(model)
    assert stored.codes == 23 * (128 * 2 * 2688 * 1856 + 2 * 2688 * 3712) // 2 == 14_916_894_720
    assert stored.kept > 0 and model.quantization.kv_cache_dtype == "fp8"
    assert not converted(Matrix("model.layers.5.self_attn.q_proj", 1, 1), model)


def test_published_qwen3_vl_config_counts_its_vision_tower():
    """Qwen/Qwen3-VL-30B-A3B-Instruct's vision_config says model_type qwen3_vl_moe (the wrapper's type), which had no
    tower row: the tower was left out. Qwen3VLVisionModel by hand (depth 27, width 1152, MLP 4304, patch 16,
    temporal 2, 2304 positions, merge 2, out 2048, 3 deepstack mergers):
    patch 3 x 2 x 16 x 16 x 1152 + 1152 = 1,770,624; positions 2304 x 1152 = 2,654,208;
    block 4 x 1152 + (3 x 1152^2 + 3 x 1152) + (1152^2 + 1152) + (1152 x 4304 + 4304) + (4304 x 1152 + 1152)
    = 15,239,504, x 27 = 411,466,608; merger (LayerNorm 2 x 1152, 4608^2 + 4608, 4608 x 2048 + 2048) = 30,679,808;
    deepstack mergers (LayerNorm 2 x 4608) 3 x 30,686,720 = 92,060,160: 538,631,408 (text 30.53 B + 0.54 B =
    31.07 B, the checkpoint's 31.1 B)."""
    [tower] = _model("Qwen3-VL-30B-A3B-Instruct").encoders
    assert tower.counted and tower.parameters == 538_631_408


@pytest.mark.parametrize(("name", "bytes_per_token"), [
    # 62 layers x K and V x 8 KV heads x 128 x 2 bytes
    ("MiniMax-M2.5", 62 * 2 * 8 * 128 * 2),
    # MLA latent 512 + rope 64 at 2 bytes on 78 layers; the 21 layers running the indexer (indexer_types 'full')
    # add its fp8 key (128 bytes) and fp32 scale (4): 21 x 1284 + 57 x 1152 = 92,628
    ("GLM-5.2-FP8", 21 * (576 * 2 + 132) + 57 * 576 * 2),
    ("Kimi-K2.5", 61 * 576 * 2),
    ("Qwen3-VL-30B-A3B-Instruct", 48 * 2 * 4 * 128 * 2),
])
def test_kv_bytes_per_token_by_hand(name, bytes_per_token):
    assert kv_bytes_per_token(_model(name), "bf16") == bytes_per_token


@pytest.mark.parametrize(("name", "field"), [
    ("NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "moe_latent_size: 1024"),
    ("gemma-4-26B-A4B", "text_config: attention_k_eq_v: True"),
    ("DeepSeek-V4-Flash", "model_type: 'deepseek_v4'"),
    ("MiMo-V2-Flash", "model_type: 'mimo_v2_flash'"),
    ("Step-3.7-Flash", "model_type: 'step3p7'"),
    ("MiniMax-M3-MXFP8", "model_type: 'minimax_m3_vl'"),
])
def test_unmodelled_checkpoints_are_refused_naming_the_field(name, field):
    with pytest.raises(SpecError, match=re.escape(f"config.json: {field}")) as err:
        load_model(str(DATA / "refused" / name / "config.json"))
    assert "\n" not in str(err.value)


def test_qwen3_32b_awq_stored_bytes_match_its_tensor_listing():
    """Qwen/Qwen3-32B-AWQ (modules_to_not_convert null): the checkpoint's own tensor listing (tests/data/hf/
    Qwen3-32B-AWQ/SOURCE.md) gives, per layer, qweight int32 [in, out/8], qzeros int32 [in/128, out/8], scales bf16
    [in/128, out] for q (5120 -> 8192), k, v (5120 -> 1024), o (8192 -> 5120), gate, up (5120 -> 25600), down
    (25600 -> 5120), and bf16 embed, lm_head (151936 x 5120) and norms. Summed by hand from those shapes:
    codes 64 x 243,793,920 = 15,602,810,880; qzeros + scales 609,484,800; bf16 3,113,003,008 (2 x 777,912,320 x 2
    + norms 1,343,488 + 10,240); total 19,325,298,688 bytes, the listing's 18.00 GiB."""
    stored = stored_bytes(_model("Qwen3-32B-AWQ"))
    assert (stored.codes, stored.scales, stored.kept) == (15_602_810_880, 609_484_800, 3_113_003_008)
    assert stored.total == 19_325_298_688


def test_an_mlx_quantized_config_is_refused(tmp_path):
    """mlx-lm writes config["quantization"] = {"group_size": 64, "bits": 4} and no quantization_config: read as
    bf16 the weights would be 4x too large, and no GPU engine loads the layout: refused, naming `quantization`."""
    import json

    config = json.loads((DATA / "Qwen3-8B" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"quantization": {"group_size": 64, "bits": 4}}))
    with pytest.raises(SpecError, match=r"config\.json: quantization: MLX's quantized layout \(4 bits, group 64\)"):
        load_model(str(tmp_path / "config.json"))


def test_llama4_maverick_interleaves_moe_and_dense_layers():
    """meta-llama/Llama-4-Maverick-17B-128E-Instruct: interleave_moe_layer_step 2 (refused before), so by
    Llama4TextConfig's moe_layers = range(1, 48, 2) the odd layers are MoE (128 experts + 1 shared, each
    3 x 5120 x 8192 = 125,829,120, router 5120 x 128) and the even ones a dense MLP of intermediate_size_mlp 16384.
    By hand: 24 x (129 x 125,829,120 + 655,360) = 389,582,684,160; dense 24 x 3 x 5120 x 16384 = 6,039,797,760;
    attention 48 x (2 x 5120 x 5120 + 2 x 5120 x 1024) = 3,019,898,880; embedding and LM head 2 x 202048 x 5120 =
    2,068,971,520; norms 97 x 5120 = 496,640: 400,711,848,960 (the card's 400B total, 17B active)."""
    model = _model("Llama-4-Maverick-17B-128E")
    assert [model.layer_mlp(i) for i in range(4)] == ["dense", "moe", "dense", "moe"]
    count = parameter_count(model)
    assert count.total == 400_711_848_960 and round(count.active / 1e9) == 17


def test_llama4_interleaved_layout_matches_transformers():
    """The interleaved layout against transformers' own Llama4ForCausalLM at toy size (step 2: moe_layers [1, 3]):
    every parameter it allocates, counted by torch."""
    transformers = pytest.importorskip("transformers")
    from roofline.catalogue.hf import model_from_hf_config

    cfg = dict(hidden_size=64, intermediate_size=32, intermediate_size_mlp=96, num_hidden_layers=4,
               num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=1,
               interleave_moe_layer_step=2, vocab_size=100, max_position_embeddings=256, attention_chunk_size=32,
               tie_word_embeddings=False)
    reference = transformers.Llama4ForCausalLM(transformers.Llama4TextConfig(**cfg))
    ours = model_from_hf_config({"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text", **cfg}, name="t")
    assert parameter_count(ours).total == sum(p.numel() for p in reference.parameters())


def test_qwen3_5_vision_tower_is_counted():
    """Qwen/Qwen3.5-35B-A3B's tower (vision_config model_type qwen3_5_moe, left out before): Qwen3-VL's tower
    without deepstack mergers (deepstack_visual_indexes []), so by hand the Qwen3-VL-30B-A3B figure above less its
    three deepstack mergers: 538,631,408 - 92,060,160 = 446,571,248 (same widths: depth 27, 1152, 4304, out 2048).
    At toy size it equals transformers' Qwen3_5MoeVisionModel parameter count."""
    [tower] = _model("Qwen3.5-35B-A3B").encoders
    assert tower.counted and tower.parameters == 538_631_408 - 92_060_160 == 446_571_248
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from transformers.models.qwen3_5_moe import configuration_qwen3_5_moe as cm
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as mm

    from roofline.catalogue.hf_vision import TOWERS
    from roofline.catalogue.hfconfig import _Config

    toy = cm.Qwen3_5MoeVisionConfig(depth=2, hidden_size=32, intermediate_size=48, num_heads=4, out_hidden_size=40,
                                    num_position_embeddings=16, patch_size=4, spatial_merge_size=2,
                                    temporal_patch_size=2, in_channels=3)
    with torch.device("meta"):
        reference = mm.Qwen3_5MoeVisionModel._from_config(toy)
    ours = TOWERS["qwen3_5_moe_vision"](_Config(toy.to_dict(), "toy", "Qwen3_5MoeForConditionalGeneration"))
    assert ours == sum(p.numel() for p in reference.parameters()), transformers.__version__
