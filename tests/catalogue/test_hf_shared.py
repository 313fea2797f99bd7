"""Inkling (catalogue.hf_archs_shared): parameters and cache bytes of the default config by hand, checkpoint keys
against transformers' own config, refusals as one line naming the key, and the planner's view of its layers.

Hand derivations read transformers v5.24.0 src/transformers/models/inkling/modeling_inkling.py: InklingAttention
(q / k / v / o, r_proj, q_norm / k_norm, k_sconv / v_sconv, rel_logits_proj), InklingDecoderLayer (two RMSNorms,
attn_sconv / mlp_sconv), InklingMoE (experts, shared experts, router over both + global_scale), InklingMLP
(+ global_scale), InklingNormedEmbedding; caches from cache_utils v5.24 (LinearAttentionAndSlidingWindowAttention
Layer: W - 1 tokens, kernel conv columns of the fp32 modules).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.accounting import kv_bytes, parameter_count
from roofline.catalogue.hf import model_from_hf_config
from roofline.errors import SpecError

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "hf" / "hf-default-inkling_text" / "config.json"

# InklingTextConfig's defaults: 66 layers, every 6th full (i + 1 multiple of 6: 11 full, 55 sliding)
D, V, LAYERS, FULL, SLIDING = 6144, 201024, 66, 11, 55
HEADS, HEAD_DIM, FULL_KV, SWA_KV = 64, 128, 8, 16
D_REL, EXTENT, WINDOW, KERNEL = 16, 1024, 512, 4
EXPERTS, SHARED, MOE_WIDTH = 256, 2, 3072


def _config() -> dict:
    return json.loads(FIXTURE.read_text())


def _inkling(data: dict):
    return model_from_hf_config(data, where="inkling/config.json", name="inkling")


def _attention_layer(kv_heads: int, extent: int) -> int:
    q = D * HEADS * HEAD_DIM
    kv = D * kv_heads * HEAD_DIM
    r_proj, bank = D * HEADS * D_REL, D_REL * extent
    convs = KERNEL * (2 * kv_heads * HEAD_DIM + 2 * D)
    return 2 * q + 2 * kv + 2 * HEAD_DIM + r_proj + bank + convs


def test_default_inkling_parameters_by_hand():
    moe = EXPERTS * 3 * D * MOE_WIDTH + SHARED * 3 * D * MOE_WIDTH + (EXPERTS + SHARED) * D + 1
    per_layer_norms = 2 * D
    expected = (V * D + D  # embedding and its RMSNorm
                + FULL * _attention_layer(FULL_KV, EXTENT) + SLIDING * _attention_layer(SWA_KV, WINDOW)
                + LAYERS * (moe + per_layer_norms) + D + V * D)  # final norm, untied LM head
    # 975,340,270,146: also what InklingForCausalLM(InklingTextConfig()) holds on torch's meta device
    assert expected == 975_340_270_146
    assert parameter_count(_inkling(_config())).total == expected


def test_default_inkling_cache_bytes_by_hand():
    model = _inkling(_config())
    context = 131072
    kv_full = FULL * 2 * FULL_KV * HEAD_DIM * 2  # bf16 bytes per token
    kv_sliding = SLIDING * 2 * SWA_KV * HEAD_DIM * 2
    channels = FULL * (2 * FULL_KV * HEAD_DIM + 2 * D) + SLIDING * (2 * SWA_KV * HEAD_DIM + 2 * D)
    engine = kv_full * context + kv_sliding * WINDOW + (KERNEL - 1) * channels * 2
    transformers = kv_full * context + kv_sliding * (WINDOW - 1) + KERNEL * channels * 4
    assert kv_bytes(model, "bf16", context) == engine == 6_142_619_648
    assert kv_bytes(model, "bf16", context, convention="transformers") == transformers == 6_152_757_248


def test_checkpoint_keys_read_as_transformers_reads_them():
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    # a released checkpoint's names: sconv_kernel_size, sliding_window, num_local_experts, dense_mlp_idx and
    # dense_intermediate_size (then intermediate_size is the experts' width, InklingTextConfig.__post_init__)
    keys = {"hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "swa_num_attention_heads": 4, "swa_num_key_value_heads": 4, "swa_head_dim": 16,
            "sliding_window": 8, "d_rel": 4, "rel_extent": 16, "sconv_kernel_size": 3, "num_local_experts": 4,
            "num_experts_per_tok": 2, "n_shared_experts": 1, "dense_mlp_idx": 2, "intermediate_size": 48,
            "dense_intermediate_size": 96, "vocab_size": 300, "max_position_embeddings": 256}
    config = transformers.InklingTextConfig(**keys)
    with torch.device("meta"):
        expected = sum(p.numel() for p in transformers.InklingForCausalLM(config).parameters())
    got = _inkling(keys | {"architectures": ["InklingForCausalLM"], "model_type": "inkling_text"})
    assert parameter_count(got).total == expected
    assert got.moe.first_dense_layers == 2 and got.moe.expert_intermediate_size == 48
    assert got.intermediate_size == 96 and got.attention_convs.kernel == 3


@pytest.mark.parametrize(("edit", "message"), [
    ({"layer_types": ["hybrid", "full_attention"] + ["hybrid"] * 64}, "layer_types: expected 66 of hybrid"),
    ({"swa_num_key_value_heads": 24}, "swa_num_key_value_heads: 24 does not divide"),
    ({"mlp_layer_types": ["sparse", "dense"] + ["sparse"] * 64}, "mlp_layer_types: only leading dense"),
    ({"d_rel": None}, "d_rel"),
])
def test_bad_inkling_configs_are_one_line_naming_the_key(edit, message):
    with pytest.raises(SpecError, match=message):
        _inkling(_config() | edit)


def test_sliding_layers_keep_their_own_heads_in_the_planner():
    from roofline.costmodel.attention import _at_layer_heads
    from roofline.costmodel.blocks import Ctx, Shard
    from roofline.methods.baseline import Baseline
    from roofline.methods.registry import build_cache

    model = _inkling(_config())
    cache = build_cache(Baseline(), model)
    sliding = next(layer for layer in cache.layers if layer.attention.kind == "sliding")
    ctx = Ctx(model=model, shard=Shard.of(model, 8), weight_dtype="bf16", act_bytes=2, compute_dtype="bf16",
              group="attn", count=1)
    own = _at_layer_heads(ctx, sliding)
    assert (own.shard.heads, own.shard.kv_heads) == (HEADS // 8, SWA_KV // 8)
    # each attending layer's cache holds its conv states: (kernel - 1) x (2 kv + 2 d) bf16 values per sequence
    conv = next(t for t in sliding.tensors if t.name == "conv_state")
    assert conv.resident_bytes == (KERNEL - 1) * (2 * SWA_KV * HEAD_DIM + 2 * D) * 2


def test_serving_engines_refuse_the_conv_states_by_name():
    from roofline.engines.base import check_heads

    model = _inkling(_config() | {"swa_num_key_value_heads": FULL_KV})  # uniform heads: only the convs differ
    with pytest.raises(SpecError, match="--engine: vLLM: the conv states beside attention"):
        check_heads(model, 8, "vLLM")


def _inkling2_layers(d, heads, kv_heads, head_dim, d_rel, extent, kernel, experts, width, full, sliding) -> int:
    """Parameters of Inkling-2's decoder layers (Inkling2SlidingDecoderLayer / Inkling2FullDecoderLayer), all of
    one head shape, layer 0 sliding."""
    q, kv = heads * head_dim, kv_heads * head_dim
    attention = 3 * d * q + 2 * d * kv  # q, gate, o (d x q each) and k, v
    attention += q + d * heads + d * heads * d_rel + heads * d_rel + d_rel * extent  # q scale, sinks, rel. bias
    attention += kernel * (2 * kv + 2 * d)  # the four convs' taps (a full layer's static_weight as many)
    moe = experts * 3 * d * width + experts * d  # experts and the router
    layers = full + sliding
    residual_queries = layers * d + (sliding - 1) * d + full * 3 * d  # mlp_input; attention_input but layer 0's
    full_only = full * (2 * d * kv_heads * kernel + 2 * d)  # dynamic convs' weight_proj, two more norms
    return layers * (attention + moe + 2 * d) + residual_queries + full_only


def test_default_inkling2_parameters_and_cache_by_hand():
    data = json.loads((FIXTURE.parents[1] / "hf-default-inkling2_text" / "config.json").read_text())
    model = _inkling(data)
    # Inkling2TextConfig's defaults: 48 layers (every 6th full: 8 full, 40 sliding), 48 heads, 8 KV heads of 128
    # on both kinds, d 4608, window = rel_extent = 1024, 384 experts of 2304, head of 200,058 rows under 201,024
    d, v, head_rows, full, sliding, kv, kernel = 4608, 201024, 200058, 8, 40, 8 * 128, 4
    layers = _inkling2_layers(d, 48, 8, 128, 16, 1024, kernel, 384, 2304, full, sliding)
    expected = v * d + d + layers + d + d + head_rows * d  # embedding and its norm, final norm and query, head
    # 593,718,478,848: also what Inkling2ForCausalLM(Inkling2TextConfig()) holds on torch's meta device
    assert expected == 593_718_478_848 == parameter_count(model).total
    context, per_token = 1 << 20, 2 * kv * 2
    convs = (full + sliding) * (2 * kv + 2 * d)
    engine = full * per_token * context + sliding * per_token * 1024 + (kernel - 1) * convs * 2
    transformers = full * per_token * context + sliding * per_token * 1023 + kernel * convs * 4
    assert kv_bytes(model, "bf16", context) == engine
    assert kv_bytes(model, "bf16", context, convention="transformers") == transformers


def _loop_config() -> dict:
    return json.loads((FIXTURE.parents[1] / "hf-default-inkling2_loop_text" / "config.json").read_text())


def test_default_inkling2_loop_stores_its_loop_layers_once_and_caches_every_pass():
    model = _inkling(_loop_config())
    # Inkling2LoopTextConfig's defaults: 24 layers (4 full, 20 sliding), d 2304, 24 heads, 8 KV heads of 128, 128
    # experts of 1152; layers 6..17 run 3 times: 48 applications, 8 of them full, each pass with its own cache
    d, v, head_rows, kv, kernel, loop, rank = 2304, 201024, 200058, 8 * 128, 4, 12, 64
    layers = _inkling2_layers(d, 24, 8, 128, 16, 1024, kernel, 128, 1152, 4, 20)
    gates = loop * 4 * (2 * d * rank + 2 * rank * d)  # four Inkling2LoopMessageGate per loop layer
    expected = v * d + d + layers + gates + loop * 4 * d + d + d + head_rows * d  # + the message queries
    # 26,068,156,416: also what Inkling2LoopForCausalLM(Inkling2LoopTextConfig()) holds on torch's meta device
    assert expected == 26_068_156_416 == parameter_count(model).total
    context, per_token, full, sliding = 8192, 2 * kv * 2, 8, 40
    convs = (full + sliding) * (2 * kv + 2 * d)
    assert kv_bytes(model, "bf16", context) == (full * per_token * context + sliding * per_token * 1024
                                               + (kernel - 1) * convs * 2) == 438_124_544


def test_a_loop_breaking_the_layer_pattern_is_refused():
    kinds = ["hybrid_sliding"] * 24
    kinds[2] = "hybrid"  # the loop (layers 6..17) is all sliding: its passes do not repeat the pattern
    with pytest.raises(SpecError, match="loop_layer_index_start: loop layers whose kinds do not repeat"):
        _inkling(_loop_config() | {"layer_types": kinds})


def test_inkling2_head_wider_than_the_embedding_is_refused():
    data = json.loads((FIXTURE.parents[1] / "hf-default-inkling2_text" / "config.json").read_text())
    with pytest.raises(SpecError, match="unpadded_vocab_size: 201025 exceeds vocab_size 201024"):
        _inkling(data | {"unpadded_vocab_size": 201025})


@pytest.mark.parametrize(("model_type", "architecture"), [
    ("inkling_text", "InklingForCausalLM"), ("inkling2_text", "Inkling2ForCausalLM"),
    ("inkling2_loop_text", "Inkling2LoopForCausalLM"),
])
def test_past_the_window_inkling_caches_match_transformers(model_type, architecture):
    pytest.importorskip("transformers")
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from hf_exactness import measure

    # 24 prompt tokens > the toy's window 16: transformers keeps 15 per sliding layer (and per loop pass)
    got = measure(model_type, architecture, context=24)
    assert got["roofline_cache_bytes"] == got["hf_cache_bytes"]
    assert got["roofline_params"] == got["hf_params"]


def _dory_config() -> dict:
    return json.loads((FIXTURE.parents[1] / "hf-default-dory" / "config.json").read_text())


def test_default_dory_stores_its_recurrent_layers_once_and_caches_every_loop():
    model = _inkling(_dory_config())  # saved as released: attention and mlp blocks listed apart, counts doubled
    # DoryConfig's defaults: 36 layers (8 input, 20 recurrent looped twice, 8 output: 56 applications, every 4th
    # full), d 2560, 16 heads and 4 KV heads of 256, MLP 7168, vocabulary 131,072, untied
    d, v, q, kv, width = 2560, 131072, 16 * 256, 4 * 256, 7168
    layer = 3 * d * q + 2 * d * kv + 2 * q  # q, gate, o; k, v; sqk and s_gate
    layer += 3 * d * width + 2 * width + 2 * d  # gate, up, down; suv_gate and suv_up; lambda_1 and lambda_2
    # 3,975,229,440: also what DoryForCausalLM(DoryConfig()) holds on torch's meta device
    assert 36 * layer + 2 * v * d + v == 3_975_229_440 == parameter_count(model).total
    per_token = 2 * kv * 2
    assert kv_bytes(model, "bf16", 8192) == 14 * per_token * 8192 + 42 * per_token * 1024 == 645_922_816


@pytest.mark.parametrize(("edit", "message"), [
    ({"recurrent_kv_cache_mode": "last_loop"}, "recurrent_kv_cache_mode: 'last_loop' not modelled"),
    ({"n_input_layers": 6, "n_recurrent_layers": 50}, "n_input_layers: recurrent layers whose kinds do not repeat"),
    ({"n_recurrent_layers": 80}, "n_recurrent_layers: 40 recurrent layers do not fill"),
])
def test_bad_dory_configs_are_one_line_naming_the_key(edit, message):
    with pytest.raises(SpecError, match=message):
        _inkling(_dory_config() | edit)


def test_default_hrm_text_stores_two_stacks_and_caches_every_pass():
    data = json.loads((FIXTURE.parents[1] / "hf-default-hrm_text" / "config.json").read_text())
    model = _inkling(data)
    # HrmTextConfig's defaults: 16 layers per stack (L and H), 2 H cycles of 3 L passes + 1 H pass: 128 cache slots;
    # d 1536, 12 heads of 128 (MHA), MLP 4096, vocabulary 151,808, untied
    d, v, q, width = 1536, 151808, 12 * 128, 4096
    layer = 5 * d * q + 3 * d * width  # q, k, v, gate, o; gate, up, down (weightless norms)
    # 1,447,822,848: also what HrmTextForCausalLM(HrmTextConfig()) holds on torch's meta device
    assert 2 * 16 * layer + 2 * v * d + d == 1_447_822_848 == parameter_count(model).total  # + z_L_init
    assert kv_bytes(model, "bf16", 2048) == 16 * 2 * 4 * 2 * q * 2 * 2048 == 1_610_612_736


def test_hrm_text_layer_count_must_match_its_cycles():
    data = json.loads((FIXTURE.parents[1] / "hf-default-hrm_text" / "config.json").read_text())
    with pytest.raises(SpecError, match=r"num_hidden_layers: 100 is not num_layers_per_stack x H_cycles"):
        _inkling(data | {"num_hidden_layers": 100})
