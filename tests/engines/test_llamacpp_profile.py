"""llama.cpp's time profile (roofline/engines/profiles/llamacpp.json, validate/engines/derive_llamacpp.py): each law
against the run-3 figures it comes from, computed here by hand (llama.cpp run 3, one H200, 2026-11-30: stage O's
test-backend-ops, batched-bench, llama-server with the sampler on the host and on the GPU)."""

import json
import statistics
from pathlib import Path

import pytest

from roofline.catalogue.store import load_hardware, load_model
from roofline.engines.scheduling import scheduling, with_sampler
from roofline.engines.timing import timing

VOCAB = 128_256
# run 3's llama-server decode s/token at -np 8, one KV stream a slot (its report, K-server rows): the default chain
# on the host, greedy on the host, greedy on the GPU (--backend-sampling)
NP8_DEFAULT, NP8_GREEDY, NP8_GPU = 0.012988, 0.012010, 0.009562
# run 3's stage O: 32 layers' projections at n 1 and 2 (test-backend-ops, isolated)
LAYERS_N1, LAYERS_N2 = 0.00378976, 0.00494656


def test_the_host_sampler_costs_a_slot_its_vocabulary_scan():
    """(12.988 - 9.562) ms / 8 slots = 0.428 ms a slot at 128,256 logits for the default chain (greedy alone: (12.010
    - 9.562) / 8 = 0.306 ms, the scan), less the logits' copy the GPU sampler does not make (one row, 513,024 B at run
    5's ~55.6 GB/s: 9.2 us): 0.419 ms; scaled by the vocabulary: 0.419 x 32,000 / 128,256 = 0.1045 ms a slot."""
    t = timing("llamacpp")
    assert t.sampler_host_element_s * VOCAB == pytest.approx(0.428e-3 - 513_024 / 55.6e9, rel=0.004)
    assert (NP8_GREEDY - NP8_GPU) / 8 == pytest.approx(0.306e-3, rel=0.002)
    base = scheduling("llamacpp", load_hardware("H200"))
    assert with_sampler(base, "H200", 32_000).overheads.per_seq_s == pytest.approx(0.1045e-3, rel=0.005)
    assert not base.overheads.overlap  # llama-server's loop is synchronous


RUN5 = Path(__file__).resolve().parents[2] / "validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run5"


def _in_step_matmuls_us(trace: str, batch: int) -> list[float]:
    """Run 5's timeline: the median exclusive GPU us of each matmul call of a decode step at `batch`, in launch order
    (kernel_trace's step cut at the logits' copy, B x 128,256 x 4 bytes)."""
    from validate.engines.kernel_trace import exclusive, read, steps
    t = read(RUN5 / trace)
    per = []
    for s in steps(t, batch * VOCAB * 4)[2:]:
        ks = [k for k in t.kernels if s["span"][0] <= k[0] < s["span"][1]]
        per.append([x / 1e3 for k, x in zip(ks, exclusive(ks), strict=True) if "mul_mat" in k[2]])
    n = statistics.mode(len(p) for p in per)
    per = [p for p in per if len(p) == n]
    return [statistics.median(p[i] for p in per) for i in range(n)]


def _logits_copies_s(trace: Path) -> dict[int, float]:
    """Median seconds of each size of the logits' device-to-host copy in a committed timeline."""
    from validate.engines.kernel_trace import DTOH, read
    out: dict[int, list[float]] = {}
    for s, e, b, kind in read(trace).copies:
        if kind == DTOH and b % (VOCAB * 4) == 0:
            out.setdefault(b, []).append((e - s) * 1e-9)
    return {b: statistics.median(v) for b, v in out.items()}


