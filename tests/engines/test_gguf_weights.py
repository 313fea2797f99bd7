"""GGUF weights (roofline.ggml_types, roofline.gguf_quant): every expected number here is counted by hand from ggml's
block structs and llama-quantize's rules, or read from a logged llama.cpp start-up (citations beside each)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from roofline.catalogue import load_model
from roofline.errors import SpecError
from roofline.ggml_types import bytes_per_element, row_bytes
from roofline.gguf_quant import gguf_weights, use_more_bits, weights_on_fullest_gpu

MIB = 1 << 20
QK_K = 256
# ggml-common.h's static_asserts at llama.cpp 0c1e570, by hand (ggml_half 2 B, K_SCALE_SIZE 12)
HAND_BLOCKS = {
    "q4_0": (32, 2 + 32 // 2),                              # d + 16 nibble bytes = 18
    "q8_0": (32, 2 + 32),                                   # d + 32 int8 = 34
    "q5_0": (32, 2 + 4 + 16),                               # d + qh + qs = 22
    "q2_K": (QK_K, 2 * 2 + QK_K // 16 + QK_K // 4),         # 4 + 16 + 64 = 84
    "q3_K": (QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),         # 2 + 64 + 32 + 12 = 110
    "q4_K": (QK_K, 2 * 2 + 12 + QK_K // 2),                 # 4 + 12 + 128 = 144
    "q5_K": (QK_K, 2 * 2 + 12 + QK_K // 2 + QK_K // 8),     # 4 + 12 + 128 + 32 = 176
    "q6_K": (QK_K, 2 + QK_K // 16 + 3 * QK_K // 4),         # 2 + 16 + 192 = 210
    "q8_K": (QK_K, 4 + QK_K + QK_K // 16 * 2),              # float d + 256 + 16 int16 = 292
}


@pytest.mark.parametrize("name", sorted(HAND_BLOCKS))
def test_block_bytes_are_ggmls_structs(name):
    elements, size = HAND_BLOCKS[name]
    assert bytes_per_element(name) == Fraction(size, elements)
    assert row_bytes(name, 4096) == 4096 // elements * size


def test_row_not_a_multiple_of_the_block_is_refused():
    with pytest.raises(ValueError, match="not a multiple"):
        row_bytes("q4_K", 4096 + 32)


def test_llamacpp_kv_cache_types_read_the_same_table():
    from roofline.engines.llamacpp import BPE

    assert BPE["q8_0"] == 34 / 32 and BPE["q4_0"] == 18 / 32 and BPE["f16"] == 2.0


# Llama-3.1-8B's tensors (models/Llama-3.1-8B.yaml): per block q, o 4096 x 4096; k, v 4096 x 1024; gate, up, down
# 4096 x 14336; token_embd and output 4096 x 128256; 65 F32 norms of 4096 (2 per block + output_norm)
Q = O = 4096 * 4096
K = V = 4096 * 1024
FFN = 4096 * 14336
EMB = 4096 * 128256
NORMS = 65 * 4096 * 4


def _bytes(elements: int, t: str) -> Fraction:
    elements_per_block, size = HAND_BLOCKS.get(t, (1, 2))
    return Fraction(elements * size, elements_per_block)


@pytest.fixture(scope="module")
def llama8b():
    return load_model("Llama-3.1-8B")


def test_f16_is_run1s_logged_buffers(llama8b):
    """validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run1/driver.out: 'CUDA0 model buffer size =
    14315.02 MiB', 'CPU_Mapped model buffer size = 1002.00 MiB' (the F16 GGUF of llamacpp_model.py)."""
    w = gguf_weights(llama8b, "F16")
    assert round(w.gpu_bytes / MIB, 2) == 14315.02
    assert round(w.token_embd_bytes / MIB, 2) == 1002.00


def test_use_more_bits_marks_16_of_32_layers():
    # i < 4, i >= 28, and (i - 4) % 3 == 2 for i in 6, 9, ..., 27: 4 + 4 + 8
    assert sum(use_more_bits(i, 32) for i in range(32)) == 16
    assert [i for i in range(4, 28) if use_more_bits(i, 32)] == [6, 9, 12, 15, 18, 21, 24, 27]


