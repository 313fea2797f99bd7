"""The capacity planner pinned on hand-computed cases, and its properties (issue 5)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.loading import validate
from roofline.costmodel import Roofline, build_graph
from roofline.errors import RooflineError, SpecError
from roofline.methods import parse_method
from roofline.planner import plan_method
from roofline.planner.parallel import fewest_gpus
from roofline.specs import Hardware, Workload
from roofline.units import B, L

GIB = 1 << 30
# the derivations by hand use the datasheet ceilings (the catalogue's measured section is the planner's default)
H100 = load_hardware("H100-SXM").model_copy(update={"measured": None})
LLAMA8, LLAMA70, LLAMA405 = load_model("Llama-3.1-8B"), load_model("Llama-3.1-70B"), load_model("Llama-3.1-405B")


def test_single_gpu_capacity_by_hand() -> None:
    w = Workload(batch=4, context_tokens=8192)
    r = plan_method(LLAMA8, H100, w, parse_method("bf16")).as_dict()
    # capacity as CUDA reports it on an H100 80GB HBM3 (validate/results/clients/nvidia-h100.json env.memory_bytes)
    usable = 85_017_493_504 * 0.9
    weights = 8_030_261_248 * 2
    # prefill chunk min(8192, 4 x 8192) x the MLP stage's live tensors per token (3d + 3I: residual stream, gate/up,
    # SiLU x up; larger than attention's 3d + 2q + 2kv) x 2 B, plus fp32 logits of 4 sequences
    activations = 8192 * (3 * 4096 + 3 * 14336) * 2 + 4 * 128_256 * 4
    pool = usable - GIB - weights - activations
    assert r["memory"]["kv_pool_bytes"] == pytest.approx(pool)
    per_seq = 131_072 * 8192
    assert r["kv_bytes_per_sequence"] == per_seq
    assert r["max_batch"] == int(pool // per_seq) == 54
    # largest L with 4 x 131,072 x (L rounded up to pages of 16) <= pool
    assert r["max_context"] == int(pool / 4 / 131_072) // 16 * 16 == 111_520
    assert r["fits"] and not r["warnings"]


def test_single_gpu_decode_is_bytes_over_bandwidth_when_memory_bound() -> None:
    w = Workload(batch=4, context_tokens=8192)
    r = plan_method(LLAMA8, H100, w, parse_method("bf16")).as_dict()
    graph = build_graph(LLAMA8, parse_method("bf16"), "decode")
    total_bytes = float(graph.total("bytes").subs({B: 4, L: 8192}))
    weights = 2 * (8_030_261_248 - 128_256 * 4096) + 4 * 4096 * 2  # all but the embedding table, + 4 rows
    kv = 4 * 8192 * 131_072
    assert float(graph.traffic_total("weights").subs({B: 4})) == weights
    assert float(graph.traffic_total("kv_read").subs({B: 4, L: 8192})) == kv
    assert weights + kv < total_bytes < (weights + kv) * 1.01  # activations are under 1%
    assert r["tpot_s"] == pytest.approx(total_bytes / 3.35e12, rel=1e-3)
    assert r["tokens_per_s"] == pytest.approx(4 / r["tpot_s"])
    assert r["bound"] == "memory"


def test_tp8_70b_by_hand() -> None:
    w = Workload(batch=32, context_tokens=32_768, tp=8)
    r = plan_method(LLAMA70, H100, w, parse_method("bf16")).as_dict()
    # weights: matrices split 8 ways, norms replicated; 70,553,706,496 params, norms 80 x 2 x 8192 + 8192
    norms = 80 * 2 * 8192 + 8192
    assert r["memory"]["weights_bytes"] == pytest.approx(2 * ((70_553_706_496 - norms) / 8 + norms))
    # 8 KV heads over 8 GPUs: one head each: 2 x 128 x 80 layers x 2 B = 40,960 B per token per GPU
    assert r["kv_bytes_per_sequence"] == 40_960 * 32_768
    assert r["memory"]["reserve_bytes"] == GIB + GIB // 2
    # two ring all-reduces per layer of B x d x 2 bytes over NVLink, NCCL's tuner model
    # (tests/costmodel/test_nccl_allreduce.py
    # for the constants): 2(n-1)/n x 524,288 B = 917,504 B. LL: 6.6 + 14 x 0.6 = 15.0 us + 917504 / min(141e9 (Hopper
    # cap), 450e9 / 2) s = 21.51 us; LL128: 14 + 14 x 1.9 = 40.6 us + 917504 / (0.92 x 450e9) = 42.8 us; Simple:
    # 8.4 + 14 x 3.4 = 56.0 us + 2.04 us = 58.0 us -> LL
    graph = build_graph(LLAMA70, parse_method("bf16"), "decode", tp=8)
    roof = Roofline(H100, tp=8)
    (attn_ar,) = [op for op in graph.ops if op.name == "attn_allreduce"]
    message = 32 * 8192 * 2
    expected = 15.0e-6 + 2 * 7 / 8 * message / 141e9
    assert float(roof.op_times(attn_ar).total.subs(B, 32)) == pytest.approx(expected)
    comm = r["decode"]["comm_s"]
    assert comm == pytest.approx(160 * expected, rel=1e-9)


def test_405b_needs_pipeline_stages() -> None:
    w = Workload(batch=1, context_tokens=8192)
    fit = fewest_gpus(LLAMA405, H100, w, parse_method("bf16"))
    # 405.85 B params x 2 B = 811.7 GB: 8 GPUs (tp 8) hold 101 GB each > 72 GiB usable; tp must divide 128
    # heads and stay in the 8-GPU NVLink domain, so more GPUs means pipeline stages
    assert fit["pp"] > 1 and fit["tp"] <= 8
    assert fit["gpus"] == fit["tp"] * fit["pp"]
    per_gpu = 405_853_388_800 * 2 / fit["gpus"]
    assert per_gpu < 80 * GIB * 0.9
    smaller = fit["gpus"] - 1
    assert 405_853_388_800 * 2 / smaller > 80 * GIB * 0.9 - 6 * GIB or smaller < 8
    r = plan_method(LLAMA405, H100, fit["workload"], parse_method("bf16")).as_dict()
    assert r["fits"]
    # the pipeline step is (m + pp - 1) stage times: with m = 1 the whole model runs stage after stage
    assert r["tpot_s"] > 0


def test_pipeline_bubble_with_micro_batches() -> None:
    base = Workload(batch=8, context_tokens=4096, pp=4, micro_batches=1)
    more = base.model_copy(update={"micro_batches": 8})
    one = plan_method(LLAMA70, H100, base, parse_method("fp8"))
    many = plan_method(LLAMA70, H100, more, parse_method("fp8"))
    # m = 1: 4 stage-times of the whole batch = the whole model; m = 8: 11 stage-times of one sequence each
    assert many.data["tpot_s"] != one.data["tpot_s"]


def test_pipeline_handoff_crosses_nodes_past_the_scale_up_domain() -> None:
    """tp 4 x pp 2 = 8 GPUs fit an HGX board's NVLink domain (scale_up.max_gpus 8 in H100-SXM.yaml): a stage hands
    its rows over NVLink; tp 8 x pp 2 = 16 span two nodes, and the pipeline runs at its slowest boundary, the
    scale-out link's (InfiniBand). A hand-off of b sequences: b x hidden 8,192 x 2 bytes / bytes_per_s + latency_s."""
    from roofline.planner.phases import PhaseModel

    for tp, link in ((4, H100.scale_up), (8, H100.scale_out)):
        w = Workload(batch=4, context_tokens=4096, tp=tp, pp=2)
        phases = PhaseModel.build(LLAMA70, H100, w, parse_method("fp8"))
        assert phases.handoff_link() is link
        assert phases._handoff(4) == pytest.approx(4 * 8192 * 2 / link.bytes_per_s + link.latency_s, rel=1e-12)
    assert H100.scale_up.bytes_per_s > 4 * H100.scale_out.bytes_per_s  # the two rows differ: the test can tell