def test_a_step_past_one_token_pays_no_host_excess():
    """Run 5's timeline (one CUDA-graph launch a step at B 1, 2, 8; the GPU busy through the step): eager_layer_s is
    0 and the host's llama_decode between two steps is step_s, the untimed step (batched-bench T_TG / TG) less the
    traced busy time less the logits' copy, median over F16 and Q8_0 at B 1, 2, 8 -- computed here from the committed
    logs, summaries and timelines (F16: 0.237 / 0.340 / 0.359 s over 48 steps; Q8_0 0.196 / 0.215 / 0.360 s)."""
    t_tg = {"F16": (0.237, 0.340, 0.359), "Q8_0": (0.196, 0.215, 0.360)}
    idle = []
    for q, walls in t_tg.items():
        copies = _logits_copies_s(RUN5 / f"trace-{q}-dec.tsv.xz")
        for b, wall in zip((1, 2, 8), walls, strict=True):
            busy = json.loads((RUN5 / f"trace-{q}-b{b}.json").read_text())["groups"][0]["median"]["busy_us"] * 1e-6
            idle.append((b, wall / 48 - busy - copies[b * VOCAB * 4]))
    t = timing("llamacpp")
    idle = [v - t.token_s * b for b, v in idle]  # net of the step's B tokens' host work (the prompt test below)
    assert t.eager_layer_s == 0.0 and t.eager_host_s(2, 32, 0) == 0.0
    assert t.step_s == pytest.approx(statistics.median(idle), abs=5e-6)  # the logs' 3 decimals
    assert 100e-6 < t.step_s < 350e-6 and t.server_step_s == t.step_s
    assert t.step(5e-3, 2) == pytest.approx(5e-3 + t.step_s + 2 * t.token_s)  # serial: the host's work, the GPU's
    assert "38.1 us a layer" in t.sources["eager_layer_s"]  # the retired term, kept with its cause


def test_a_prompt_token_costs_the_host_a_few_microseconds():
    """Run 5's llama-bench 512-token prompts in steady state (the repetitions after the first, which instantiates a new
    CUDA graph: F16 20.54 / 20.61 / 20.61 / 20.66 ms, Q8_0 43.69 / 43.75 / 43.93 / 44.10), the GPU busy 17.21 / 41.41 ms
    in the traced timeline: (20.61 - 17.21) and (43.84 - 41.41) ms less one row's copy and step_s, / 512 tokens =
    6.2 and 4.3 us a token; the profile takes their median. The timeline shows it as the host's time before the
    ubatch's embeddings reach the GPU (2.9 ms after the previous step ended)."""
    t = timing("llamacpp")
    per = []
    for q, steady in {"F16": 20.61e-3, "Q8_0": 43.84e-3}.items():
        groups = json.loads((RUN5 / f"trace-{q}-pp.json").read_text())["groups"]
        busy = min(groups, key=lambda g: g["kernels_per_step"])["median"]["busy_us"] * 1e-6
        per.append((steady - busy - t.sampler_s("H200", 1, VOCAB) - t.step_s) / 512)
    assert t.token_s == pytest.approx(statistics.median(per), rel=0.02)
    assert 3e-6 < t.token_s < 8e-6


def test_the_logits_leave_the_gpu_after_every_step():
    """Runs 5 and 5b's timelines: one row of logits (513,024 B) copies in ~11.5 us, 64 rows (32.8 MB) in ~593 us,
    each timed by CUPTI: the profile's law (the `sampler` slot, rows x vocabulary elements) gives both within 3 %."""
    copies = {**_logits_copies_s(RUN5 / "trace-F16-dec.tsv.xz"),
              **_logits_copies_s(RUN5.with_name(RUN5.name + "b") / "trace-Q4_K_M-dec.tsv.xz")}
    t = timing("llamacpp")
    for rows in (1, 64):
        assert t.sampler_s("H200", rows, VOCAB) == pytest.approx(copies[rows * VOCAB * 4], rel=0.03), rows
    assert 50e9 < 4 * t.sampler["H200"][1] < 60e9


