"""Every catalogue file validates; golden KV sizes and parameter counts (issue 2)."""

import pytest

from roofline.accounting import kv_bytes, kv_bytes_per_token, parameter_count, weight_bytes
from roofline.catalogue import hardware_names, load_hardware, load_model, model_names
from roofline.errors import SpecError

REQUIRED_HARDWARE = {"H100-SXM", "H100-PCIe", "H200", "A100-40GB", "A100-80GB", "L40S", "L4", "A10",
                     "RTX-4090", "B200", "GB200", "MI300X", "MI325X", "Gaudi3", "Jetson-AGX-Orin-64GB",
                     "Jetson-Xavier-NX-8GB"}
REQUIRED_MODELS = {"Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3.1-8B", "Llama-3.1-70B",
                   "Llama-3.1-405B", "Llama-3.2-1B", "Llama-3.2-3B", "Mistral-7B-v0.1", "Mistral-7B-v0.3",
                   "Mixtral-8x7B", "Qwen2.5-7B", "Qwen2.5-72B", "Qwen3-8B", "Qwen3-32B", "DeepSeek-V3",
                   "Gemma-2-9B", "Phi-3-mini"}


def test_catalogues_cover_the_required_entries() -> None:
    assert REQUIRED_HARDWARE <= set(hardware_names())
    assert REQUIRED_MODELS <= set(model_names())


@pytest.mark.parametrize("name", hardware_names())
def test_every_hardware_file_validates(name: str) -> None:
    hw = load_hardware(name)
    assert hw.name == name
    # dense peaks only: no device here has a dense bf16 peak above 2.6 PFLOP/s per GPU (MI355X: 2.52 dense,
    # 5.0 with structured sparsity; a 2:4-sparse figure would exceed the bound)
    assert hw.bf16_dense_flops_per_s <= 2.6e15
    assert hw.ridge_point("bf16") > 1


@pytest.mark.parametrize("name", model_names())
def test_every_model_file_validates(name: str) -> None:
    model = load_model(name)
    assert model.name == name
    assert model.source.startswith("https://")
    assert parameter_count(model).total > 0


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(SpecError, match="unknown name 'H100'; valid: .*H100-SXM"):
        load_hardware("H100")
    with pytest.raises(SpecError, match="unknown name 'llama-3.1-8b'"):
        load_model("llama-3.1-8b")  # exact names only, no case folding


# ---- the papers' devices (issue 14): figures re-derived from the datasheets' own terms ------------------