def test_model_that_does_not_fit_at_context_one() -> None:
    with pytest.raises(RooflineError, match="does not fit on H100-SXM .*not even context 1"):
        plan_method(LLAMA405, H100, Workload(batch=1, context_tokens=1), parse_method("bf16"))


def test_tp_that_does_not_divide_heads() -> None:
    with pytest.raises((SpecError, ValueError), match="tp: 3 does not divide the 64 attention heads"):
        plan_method(LLAMA70, H100, Workload(batch=1, context_tokens=1024, tp=3), parse_method("bf16"))


def test_utilization_out_of_range() -> None:
    with pytest.raises(SpecError, match="gpu_memory_utilization"):
        validate(Workload, {"context_tokens": 10, "gpu_memory_utilization": 0}, "workload")


def test_context_beyond_max_positions_warns() -> None:
    r = plan_method(load_model("Phi-3-mini"), H100, Workload(batch=1, context_tokens=8192), parse_method("bf16"))
    assert any("max_position_embeddings" in msg for msg in r.warnings)


def test_average_tpot_between_its_ends() -> None:
    w = Workload(batch=8, context_tokens=65_536, generated_tokens=4096)
    r = plan_method(LLAMA8, H100, w, parse_method("kivi-2")).as_dict()
    start = plan_method(LLAMA8, H100, w.model_copy(update={"context_tokens": 61_440, "generated_tokens": 0}),
                        parse_method("kivi-2")).as_dict()["tpot_s"]
    assert start * 0.98 <= r["tpot_avg_s"] <= r["tpot_s"] * 1.02