def test_ggml_reads_one_rows_weights_faster_than_twos():
    """Stage O's down projection (14,336 x 4,096): 29.71 us at n 1, 46.50 us at n 2. The laws are fit on the shapes
    whose F16 weights exceed the H200's 50 MiB L2 (gate_up, down, lm_head): test-backend-ops re-runs one op on the same
    tensors, so a 32 MiB q / o or 8 MiB k / v matrix is read from L2 there, never in a step. Run 5's timeline gives the
    in-step calls: 32 layers' projections at n 2 within 5 % of the law, the isolated rows' sum (4.95 ms) 13 % under."""
    k = timing("llamacpp").kernel_ceilings("H200")
    shapes = {"qo": (4096, 4096), "kv": (4096, 1024), "gate_up": (4096, 14336), "down": (14336, 4096)}
    per_layer = {"qo": 2, "kv": 2, "gate_up": 2, "down": 1}

    def law(n: int, name: str) -> float:
        kk, m = shapes[name]
        b = 2 * kk * m + 4 * kk * n + 4 * m * n  # F16 weights, F32 activations in and out
        return k["gemv_latency"] + b / k["gemv_bw"] if n == 1 else k["gemm_latency"] + b / k["gemm_stream_bw"]

    def layers(n: int) -> float:
        return 32 * sum(c * law(n, s) for s, c in per_layer.items())

    assert law(1, "down") == pytest.approx(29.71e-6, rel=0.06)
    assert law(2, "down") == pytest.approx(46.50e-6, rel=0.12)
    assert law(2, "down") > law(1, "down") * 1.2
    assert layers(1) == pytest.approx(3.790e-3, rel=0.10)
    in_step = _in_step_matmuls_us("trace-F16-dec.tsv.xz", 2)  # 7 calls a layer, 32 layers, lm_head last
    assert len(in_step) == 32 * 7 + 1
    assert layers(2) == pytest.approx(sum(in_step[:-1]) * 1e-6, rel=0.05)
    assert sum(in_step[:-1]) * 1e-6 > 4.947e-3 * 1.10  # the isolated rows' sum: L2-served small shapes


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
    # run 1's batched-bench measured 5.00 / 7.16 ms (B 2 - B 1 2.16 ms), run 5's 4.94 / 7.08 ms (2.15): the matmuls'
    # batched path (the L2-resident shapes at their in-step cost) and the unfused adds, not a host excess
    assert b2 - b1 == pytest.approx(2.16e-3, rel=0.15)
    assert b2 - b1 > (LAYERS_N2 - LAYERS_N1) * 1.5


def test_mmvq_reads_the_weights_once_and_redoes_the_columns():
    """Run 4 stage O (test-backend-ops, q8_0 weights, typed from its ops.txt): the 4096 x 4096 call at n 1 / 2 / 4 / 8
    7.64 / 7.84 / 9.91 / 14.59 us, the 4096 x 1024 call at n 2 4.71 us. MMVQ at n columns costs one column's law
    plus the further columns' FLOPs (2 K M (n - 1)) at n's own seconds per FLOP (mmvq_flop_s:<n>: ggml-cuda compiles
    mul_mat_vec_q once per column count): within 10 % at every n here, where 16.'s first law (a 12.4 us latency fit at
    n 8) put the small call at n 2 at 13.6 us."""
    k = timing("llamacpp").kernel_ceilings("H200")

    def law(kk: int, m: int, n: int) -> float:
        w = kk * m * 34 / 32 + 4 * (kk + m) * n  # q8_0 blocks (34 bytes a 32 weights), F32 activations in and out
        one = k["ggml:q8_0:gemv_latency"] + w / k["ggml:q8_0:gemv_bw"]
        return one + 2 * kk * m * (n - 1) * (k[f"ggml:q8_0:mmvq_flop_s:{n}"] if n > 1 else 0)

    for n, measured in {1: 7.64e-6, 2: 7.84e-6, 4: 9.91e-6, 8: 14.59e-6}.items():
        assert law(4096, 4096, n) == pytest.approx(measured, rel=0.10), n
    assert law(4096, 1024, 2) == pytest.approx(4.71e-6, rel=0.25)


def test_mmvq_cost_per_column_grows_with_the_count():
    """Run 4 stage O's q8_0 rows: the 4096 x 14336 call takes 23.62 / 24.95 / 31.19 / 45.03 us at n 1 / 2 / 4 / 8, so a
    further column costs (24.95 - 23.62) / 1 = 1.33 us at n 2, (31.19 - 23.62) / 3 = 2.52 at n 4 and (45.03 - 23.62) /
    7 = 3.06 at n 8: no single rate holds (one over all three left a Llama layer's calls 9 % under at n 8 and 3 % over
    at n 2). The profile's per-count seconds per FLOP rise from n 2 to 8 likewise, and 3 / 5 / 6 / 7 lie between their
    measured neighbours."""
    k = timing("llamacpp").kernel_ceilings("H200")
    per = [k[f"ggml:q8_0:mmvq_flop_s:{n}"] for n in range(2, 9)]
    assert per[0] < per[2] < per[6]  # n 2 < n 4 < n 8
    assert min(per[0], per[2]) <= per[1] <= max(per[0], per[2])
    assert all(min(per[2], per[6]) <= p <= max(per[2], per[6]) for p in per[3:6])
    assert "ggml:q8_0:mmvq_rate" not in k