def test_q4_k_m_by_hand(llama8b):
    """Q4_K_M: half the layers' attn_v and ffn_down (use_more_bits) and output at q6_K, every other matrix and
    token_embd at q4_K. The type counts are llama.cpp's own log of Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf
    (mozilla-ai/llamafile issue #516: f32 66, q4_K 193, q6_K 33; its f32 count has rope_freqs.weight, which
    llamacpp_model.py does not write)."""
    w = gguf_weights(llama8b, "Q4_K_M")
    assert w.type_counts() == {"f32": 65, "q4_K": 193, "q6_K": 33}
    layers = 32 * _bytes(Q + K + O + 2 * FFN, "q4_K") + 16 * _bytes(V + FFN, "q4_K") + 16 * _bytes(V + FFN, "q6_K")
    gpu = layers + _bytes(EMB, "q6_K") + NORMS
    assert w.gpu_bytes == gpu == 4_617_396_224
    assert w.token_embd_bytes == _bytes(EMB, "q4_K") == 295_501_824


def test_q4_k_m_is_logged_llamacpps_buffers(llama8b):
    """A full offload of Llama-3.1-8B Q4_K_M (ollama's llama3.1:8b) logs 'ROCm0 model buffer size = 4403.49 MiB',
    'CPU_Mapped model buffer size = 281.81 MiB' (likelovewant/ollama-for-amd issue #63) and 'file size = 4.58 GiB
    (4.89 BPW)' (llama_model_loader's sum of tensor bytes; + rope_freqs' 256 B)."""
    w = gguf_weights(llama8b, "Q4_K_M")
    assert round(w.gpu_bytes / MIB, 2) == 4403.49
    assert round(w.token_embd_bytes / MIB, 2) == 281.81
    assert round((w.total_bytes + 256) / (1 << 30), 2) == 4.58


def test_q8_0_by_hand_and_logged(llama8b):
    """Q8_0: every matrix and output at q8_0 (output keeps q8_0: llama_tensor_get_type_impl's 'new_type !=
    GGML_TYPE_Q8_0'). Llama-3-8B's shapes are 3.1's: its Q8_0 logs 'ROCm0 buffer size = 7605.33 MiB', 'CPU buffer
    size = 532.31 MiB' with --n-gpu-layers 100 (a ggml-org/llama.cpp issue as the index quotes it)."""
    w = gguf_weights(llama8b, "Q8_0")
    assert w.type_counts() == {"f32": 65, "q8_0": 226}
    assert w.gpu_bytes == 32 * _bytes(Q + 2 * K + O + 3 * FFN, "q8_0") + _bytes(EMB, "q8_0") + NORMS
    assert round(w.gpu_bytes / MIB, 2) == 7605.33 and round(w.token_embd_bytes / MIB, 2) == 532.31


def test_q4_0_and_q6_k_by_hand(llama8b):
    """Q4_0: the output at q6_K (not q8_0, and 4096 a multiple of 256), token_embd at q4_0. Q6_K: all q6_K."""
    q40 = gguf_weights(llama8b, "Q4_0")
    assert q40.gpu_bytes == 32 * _bytes(Q + 2 * K + O + 3 * FFN, "q4_0") + _bytes(EMB, "q6_K") + NORMS
    assert q40.token_embd_bytes == _bytes(EMB, "q4_0")
    q6 = gguf_weights(llama8b, "Q6_K")
    assert q6.gpu_bytes == 32 * _bytes(Q + 2 * K + O + 3 * FFN, "q6_K") + _bytes(EMB, "q6_K") + NORMS
    assert q6.token_embd_bytes == _bytes(EMB, "q6_K")