# ---- properties ---------------------------------------------------------------------------------------

METHODS = ["bf16", "fp8", "kivi-2", "innerq-base", "xquant-2", "zack-50", "h2o-2048", "kvquant-4", "aquakv-2"]


@settings(max_examples=15, deadline=None)
@given(method=st.sampled_from(METHODS), batch=st.integers(1, 64), more=st.integers(1, 64))
def test_max_context_never_grows_with_batch(method, batch, more) -> None:
    from roofline.planner.capacity import capacity, capacity_kernel
    from roofline.planner.memory import memory_budget

    w1 = Workload(batch=batch, context_tokens=4096)
    w2 = Workload(batch=batch + more, context_tokens=4096)
    kernel = capacity_kernel(LLAMA8, w1, parse_method(method))
    c1 = capacity(kernel, memory_budget(LLAMA8, H100, w1, kernel), batch, 4096)["max_context"]
    c2 = capacity(kernel, memory_budget(LLAMA8, H100, w2, kernel), batch + more, 4096)["max_context"]
    assert c2 <= c1


@settings(max_examples=10, deadline=None)
@given(method=st.sampled_from(["kivi", "innerq", "skvq", "kvquant", "xquant"]), bits=st.sampled_from([2, 3]))
def test_max_context_never_grows_with_bits(method, bits) -> None:
    from roofline.planner.capacity import max_context_by_bits

    w = Workload(batch=8, context_tokens=4096)
    contexts = max_context_by_bits(LLAMA8, H100, w, parse_method(method), [bits, bits + 1, bits + 2])
    assert contexts[0] >= contexts[1] >= contexts[2]


def _with(hw: Hardware, **changes) -> Hardware:
    data = hw.model_dump()
    data.update(changes)
    return Hardware.model_validate(data)


@settings(max_examples=10, deadline=None)
@given(batch=st.integers(1, 64), factor=st.floats(1.01, 10))
def test_faster_link_never_slows_tp(batch, factor) -> None:
    link = H100.scale_up.model_copy(update={"bytes_per_s": H100.scale_up.bytes_per_s * factor})
    fast = _with(H100, scale_up=link.model_dump())
    graph = build_graph(LLAMA70, parse_method("bf16"), "decode", tp=8)
    slow_t = float(Roofline(H100, tp=8).time(graph).subs({B: batch, L: 8192}))
    fast_t = float(Roofline(fast, tp=8).time(graph).subs({B: batch, L: 8192}))
    assert fast_t <= slow_t