def test_norm_kernel_is_the_step_timeline_rms_norm():
    """Runs 5 / 5b's kernel timelines (trace-*-b<B>.json, the per-name tables kernel_trace.py wrote): ggml's
    rms_norm_f32 kernel, fused with the weight's mul, takes 3.1-3.7 us a call in every decode step from B 1 to 64
    (65 calls a step: two a layer and the final norm), nearly twice kernel_time (stage O's small ops at one token,
    ~1.6 us); the profile's norm_kernel is their median and reaches the planner's norm ops."""
    import json
    import statistics
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "validate/results/engines"
    per_call = []
    for run in ("run5", "run5b"):
        for f in sorted((root / f"nvidia-h200-llamacpp-2026-11-30-{run}").glob("trace-*-b*.json")):
            rows = json.loads(f.read_text())["groups"][0]["per_name_per_step"]
            norm = [r for r in rows if r["name"].startswith("_Z12rms_norm_f32")]
            assert sum(r["calls"] for r in norm) == 65, f.name
            per_call.append(sum(r["us"] for r in norm) / 65)
    assert len(per_call) == 10 and all(3.0 < x < 3.8 for x in per_call)
    k = timing("llamacpp").kernel_ceilings("H200")
    assert k["norm_kernel"] == pytest.approx(statistics.median(per_call) * 1e-6, rel=1e-9)
    assert k["norm_kernel"] > 1.8 * k["kernel_time"]


def test_one_token_steps_fuse_the_adds_and_the_glu_into_the_mat_vecs():
    """Run 5's timelines (trace-<type>-b<B>.json, the per-name calls a step): at one token ggml-cuda launches one add
    (the embeddings' graph input) and no GLU, at two tokens 64 adds and 32 GLUs (two residual adds and one GLU a layer
    of Llama-3.1-8B's 32), and 193 matmul calls against 225 (gate and up one call at one column: 6 a layer + the head
    against 7 + 1). So the planner's one-token step charges nothing for the residual adds and the GLU and one call for
    gate / up, its two-token step all of them."""
    import json
    from pathlib import Path

    from roofline.catalogue.loading import validate
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel
    from roofline.specs import Workload

    root = Path(__file__).resolve().parents[2] / "validate/results/engines/nvidia-h200-llamacpp-2026-11-30-run5"
    for t in ("F16", "Q8_0"):
        calls = {}
        for b in (1, 2):
            rows = json.loads((root / f"trace-{t}-b{b}.json").read_text())["groups"][0]["per_name_per_step"]
            calls[b] = (sum(r["calls"] for r in rows if "op_add" in r["name"]),
                        sum(r["calls"] for r in rows if "unary_gated" in r["name"]),
                        sum(r["calls"] for r in rows if r["cat"] == "matmul" and "fixup" not in r["name"]))
        assert calls[1] == (1, 0, 32 * 6 + 1) and calls[2] == (64, 32, 32 * 7 + 1), t
    model, hw = load_model("Llama-3.1-8B"), load_hardware("H200")
    wl = validate(Workload, {"batch": 2, "context_tokens": 1152, "engine": "llamacpp", "weight_dtype": "fp16",
                             "page_tokens": 256}, "workload")
    pm = PhaseModel.build(model, hw, wl, parse_method("fp16"))

    def times(batch: int) -> dict[str, float]:
        return {r["name"]: r["time_s"] for r in pm.rows("decode", batch, 1088)}

    one, two = times(1), times(2)
    for name in ("attn_residual", "mlp_residual", "mlp_act"):
        assert one[name] == 0 and two[name] > 1e-6, name
    k = timing("llamacpp").kernel_ceilings("H200")
    # gate / up at one row: one call's latency, the two matrices' bytes at the mat-vec's bandwidth
    up_bytes = 2 * 4096 * 14336 * 2 + 4 * (4096 + 2 * 14336)
    assert one["mlp_up"] == pytest.approx(k["gemv_latency"] + up_bytes / k["gemv_bw"], rel=0.02)