def test_q4_k_s_and_q3_k_m_layer_rules(llama8b):
    """Q4_K_S: attn_v of the first 4 and ffn_down of the first n/8 = 4 at q5_K; Q3_K_M: attn_v q5_K for the first 2
    else q4_K, ffn_down q5_K below n/16 = 2 else q4_K, attn_output q4_K."""
    counts = gguf_weights(llama8b, "Q4_K_S").type_counts()
    assert counts == {"f32": 65, "q4_K": 225 - 8, "q5_K": 8, "q6_K": 1}
    counts = gguf_weights(llama8b, "Q3_K_M").type_counts()
    assert counts == {"f32": 65, "q3_K": 4 * 32 + 1, "q5_K": 4, "q4_K": 2 * 30 + 32, "q6_K": 1}


def test_row_fallback_when_not_a_multiple_of_256():
    """tensor_type_fallback: a row of 2880 (gpt-oss-like widths; 2880 % 256 = 64) makes q4_K fall back to q5_0,
    q6_K to q8_0; the output at q8_0 ('nx % qk_k != 0')."""
    from roofline.specs import Model

    m = Model(name="t", source="test", architecture="LlamaForCausalLM", num_layers=2, hidden_size=2880,
              num_heads=8, num_kv_heads=2, head_dim=64, intermediate_size=2880, vocab_size=1000,
              tie_word_embeddings=False, max_position_embeddings=4096)
    types = {t.name: t.type for t in gguf_weights(m, "Q4_K_M").tensors}
    assert types["blk.0.attn_q.weight"] == "q5_0"
    assert types["blk.0.attn_v.weight"] == "q5_0"  # use_more_bits(0, 2): 0 < 2/8 = 0 and 0 >= 7*2/8 = 1 fail
    assert types["blk.1.attn_v.weight"] == "q8_0"  # use_more_bits(1, 2): 1 >= 1 -> q6_K -> q8_0
    assert types["output.weight"] == "q8_0"


def test_mixtral_eight_experts_rules():
    """n_expert == 8: attn_v and attn_k q8_0, attn_output q5_K under Q4_K_M; the experts' ffn_down by layer."""
    w = gguf_weights(load_model("Mixtral-8x7B"), "Q4_K_M")
    types = {t.name: t.type for t in w.tensors}
    assert types["blk.0.attn_v.weight"] == types["blk.0.attn_k.weight"] == "q8_0"
    assert types["blk.0.attn_output.weight"] == "q5_K"
    assert types["blk.0.ffn_down_exps.weight"] == "q6_K" and types["blk.4.ffn_down_exps.weight"] == "q4_K"
    assert types["blk.0.ffn_gate_inp.weight"] == "f32"


def test_pp_stages_split_the_layers(llama8b):
    w = gguf_weights(llama8b, "Q4_K_M")
    whole = weights_on_fullest_gpu(llama8b, "Q4_K_M")
    assert whole == w.gpu_bytes + w.token_embd_bytes
    assert weights_on_fullest_gpu(llama8b, "Q4_K_M", pp=2) < whole


def test_unsupported_models_are_refused():
    with pytest.raises(SpecError, match="MLA"):
        gguf_weights(load_model("DeepSeek-V3"), "Q4_K_M")
    with pytest.raises(SpecError, match="tensor parallelism"):
        weights_on_fullest_gpu(load_model("Llama-3.1-8B"), "Q4_K_M", tp=2)


def test_decode_step_reads_the_gguf_bytes(llama8b):
    """The decode graph's weight reads at batch 1 are the file's GPU bytes within the norms (read at their group's
    width, 65 x 4096 elements) and the one token_embd row; F16 reads what fp16 reads."""
    from roofline.costmodel.graph import build_graph
    from roofline.lazy import sp
    from roofline.methods import parse_method
    from roofline.units import B

    def weight_bytes(dtype):
        graph = build_graph(llama8b, parse_method("fp16"), "decode", weight_dtype=dtype)
        return sum(float(sp.sympify(op.count * op.traffic.get("weights", 0)).subs(B, 1)) for op in graph.ops)

    w = gguf_weights(llama8b, "Q4_K_M")
    assert weight_bytes("gguf:Q4_K_M") == pytest.approx(w.gpu_bytes, rel=2e-4)
    assert weight_bytes("gguf:F16") == weight_bytes("fp16")