@settings(max_examples=10, deadline=None)
@given(method=st.sampled_from(METHODS), batch=st.integers(1, 8), context=st.integers(1024, 131_072))
def test_doubling_bandwidth_never_slows_a_memory_bound_step(method, batch, context) -> None:
    fast = _with(H100, memory_bytes_per_s=2 * H100.memory_bytes_per_s)
    graph = build_graph(LLAMA8, parse_method(method), "decode")
    t1 = float(Roofline(H100).time(graph).subs({B: batch, L: context}))
    t2 = float(Roofline(fast).time(graph).subs({B: batch, L: context}))
    assert t2 <= t1
    rows = Roofline(H100).evaluate(graph, {B: batch, L: context})
    if all(r["bound"] == "memory" for r in rows if r["bytes"]):
        assert t2 < t1


def test_unbounded_context_with_eviction() -> None:
    r = plan_method(LLAMA8, H100, Workload(batch=4, context_tokens=8192), parse_method("h2o-2048")).as_dict()
    assert r["max_context"] == math.inf


def test_phase_bound_is_the_bound_of_most_of_the_time() -> None:
    # KVQuant-4 on the default scenario: attention (codebook lookups at the INT32 rate) is issue-bound (vector and
    # integer instructions, the hierarchical roofline's name for that share of compute) and takes two thirds of
    # the step, while the step's other ops move more bytes than the whole step computes: the phase reads "issue"
    # (the time-weighted bound), not the larger of the summed compute and memory times
    from roofline.methods import build_cache
    from roofline.planner.phases import PhaseModel

    model, hw = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")
    phase = PhaseModel.build(model, hw, Workload(batch=16, context_tokens=32768),
                             build_cache(parse_method("kvquant-4"), model))
    got = phase.dominant("decode", 16, 32768)
    rows = Roofline(hw).evaluate(phase.decode, {B: 16, L: 32768})
    by_bound = {}
    for r in rows:
        by_bound[r["bound"]] = by_bound.get(r["bound"], 0.0) + r["count"] * r["time_s"]
    assert got["memory_s"] > got["compute_s"]  # the summed rule would say memory
    assert got["dominant_op"] == "attention" and got["dominant_bound"] == "issue"
    assert by_bound["issue"] > by_bound["memory"] and got["bound"] == "issue"


# ---- the default plan's surprising rows carry their reason (issue 18) ---------------------------------------

DEFAULT = Workload(batch=16, context_tokens=32_768, generated_tokens=1024)


def test_xquant_3_is_slower_by_its_unpack_and_says_so() -> None:
    # Llama-3.1-8B, SVD latents XK and XV (2 x 1024 channels), 32 layers, 32,768 tokens (a whole number of
    # 128-token groups, so none waits in the window), 16 sequences: 3-bit codes take 9 integer ops per 4 elements,
    # 2- and 4-bit 3 (kv.quant), at the H100's integer rate; the fused step is compute-bound, so TPOT shows it
    extra_s = 32 * 32_768 * 2048 * 16 * (9 - 3) / 4 / H100.int_ops_per_s()
    rows = {s: plan_method(LLAMA8, H100, DEFAULT, parse_method(s)).data for s in ("xquant-3", "xquant-4")}
    assert rows["xquant-3"]["tpot_s"] - rows["xquant-4"]["tpot_s"] == pytest.approx(extra_s, rel=1e-4)  # of ~80 ms
    (note,) = rows["xquant-3"]["notes"]
    assert f"+{extra_s * 1e3:.2f} ms" in note and "9 integer ops per 4" in note
    assert rows["xquant-4"]["notes"] == []


def test_zack_max_batch_pays_a_second_round_and_says_so() -> None:
    # §5.3: one decode task per (sequence, KV head), the context unsplit. Batch 16: 128 tasks on 132 SMs, one round;
    # max batch 27 (2 GiB per sequence): 216 tasks, 2 rounds where 216 / 132 = 1.64 would do: attention x 1.22
    data = plan_method(LLAMA8, H100, DEFAULT, parse_method("zack-50")).data
    assert data["max_batch"] == 27
    assert data["tokens_per_s_max_batch"] < data["tokens_per_s"]
    (note,) = data["notes"]
    assert "216 tasks take 2 rounds (ideal 1.64): attention x1.22" in note
    assert "128 tasks take 1 round (ideal 0.97): attention x1.00" in note


