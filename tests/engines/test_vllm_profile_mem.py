"""validate/engines/profile_mem.py's parts that run without a GPU: the start-up log parser on the committed run-3
logs (the figures read there by eye) and the 2-layer configs the cases run."""

from __future__ import annotations

from pathlib import Path

from validate.engines import profile_mem
from validate.engines.profile_mem_predict import model_of

RUN3 = Path(__file__).resolve().parents[2] / "validate" / "results" / "engines" / "nvidia-h200-vllm-2026-11-29-run3"


def test_parse_log_reads_the_worker_profile():
    """Qwen3-30B-A3B-lat.log lines 30-34: 'Estimated CUDA graph memory: 0.64 GiB total', 'torch peak memory
    increase: 3.21GiB; non-torch forward increase memory: 0.24GiB; weights memory: 56.88GiB', 'Available KV cache
    memory: 57.86 GiB'; a V1-runner log (no 'Using V2 Model Runner')."""
    got = profile_mem.parse_log((RUN3 / "Qwen3-30B-A3B-lat.log").read_text())
    assert (got["log_torch_peak_gib"], got["log_non_torch_gib"], got["log_weights_gib"]) == (3.21, 0.24, 56.88)
    assert (got["log_cudagraph_estimate_gib"], got["log_available_kv_gib"]) == (0.64, 57.86)
    assert got["log_cudagraph_modes"] == [] and got["log_workspace_resizes_mb"] == []


def test_parse_log_mode_split_and_workspace_lines():
    """The DEBUG split (gpu_model_runner.py:6539-6546) and VLLM_DEBUG_WORKSPACE's resize line (workspace.py:181-188)
    in the format those lines print."""
    text = ("DEBUG [gpu_model_runner.py:6532] Estimated PIECEWISE CUDA graph memory: 555.00 MiB first-capture + "
            "(51-1) \u00d7 1.00 MiB per-graph\nINFO [workspace.py:181] [WORKSPACE DEBUG] Resized workspace from "
            "'modular_kernel.py:1095:_allocate_buffers': 0.00 MB -> 1024.00 MB (ubatch 0)\n")
    got = profile_mem.parse_log(text)
    assert got["log_cudagraph_modes"] == [{"mode": "PIECEWISE", "first_capture_mib": 555.0, "graphs": 51,
                                           "per_graph_mib": 1.0}]
    assert got["log_workspace_resizes_mb"] == [1024.0]


def test_cases_run_two_layer_models_of_the_published_widths():
    """Every case's config keeps the published widths and has 2 layers; DeepSeek-V2-Lite's first layer stays dense
    (first_k_dense_replace 1), so its 2-layer model has one dense and one MoE layer."""
    assert len(profile_mem.CASES) <= 8
    for name in {c[0] for c in profile_mem.CASES}:
        assert profile_mem.config_of(name)["num_hidden_layers"] == 2
    ds = model_of("DeepSeek-V2-Lite")
    assert ds.num_layers == 2 and ds.hidden_size == 2048
    assert [ds.moe.is_moe_layer(i) for i in range(2)] == [False, True]
