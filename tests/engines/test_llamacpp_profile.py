"""llama.cpp's time profile (roofline/engines/profiles/llamacpp.json, validate/engines/derive_llamacpp.py): each law
against the run-3 figures it comes from, computed here by hand (llama.cpp run 3, one H200, 2026-11-30: stage O's
test-backend-ops, batched-bench, llama-server with the sampler on the host and on the GPU)."""

import pytest

from roofline.catalogue.store import load_hardware, load_model
from roofline.engines.scheduling import EngineOverheads, scheduling, with_eager, with_sampler
from roofline.engines.timing import timing

VOCAB = 128_256
# run 3's llama-server decode s/token at -np 8, one KV stream a slot (its report, K-server rows): the default chain
# on the host, greedy on the host, greedy on the GPU (--backend-sampling)
NP8_DEFAULT, NP8_GREEDY, NP8_GPU = 0.012988, 0.012010, 0.009562
# run 3's batched-bench (split streams) steps at B 1 and 2, and stage O's 32 layers' projections and lm_head at n 1, 2
STEP_B1, STEP_B2 = 0.005063, 0.007406
LAYERS_N1, LAYERS_N2, LM_HEAD_N1, LM_HEAD_N2 = 0.00378976, 0.00494656, 0.00027429, 0.00024268


def test_the_host_sampler_costs_a_slot_its_vocabulary_scan():
    """(12.988 - 9.562) ms / 8 slots = 0.428 ms a slot at 128,256 logits for the default chain (greedy alone: (12.010
    - 9.562) / 8 = 0.306 ms, the scan); scaled by the vocabulary: 0.428 x 32,000 / 128,256 = 0.107 ms a slot."""
    t = timing("llamacpp")
    assert t.sampler_host_element_s * VOCAB == pytest.approx(0.428e-3, rel=0.002)
    assert (NP8_GREEDY - NP8_GPU) / 8 == pytest.approx(0.306e-3, rel=0.002)
    base = scheduling("llamacpp", load_hardware("H200"))
    assert with_sampler(base, "H200", 32_000).overheads.per_seq_s == pytest.approx(0.1068e-3, rel=0.003)
    assert not base.overheads.overlap  # llama-server's loop is synchronous


def test_a_step_past_one_token_pays_its_excess_on_top():
    """batched-bench B 2 - B 1 = 2.343 ms, of which the matmuls alone 1.157 ms (projections) - 0.032 ms (lm_head):
    1.218 ms / 32 layers = 38.1 us a layer, added to the step (not hidden under it)."""
    by_hand = (STEP_B2 - STEP_B1 - (LAYERS_N2 - LAYERS_N1) - (LM_HEAD_N2 - LM_HEAD_N1)) / 32
    assert by_hand == pytest.approx(38.05e-6, rel=0.002)
    t = timing("llamacpp")
    assert t.eager_layer_s == pytest.approx(by_hand, rel=0.002)
    assert t.eager_host_s(1, 32, 0) == 0.0  # one token: the matmul and attention laws alone
    assert t.step(5e-3, 2, t.eager_host_s(2, 32, 0)) == pytest.approx(5e-3 + 32 * by_hand, rel=0.002)
    served = with_eager(scheduling("llamacpp", load_hardware("H200")), 32, 0).overheads
    assert served.combine(5e-3, 8, tokens=8) == pytest.approx(5e-3 + 32 * by_hand, rel=0.002)
    # a prefill's long kernels hide it (timing mechanism 8's max)
    assert served.combine(20e-3, 1, tokens=512, prefill=True) == pytest.approx(20e-3)
    assert EngineOverheads(eager_s=1e-3, eager_above_tokens=1).combine(5e-3, 2, tokens=2) == pytest.approx(5e-3)


def test_ggml_reads_one_rows_weights_faster_than_twos():
    """Stage O's qo projection: 8.55 us at n 1, 8.05 us at n 2 (small: latency-bound); down (14,336 x 4,096): 29.71 us
    at n 1, 46.50 us at n 2. The laws: one row at gemv (within the fit's 12 % on the five shapes), two at the
    batched path's law; 32 layers' projections within 10 % of 3.79 ms at n 1 and of 4.81 .. 5.53 ms at n 2 .. 64."""
    k = timing("llamacpp").kernel_ceilings("H200")
    shapes = {"qo": (4096, 4096), "kv": (4096, 1024), "gate_up": (4096, 14336), "down": (14336, 4096)}
    per_layer = {"qo": 2, "kv": 2, "gate_up": 2, "down": 1}

    def law(n: int, name: str) -> float:
        kk, m = shapes[name]
        b = 2 * kk * m + 4 * kk * n + 4 * m * n  # F16 weights, F32 activations in and out
        return k["gemv_latency"] + b / k["gemv_bw"] if n == 1 else k["gemm_latency"] + b / k["gemm_stream_bw"]

    def layers(n: int) -> float:
        return 32 * sum(c * law(n, s) for s, c in per_layer.items())

    assert law(1, "qo") == pytest.approx(8.55e-6, rel=0.12)
    assert law(1, "down") == pytest.approx(29.71e-6, rel=0.12)
    assert law(2, "down") > law(1, "down") * 1.2
    assert layers(1) == pytest.approx(3.790e-3, rel=0.10)
    for n, measured in {2: 4.947e-3, 4: 4.812e-3, 8: 5.140e-3, 16: 5.532e-3, 32: 5.139e-3, 64: 5.498e-3}.items():
        assert layers(n) == pytest.approx(measured, rel=0.10), n


def test_the_planner_prices_ggmls_one_row_gemm_at_the_gemv_law():
    """Through the cost model: a decode step's GEMMs at B 1 take the gemv law, at B 2 the batched one (Roofline's
    one_row on the op's rows), so the plan's B 2 step exceeds B 1's by more than the per-layer excess alone."""
    from roofline.catalogue.loading import validate
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    model, hw = load_model("Llama-3.1-8B"), load_hardware("H200")
    wl = validate(Workload, {"batch": 2, "context_tokens": 1152, "engine": "llamacpp", "weight_dtype": "fp16",
                             "page_tokens": 256}, "workload")
    pm = PhaseModel.build(model, hw, wl, parse_method("fp16"))
    b1, b2 = pm.decode_time(1, 1088), pm.decode_time(2, 1088)
    eager = 32 * timing("llamacpp").eager_layer_s
    # run 1's batched-bench measured 5.00 / 7.16 ms: the B 2 - B 1 gap 2.16 ms, matmuls 1.16 + excess 1.22 by hand
    assert b2 - b1 > eager + 0.5e-3
    assert b2 - b1 == pytest.approx(LAYERS_N2 - LAYERS_N1 + eager, rel=0.35)