def test_jetson_figures_from_their_datasheets() -> None:
    orin, nx = load_hardware("Jetson-AGX-Orin-64GB"), load_hardware("Jetson-Xavier-NX-8GB")
    # LPDDR5 256-bit at 6400 MT/s; LPDDR4x 128-bit at 3733 MT/s (1866 MHz, double data rate)
    assert orin.memory_bytes_per_s == 256 / 8 * 6400e6 == 204.8e9
    assert nx.memory_bytes_per_s == pytest.approx(128 / 8 * 3733e6, rel=1e-3)
    # 2048 CUDA cores in 16 SMs at 1.3 GHz; 384 Volta cores (64 per SM) at 1.1 GHz
    assert (orin.sm_count, nx.sm_count) == (2048 // 128, 384 // 64) == (16, 6)
    assert orin.fp32_dense_flops_per_s == pytest.approx(2048 * 2 * 1.3e9, rel=1e-3)
    assert nx.fp32_dense_flops_per_s == pytest.approx(384 * 2 * 1.1e9, rel=1e-3)
    # Orin's GPU: 170 sparse INT8 TOPS, dense half, FP16 half of INT8; Xavier NX: 48 Tensor Cores x 64 FMA x 2 x 1.1 GHz
    assert (orin.int8_dense_ops_per_s, orin.fp16_dense_flops_per_s) == (170e12 / 2, 170e12 / 4)
    assert nx.fp16_dense_flops_per_s == pytest.approx(48 * 64 * 2 * 1.1e9, rel=1e-3)
    # memory shared with the CPU: 64 and 8 GiB of LPDDR
    assert (orin.memory_bytes, nx.memory_bytes) == (64 << 30, 8 << 30)


@pytest.mark.parametrize("name", ["A100-40GB", "A100-80GB"])
def test_a100_on_chip_figures(name: str) -> None:
    hw = load_hardware(name)
    # 19.5 TFLOPS FP32 = 108 SMs x 64 lanes x 2 x 1.41 GHz; INT32 64 per clock per SM (compute capability 8.0)
    assert hw.fp32_dense_flops_per_s == pytest.approx(108 * 64 * 2 * hw.sm_clock_hz, rel=2e-3)
    assert hw.int32_vector_ops_per_s == pytest.approx(108 * 64 * 1.41e9, rel=1e-3)
    assert (hw.shared_memory_bytes_per_clock_per_sm, hw.shared_memory_bytes_per_sm) == (128, 164 * 1024)


# ---- golden KV values (issue 2) ---------------------------------------------------------------------

def test_llama31_8b_kv_bytes_per_token() -> None:
    # 2 (K,V) x 8 kv heads x 128 head_dim x 32 layers x 2 bytes
    assert kv_bytes_per_token(load_model("Llama-3.1-8B"), "bf16") == 2 * 8 * 128 * 32 * 2 == 131_072


def test_llama32_3b_at_128k_matches_aqua_kv_15gb() -> None:
    # AQUA-KV §1: "15 GB per sequence" for Llama-3.2-3B at 131,072 tokens; 2*8*128*28*2 B/token
    assert kv_bytes(load_model("Llama-3.2-3B"), "bf16", 131_072) == 15_032_385_536


def test_llama31_70b_at_128k_matches_aqua_kv_42_9gb() -> None:
    # AQUA-KV §1: "42.9 GB" for Llama-3.1-70B at 131,072 tokens; 2*8*128*80*2 B/token
    assert kv_bytes(load_model("Llama-3.1-70B"), "bf16", 131_072) == 42_949_672_960


def test_deepseek_v3_mla_kv_bytes_per_token() -> None:
    # MLA caches the 512-wide latent plus the 64-wide RoPE key: (512 + 64) x 61 layers x 2 bytes
    assert kv_bytes_per_token(load_model("DeepSeek-V3"), "bf16") == 576 * 61 * 2 == 70_272


def test_fp8_halves_the_cache() -> None:
    m = load_model("Llama-3.1-8B")
    assert kv_bytes(m, "fp8", 1000) * 2 == kv_bytes(m, "bf16", 1000)


def test_sliding_window_layers_hold_at_most_w_tokens() -> None:
    gemma = load_model("Gemma-2-9B")  # 42 layers alternating sliding(4096) / global
    per_layer_token = 2 * 8 * 256 * 2
    assert kv_bytes(gemma, "bf16", 1000) == 42 * 1000 * per_layer_token
    assert kv_bytes(gemma, "bf16", 100_000) == (21 * 100_000 + 21 * 4096) * per_layer_token
    mistral = load_model("Mistral-7B-v0.1")  # every layer slides over 4096 tokens
    assert kv_bytes(mistral, "bf16", 32_768) == kv_bytes(mistral, "bf16", 4096)


# ---- parameter counts within 0.5% of the published ones ----------------------------------------------

@pytest.mark.parametrize(
    ("name", "total"),
    [
        ("Llama-3.1-8B", 8.03e9),     # model card: 8.03B
        ("Llama-3.1-70B", 70.6e9),    # model card: 70.6B
        ("Mixtral-8x7B", 46.7e9),     # Mixtral paper §2: 46.7B
        ("DeepSeek-V3", 671e9),       # DeepSeek-V3 report: 671B main model (MTP module excluded)
    ],
)
def test_parameter_counts(name: str, total: float) -> None:
    pc = parameter_count(load_model(name))
    assert pc.total == pytest.approx(total, rel=0.005)
    if load_model(name).moe is None:
        assert pc.active == pc.total


def test_active_parameters_under_each_publishers_convention() -> None:
    # Mixtral paper §2: 12.9B active, counting the embedding row a token reads
    assert parameter_count(load_model("Mixtral-8x7B")).active == pytest.approx(12.9e9, rel=0.005)
    # DeepSeek-V3 README_WEIGHTS.md: 36.6B activated (incl. the 0.9B output head, not the input
    # embedding lookup); the abstract's "37B" is that figure rounded (36.6 / 37 = 0.99)
    ds = parameter_count(load_model("DeepSeek-V3"))
    assert ds.active_compute == pytest.approx(36.6e9, rel=0.005)
    assert ds.active_compute == pytest.approx(37e9, rel=0.015)


def test_llama31_8b_parameters_by_hand() -> None:
    d, v, i, layers = 4096, 128256, 14336, 32
    attn = d * 4096 + 2 * d * 1024 + 4096 * d
    mlp = 3 * d * i
    expected = 2 * v * d + layers * (attn + mlp + 2 * d) + d
    assert parameter_count(load_model("Llama-3.1-8B")).total == expected == 8_030_261_248
    assert weight_bytes(load_model("Llama-3.1-8B"), "bf16") == 2 * expected
    assert weight_bytes(load_model("Llama-3.1-8B"), "int4") == expected // 2
