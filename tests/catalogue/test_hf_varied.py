"""Types of roofline.catalogue.hf_archs_varied (layers that vary beyond a Family row), against tiny transformers
models and published sizes.

The harness numbers (tests/catalogue/hf_exactness.measure) come from the instantiated torch modules; the expected
differences and cache bytes are counted by hand from the modeling code, full-size totals from the model's paper.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from roofline.accounting import kv_bytes, parameter_count
from roofline.catalogue.hf import model_from_hf_config
from roofline.errors import SpecError

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from hf_coverage import default_config  # noqa: E402
from hf_exactness import measure  # noqa: E402


def test_longcat_flash_cache_exact_and_only_the_unused_zero_expert_rows_differ():
    # toy: 4 LongcatFlashDecoderLayers, 3 zero experts, expert width 24, hidden 40. transformers allocates
    # gate_up_proj rows for the zero experts (2 x 24 x 40 each) that its forward never reads: 4 x 3 x 1920
    got = measure("longcat_flash", "LongcatFlashForCausalLM")
    assert got["hf_params"] - got["roofline_params"] == 4 * 3 * 2 * 24 * 40
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


def test_longcat_flash_default_is_the_papers_560b_with_two_mla_caches_per_layer():
    model = model_from_hf_config(default_config("longcat_flash", "LongcatFlashForCausalLM"), name="longcat")
    # arXiv 2509.01322 (LongCat-Flash technical report), abstract: 560 billion total parameters
    assert abs(parameter_count(model).total / 560e9 - 1) < 0.005
    # 28 blocks x 2 MLA sublayers, each caching kv_lora_rank 512 + qk_rope_head_dim 64 per token, bf16
    assert kv_bytes(model, "bf16", 1000) == 2 * 28 * (512 + 64) * 2 * 1000


def test_longcat_flash_refuses_a_top_k_beyond_its_experts():
    data = default_config("longcat_flash", "LongcatFlashForCausalLM") | {"moe_topk": 1000}
    with pytest.raises(SpecError, match="moe_topk: 1000 exceeds"):
        model_from_hf_config(data, name="longcat")


def test_ernie_vl_moe_matches_its_toy_with_the_vision_experts_stored():
    got = measure("ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration")
    assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


def test_ernie_vl_moe_default_is_28b_total_3b_active_with_vision_experts_outside_the_compute():
    model = model_from_hf_config(default_config("ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration"),
                                 name="ernie-vl")
    count = parameter_count(model)
    # baidu/ERNIE-4.5-VL-28B-A3B: 28 B total, 3 B activated per token (both rounded in the name)
    assert abs(count.total / 28e9 - 1) < 0.03
    assert abs(count.active_compute / 3e9 - 1) < 0.05
    # 27 sparse layers x (64 vision experts x 3 x 2560 x 512 + router 2560 x 64 + correction bias 64), by hand
    assert model.model_extra_params == 27 * (64 * 3 * 2560 * 512 + 2560 * 64 + 64)


def test_ernie_vl_moe_refuses_a_single_expert_width():
    data = default_config("ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration")
    data["text_config"]["moe_intermediate_size"] = 1536
    with pytest.raises(SpecError, match="moe_intermediate_size: expected \\[text width, vision width\\]"):
        model_from_hf_config(data, name="ernie-vl")


@pytest.mark.parametrize("context", [6, 24])
def test_muse_spark_matches_its_toy_below_and_past_the_window(context):
    # 24 tokens > the toy's sliding_window 16: transformers keeps 15 per sliding layer
    got = measure("muse_spark", "MuseSparkForConditionalGeneration", context)
    if context == 6:
        assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


def test_muse_spark_default_experts_in_their_projected_space():
    model = model_from_hf_config(default_config("muse_spark", "MuseSparkForConditionalGeneration"), name="spark")
    # d 8192, moe_hidden_size 4096, moe_intermediate_size 4096: 3 x 4096 x 4096 per expert = 3 x 8192 x 2048
    assert model.moe.expert_intermediate_size == 2048
    # pre / post projections 2 x 8192 x 4096, pre / post expert norms 2 x 4096, residual gates 2 x 8192
    assert model.layer_extra_params == 2 * 8192 * 4096 + 2 * 4096 + 2 * 8192


def test_muse_spark_refuses_an_expert_space_hidden_size_does_not_divide():
    data = default_config("muse_spark", "MuseSparkForConditionalGeneration")
    data["text_config"]["moe_hidden_size"] = 4095
    data["text_config"]["moe_intermediate_size"] = 4095
    with pytest.raises(SpecError, match="moe_hidden_size: 4095 x moe_intermediate_size 4095 is not a multiple"):
        model_from_hf_config(data, name="spark")


def _rwkv(**over):
    # RWKV/rwkv-4-169m-pile config.json: hidden 768, 12 layers, intermediate null (4 x 768), vocabulary 50277
    data = {"architectures": ["RwkvForCausalLM"], "model_type": "rwkv", "vocab_size": 50277, "hidden_size": 768,
            "num_hidden_layers": 12, "attention_hidden_size": 768, "intermediate_size": None,
            "context_length": 1024, "tie_word_embeddings": False}
    return model_from_hf_config(data | over, where="rwkv-4-169m-pile/config.json")


def test_rwkv_matches_its_toy_state_outside_the_cache():
    # RwkvCausalLMOutput.state: 5 tensors of hidden 40 x 4 layers, fp32 in the toy
    got = measure("rwkv", "RwkvForCausalLM")
    assert got["hf_cache_bytes"] == 5 * 40 * 4 * 4
    assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]


def test_rwkv_169m_parameters_and_state_by_hand():
    model = _rwkv()
    d, inner, layers, vocab = 768, 4 * 768, 12, 50277
    # per layer: time mixing 4 d^2 + 5 d, channel mixing 2 d inner + d^2 + 2 d, ln1 / ln2 4 d; embeddings, head,
    # ln_out 2 d and layer 0's pre_ln 2 d
    per_layer = 4 * d * d + 5 * d + 2 * d * inner + d * d + 2 * d + 4 * d
    assert parameter_count(model).total == layers * per_layer + 2 * vocab * d + 4 * d
    # 169 M by the checkpoint's name
    assert abs(parameter_count(model).total / 169e6 - 1) < 0.01
    # state per sequence at bf16 token shifts and fp32 WKV: 12 x (2 x 768 x 2 + 3 x 768 x 4), whatever the context
    assert kv_bytes(model, "bf16", 100) == kv_bytes(model, "bf16", 100_000) == 12 * (2 * 768 * 2 + 3 * 768 * 4)


def test_rwkv_refuses_an_attention_width_other_than_hidden():
    with pytest.raises(SpecError, match="attention_hidden_size: 512 differs from hidden_size 768"):
        _rwkv(attention_hidden_size=512)


def test_xlstm_matches_its_toy_but_the_caches_position_counter():
    # toy: hidden 128, 4 heads of d_k 16 / d_v 32, 4 layers, fp32: C, n, m per head; xLSTMCache also holds
    # seqlen_offset, one int64 position counter (8 bytes), not state
    got = measure("xlstm", "xLSTMForCausalLM")
    assert got["roofline_params"] == got["hf_params"]
    assert got["roofline_cache_bytes"] == 4 * 4 * (16 * 32 + 16 + 1) * 4
    assert got["hf_cache_bytes"] - got["roofline_cache_bytes"] == 8


def test_xlstm_7b_state_by_hand_in_the_reference_kernels_fp32():
    model = model_from_hf_config(default_config("xlstm", "xLSTMForCausalLM"), name="xlstm-7b")
    # 32 blocks x 8 heads x (256 x 512 + 256 + 1) fp32, independent of the context
    assert kv_bytes(model, "bf16", 10) == kv_bytes(model, "bf16", 10**6) == 32 * 8 * (256 * 512 + 256 + 1) * 4
    # transformers' xLSTMCache keeps it at the model dtype
    assert kv_bytes(model, "bf16", 10, convention="transformers") == 32 * 8 * (256 * 512 + 256 + 1) * 2
    assert model.intermediate_size == 10944  # 4096 x 2.667 rounded up to a multiple of 64


def test_xlstm_refuses_widths_its_cache_would_round():
    data = default_config("xlstm", "xLSTMForCausalLM") | {"hidden_size": 4000, "embedding_dim": 4000}
    with pytest.raises(SpecError, match="qk_dim_factor: hidden_size x qk_dim_factor = 2000 must be a multiple of 64"):
        model_from_hf_config(data, name="xlstm")


def _phi4_multimodal_toy():
    """(decoder parameters, cache bytes of a 6-token text forward, config.json) of Phi-4-multimodal's toy: built on
    the meta device (its image and audio towers keep their full default sizes), the decoder's parameters counted
    outside embed_tokens_extend, then the towers dropped (a text-only forward never calls them) and the rest
    materialised on the CPU with random weights."""
    import json
    import warnings

    import torch
    import transformers
    from hf_exactness import PROMPT_TOKENS, _cache_bytes, tiny_config

    config = tiny_config("phi4_multimodal")
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.Phi4MultimodalForCausalLM(config).eval()
    towers = model.model.embed_tokens_extend
    decoder = sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in towers.parameters())
    towers.image_embed, towers.audio_embed = torch.nn.Module(), torch.nn.Module()
    model.to_empty(device="cpu")
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
        for buffer in model.buffers():  # rotary inverse frequencies: any finite values run the forward
            buffer.fill_(1.0) if buffer.is_floating_point() else buffer.zero_()
        out = model(input_ids=torch.randint(0, 200, (1, PROMPT_TOKENS)), use_cache=True)
    data = json.loads(json.dumps(config.to_dict(), default=str)) | {"architectures": ["Phi4MultimodalForCausalLM"]}
    return decoder, _cache_bytes(out.past_key_values), data


def test_phi4_multimodal_decoder_matches_its_toy_with_the_towers_named_apart():
    decoder, cache, data = _phi4_multimodal_toy()
    model = model_from_hf_config(data, name="phi4-mm")
    assert parameter_count(model).total == decoder
    # 4 layers x K and V of 2 heads x head_dim 10 x 6 tokens, fp32 (below the toy's window 16)
    assert cache == 4 * 2 * 2 * 10 * 6 * 4
    assert int(kv_bytes(model, "fp32", 6, convention="transformers")) == cache
    assert [(e.modality, e.counted) for e in model.encoders] == [("vision", False), ("audio", False)]


@pytest.mark.parametrize(("model_type", "architecture", "where"), [
    ("llama", "LlamaForCausalLM", None), ("zaya", "ZayaForCausalLM", None),
    ("muse_spark", "MuseSparkForConditionalGeneration", None), ("llava", "LlavaForConditionalGeneration", "vision"),
    ("qwen2_audio", "Qwen2AudioForConditionalGeneration", "audio"),
])
@pytest.mark.parametrize("value", [[], {}])
def test_a_model_type_that_is_not_a_string_is_one_spec_error(model_type, architecture, where, value):
    data = default_config(model_type, architecture)
    (data[f"{where}_config"] if where else data)["model_type"] = value
    try:
        model_from_hf_config(data, name=model_type)
    except SpecError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize(("fixture", "engine", "message"), [
    ("hf-default-rwkv", "vllm", "vllm: runs no rwkv4 model"),
    ("hf-default-xlstm", "vllm", "vllm: runs no mlstm model"),
    ("hf-default-rwkv", "sglang", "sglang: a model without attention layers (pure recurrent) is not modelled"),
    ("Mamba-2.8B", "sglang", "sglang: a model without attention layers (pure recurrent) is not modelled"),
])
def test_engines_that_run_no_such_model_refuse_in_one_line(fixture, engine, message, capsys):
    from roofline.cli import main

    path = Path(__file__).resolve().parents[1] / "data" / "hf" / fixture / "config.json"
    assert main(["capacity", "--model", str(path), "--hardware", "H200", "--engine", engine]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1



# baidu/ERNIE-4.5-VL-28B-A3B-PT's remote-code config.json (model_type ernie4_5_moe_vl): the text keys at the top
# level, [text, vision] pairs for moe_num_experts, moe_intermediate_size and the MoE layer range (values as the
# checkpoint's, quoted by mlxcel's Ernie45MoeVlTextConfig geometry test); vision_config left out (its DFNRope tower
# is not counted here)
ERNIE_VL_REMOTE = {
    "architectures": ["Ernie4_5_VLMoeForConditionalGeneration"], "model_type": "ernie4_5_moe_vl",
    "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28, "num_attention_heads": 20,
    "num_key_value_heads": 4, "vocab_size": 103424, "max_position_embeddings": 131072, "tie_word_embeddings": True,
    "use_bias": False, "moe_num_experts": [64, 64], "moe_intermediate_size": [1536, 512], "moe_k": 6,
    "moe_layer_start_index": [1, 1], "moe_layer_end_index": [29, 28], "moe_layer_interval": 1,
    "moe_num_shared_experts": 2}


def test_ernie_vl_moe_reads_baidus_remote_code_pairs_as_vllm_does():
    """vLLM's ernie45_vl_moe.py: layer i is sparse when min(start) <= i <= max(end) (end 29 past the last layer 27
    stops there), text experts moe_num_experts[0] of moe_intermediate_size[0], vision experts [1] of [1]. Counted by
    hand: embedding 103,424 x 2,560 (tied); per layer attention 2,560 x (2,560 + 2 x 512) + 2,560 x 2,560 and two
    norms of 2,560; layer 0 dense 3 x 2,560 x 12,288; layers 1..27 sparse: 64 experts of 3 x 2,560 x 1,536, the text
    router 2,560 x 64 and its correction bias 64, two shared experts as one MLP of 3,072; the vision experts 64 x 3 x
    2,560 x 512, their router and bias stored; the final norm 2,560."""
    model = model_from_hf_config(ERNIE_VL_REMOTE, name="ernie-vl-pt")
    assert (model.moe.num_experts, model.moe.expert_intermediate_size, model.moe.first_dense_layers) == (64, 1536, 1)
    layer = 2560 * (2560 + 2 * 512) + 2560 * 2560 + 2 * 2560
    text_moe = 64 * 3 * 2560 * 1536 + 2560 * 64 + 64 + 3 * 2560 * 3072
    vision_moe = 64 * 3 * 2560 * 512 + 2560 * 64 + 64
    total = 103424 * 2560 + 28 * layer + 3 * 2560 * 12288 + 27 * (text_moe + vision_moe) + 2560
    assert parameter_count(model).total == total
    # the KV cache is the text decoder's: 28 layers x 4 KV heads x 128 x (K, V) x 2 bytes per token
    assert kv_bytes(model, "bf16", 1) == 28 * 4 * 128 * 2 * 2


def test_ernie_vl_moe_remote_code_vision_count_and_interval():
    # moe_num_experts [64, 32]: 32 vision experts stored; interval 2: layers 1, 3, ..., 27 sparse (14)
    model = model_from_hf_config(ERNIE_VL_REMOTE | {"moe_num_experts": [64, 32], "moe_layer_interval": 2},
                                 name="ernie-vl-pt")
    assert model.moe.num_experts == 64
    assert model.model_extra_params == 14 * (32 * 3 * 2560 * 512 + 2560 * 32 + 32)


@pytest.mark.parametrize(("patch", "needle"), [
    ({"moe_layer_end_index": [27, 20]}, "moe_layer_start_index: text range 1..27 and vision range 1..20"),
    ({"moe_num_experts": [64, 64, 64]}, "moe_num_experts: expected one integer or a [text, vision] pair"),
    ({"moe_layer_start_index": [1, "x"]}, "moe_layer_start_index: expected one integer or a [text, vision] pair"),
])
def test_ernie_vl_moe_remote_code_pairs_that_are_not_modelled_are_refused(patch, needle):
    with pytest.raises(SpecError, match=re.escape(needle)):
        model_from_hf_config(ERNIE_VL_REMOTE | patch, name="ernie-vl-pt")