def test_aquakv_note_tells_per_token_from_per_step() -> None:
    from roofline.analysis.compute_for_memory import predictor_overhead_ratio, reference_step_ratio

    config = parse_method("aquakv-2")
    (note,) = plan_method(LLAMA8, H100, DEFAULT, config).data["notes"]
    per_token, per_step = predictor_overhead_ratio(LLAMA8, config, 32_768), reference_step_ratio(LLAMA8, config, 32_768)
    assert per_token < 190 < per_step  # 1/166 of the model per new token, yet ~197x the model per step
    assert f"1/{per_token:,.0f} of the model's FLOPs per new token" in note
    assert f"{per_step:,.0f}x the model's own FLOPs" in note and "re-predicts every cached token" in note


@settings(max_examples=30, deadline=None)
@given(spec=st.sampled_from(["bf16", "kivi-2", "xquant-2", "zack-50", "h2o-2048", "kivi-sink-2"]),
       model=st.sampled_from(["Llama-3.1-8B", "Gemma-2-9B"]), batch=st.integers(1, 300),
       pool_gib=st.floats(0.01, 200), page=st.sampled_from([1, 16, 256]))
def test_max_context_equals_a_plain_bisection(spec, model, batch, pool_gib, page) -> None:
    # the planner's search starts from the long-context line and may stop after two evaluations; its answer
    # must be the largest context that fits, found here by plain bisection over [1, MAX_SEARCH_CONTEXT]
    from dataclasses import replace

    from roofline.planner.capacity import MAX_SEARCH_CONTEXT, capacity, capacity_kernel, largest_true
    from roofline.planner.memory import memory_budget

    m, w = load_model(model), Workload(batch=batch, context_tokens=4096, page_tokens=page)
    kernel = capacity_kernel(m, w, parse_method(spec))
    budget = replace(memory_budget(m, load_hardware("H100-SXM"), w, kernel), weights=0.0, activations=0.0,
                     reserve=0.0, capacity=pool_gib * 2**30, usable=pool_gib * 2**30, method_params=0.0)
    fits = lambda n: batch * float(kernel.per_sequence(n)) <= budget.kv_pool  # noqa: E731
    expected = math.inf if fits(MAX_SEARCH_CONTEXT) else largest_true(fits, 1, MAX_SEARCH_CONTEXT)
    assert capacity(kernel, budget, batch, 4096)["max_context"] == max(expected, 0)


def test_a_row_is_named_by_the_spec_it_was_asked_for() -> None:
    """'kivi:bits=2' and the preset 'kivi-2' are the same config; each row keeps the SPEC the user gave, whichever
    was planned first in the process (the dashboard's Pareto page plans the papers' SPECs before a CLI plan)."""
    w = Workload(batch=2, context_tokens=4096)
    assert plan_method(LLAMA8, H100, w, parse_method("kivi:bits=2")).method == "kivi:bits=2"
    assert plan_method(LLAMA8, H100, w, parse_method("kivi-2")).method == "kivi-2"


def test_llamacpp_splits_layers_never_tensors() -> None:
    """llama.cpp's server has no tensor parallelism: --split-mode layer (default) splits layers and KV across GPUs,
    row splits each matrix's rows (ggml-org/llama.cpp tools/server/README.md); a plan at tp 2 is refused naming
    --tp, and the fewest GPUs for Llama-3.1-70B (70.6 B bf16 parameters = 141 GB, over one 80 GB H100) are two
    pipeline stages, not tp 2."""
    w = Workload(batch=1, context_tokens=4096, engine="llamacpp", page_tokens=256)
    with pytest.raises(SpecError, match="^--tp: 2 GPUs: llama.cpp has no tensor parallelism"):
        plan_method(LLAMA8, H100, w.model_copy(update={"tp": 2}), parse_method("bf16"))
    layout = fewest_gpus(LLAMA70, H100, w, parse_method("bf16"))
    assert (layout["gpus"], layout["tp"], layout["pp"]) == (2, 1, 2)
