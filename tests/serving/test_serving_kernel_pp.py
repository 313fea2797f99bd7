"""Pipeline parallelism (pp > 1) through the fast paths: the closed form (its decode blocks included) and the compiled
record loop (serving.kernel, serving.kernel_pipeline) against the Python loop on StepModel's numpy step times
(`fast=False`, one pipelined step a record), and the pipeline's effect on the step derived by hand.

PhaseModel.pipeline's law (serving.pipeline): a step of `seqs` sequences on pp stages with m = min(micro_batches,
seqs) micro-batches of b = seqs / m takes (m + pp - 1) x (T(b) / pp + handoff(b)), handoff(b) = b x hidden_size x
activation_bytes / link bytes_per_s + latency_s (the scale-up link). The hand derivations below use only that
definition and the catalogue's figures: Llama-3.1-8B's hidden_size 4096 (its config.json,
https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json), bf16 activations (2 bytes) and the H100 SXM's
NVLink 4 at 450e9 B/s a direction and 1 us a hop (hardware/H100-SXM.yaml: the H100 datasheet's 900 GB/s
bidirectional per GPU), so handoff(1) = 4096 x 2 / 450e9 + 1e-6 s.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.catalogue import load_hardware, load_model  # noqa: E402
from roofline.engines.scheduling import scheduling  # noqa: E402
from roofline.methods import parse_method  # noqa: E402
from roofline.serving import kernel, pipeline  # noqa: E402
from roofline.serving.disagg import Disaggregated, KvLink  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.requests import LengthDist, Requests, poisson_requests  # noqa: E402
from roofline.serving.simulate import Simulator  # noqa: E402
from roofline.specs import Workload  # noqa: E402

MODEL, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")
HANDOFF_1_S = 4096 * 2 / 450e9 + 1e-6  # one sequence's activations over NVLink 4 (module docstring)
MAX_TOKENS = 3400


def simulator(tp: int = 1, pp: int = 1, micro: int = 1, engine: str | None = None, **kw) -> Simulator:
    wl = Workload(context_tokens=MAX_TOKENS, tp=tp, pp=pp, micro_batches=micro, batch=micro,
                  prefill_chunk_tokens=8192, engine=engine or "ideal")
    profile = scheduling(engine, H100, "api", tp, context_len=MAX_TOKENS) if engine else None
    return Simulator(MODEL, H100, wl, parse_method("bf16"), max_tokens=MAX_TOKENS, engine=profile, **kw)


def reference(sim: Simulator) -> Simulator:
    """The same simulator on StepModel's numpy step times and the Python loop (one pipelined step a record)."""
    return Simulator(sim.model, sim.hardware, sim.workload, sim.method, max_tokens=sim.max_tokens,
                     engine=sim._given[1], fast=False, kernel=False)


def python_loop(sim: Simulator) -> Simulator:
    other = copy.copy(sim)
    other.kernel = False
    return other


def requests(rate: float = 20.0, n: int = 150, seed: int = 3) -> Requests:
    return poisson_requests(rate, n, LengthDist.parse("uniform:64:3000", "p"), LengthDist.parse("uniform:2:400", "o"),
                            seed)


def assert_same_times(fast, slow) -> None:
    assert fast.preemptions == slow.preemptions
    # a block of k decode-only steps is one record in the fast paths, k records in the reference
    assert fast.steps[:, 6].sum() == slow.steps[:, 6].sum()
    for name in ("first_token_s", "finish_s", "ttft_s", "tpot_s"):
        assert getattr(fast, name) == pytest.approx(getattr(slow, name), rel=1e-9, abs=1e-12), name


@pytest.mark.parametrize("tp,pp,micro,engine", [
    (1, 2, 1, None),      # a convex law: decode blocks by the closed form's linear stretches
    (1, 4, 3, None),      # three micro-batches over four stages: rint / ceil of uneven micro-batches
    (2, 2, 2, None),      # tp 2: the all-reduce's min, decode blocks step by step
    (1, 2, 2, "vllm"),    # vLLM: graph padding, host overheads, sampler, admission lag
    (1, 3, 4, "sglang"),  # SGLang: prefill-or-decode steps
])
def test_fast_paths_match_the_reference(tp, pp, micro, engine):
    sim = simulator(tp, pp, micro, engine, kernel=True)
    reqs = requests()
    assert kernel.covers(sim, reqs, single=True) is None
    assert sim.block_limit > 1
    slow = reference(sim).run(reqs)
    assert_same_times(sim.run(reqs), slow)  # serving.kernel
    assert_same_times(python_loop(sim).run(reqs), slow)  # the closed form in the Python loop
    # the fast paths run decode-only blocks: fewer records than the reference's one step each
    assert len(python_loop(sim).run(reqs).steps) < len(slow.steps)


@pytest.mark.parametrize("pp,micro", [(2, 2), (3, 4), (4, 3)])
def test_one_step_three_ways(pp, micro):
    """Single mixed steps: StepModel.step_time (the reference), ClosedForm.pipelined and the compiled
    kernel_pipeline.pipelined_s agree to 1e-12, among them steps whose micro-batch's tokens fall on a half
    (3 sequences in 2 micro-batches over an odd token count: rint rounds half to even, in numpy and in the kernel)."""
    from roofline.engines.timing import FILL_AND_DRAIN
    from roofline.serving.kernel_layout import FILL, HANDOFF_BYTES, MAX_STEP, MICRO, PP
    from roofline.serving.kernel_pipeline import pipelined_s
    sim = simulator(pp=pp, micro=micro)
    closed, law = sim.closed, kernel.compiled_law(kernel.law_source(sim.closed))
    tab = kernel._tables(sim)
    cfg = np.zeros(FILL + 1, dtype=np.int64)  # every field the law reads (PASS 0: no engine passes)
    cfg[PP], cfg[MICRO], cfg[MAX_STEP] = pp, micro, closed.model.max_step_tokens
    cfg[FILL] = sim.workload.engine in FILL_AND_DRAIN
    fcfg = np.zeros(HANDOFF_BYTES + 3)
    fcfg[HANDOFF_BYTES:] = pipeline.handoff_terms(sim.phases)
    rng = np.random.default_rng(7)
    halves = 0
    for _ in range(40):
        nd, nc, pad = int(rng.integers(0, 6)), int(rng.integers(0, 3)), int(rng.integers(0, 3))
        if nd + nc == 0:
            nd = 2
        context = rng.integers(1, 3000, nd)
        start = rng.integers(0, 1500, nc)
        tokens = rng.integers(1, 900, nc)
        done = rng.integers(0, 2, nc).astype(bool)
        seqs, total = nd + nc, nd + pad + int(tokens.sum())
        b = seqs / min(micro, seqs)
        halves += (total * b / seqs) % 1 == 0.5
        ref = sim.steps.step_time(context, start, tokens, done, pad)
        assert closed.pipelined(context, pad, start, tokens, done) == pytest.approx(ref, rel=1e-12)
        q = closed.work(context, pad, nd, nc > 0, start, tokens, done, weighted=False)
        got = pipelined_s(q, tab[8], 2 * (nd > 0) + (nc > 0), seqs, total, nd, tab[9], cfg, fcfg, law)
        assert got == pytest.approx(ref, rel=1e-12)
    assert halves or micro != 2  # the half-to-even case was met


def test_fleet_matches_the_reference():
    sim, reqs = simulator(1, 2, 2, "vllm", kernel=True), requests(40.0, 200)
    fast = Fleet(sim, 3, "least-outstanding").run(reqs).trace
    slow = Fleet(reference(sim), 3, "least-outstanding").run(reqs).trace
    assert_same_times(fast, slow)


def test_disaggregated_pools_on_pp_stages_match_the_reference(monkeypatch):
    """A pp 2 prefill pool (two micro-batches) and a pp 2 decode pool with preloaded KV, both through the kernel,
    against both on the numpy reference."""
    reqs, calls, run = requests(20.0, 120), [], kernel.run
    monkeypatch.setattr(kernel, "run", lambda sim, *a, **kw: calls.append(sim.workload.pp) or run(sim, *a, **kw))
    runs = []
    for fast in (True, False):
        prefill, decode = simulator(1, 2, 2, "vllm", kernel=True), simulator(1, 2, 1, "vllm", kernel=True)
        if not fast:
            prefill, decode = reference(prefill), reference(decode)
        runs.append(Disaggregated(prefill, decode, 1, 2, KvLink(50e9, 5e-6)).run(reqs))
    assert calls == [2, 2]  # both pools ran compiled, the reference's neither
    assert_same_times(runs[0].trace, runs[1].trace)
    assert_same_times(runs[0].decode, runs[1].decode)


def _lone(sim: Simulator, prompt: int, output: int, copies: int = 1):
    reqs = Requests(np.zeros(copies), np.full(copies, prompt, dtype=np.int64), np.full(copies, output, dtype=np.int64))
    return sim.run(reqs)


@pytest.mark.parametrize("fast", ["kernel", "closed", "reference"])
def test_lone_request_pays_the_handoff_on_every_stage(fast):
    """One sequence: m = 1, so a step takes (1 + pp - 1) (T(1) / pp + handoff(1)) = T(1) + pp handoff(1): each of the
    output tokens' steps (the prefill step and output - 1 decode steps) is pp x handoff(1) longer than at pp = 1."""
    prompt, output, pp = 1500, 120, 4
    runs = []
    for stages in (1, pp):
        sim = simulator(pp=stages, kernel=fast == "kernel")
        sim = reference(sim) if fast == "reference" else sim if fast == "kernel" else python_loop(sim)
        runs.append(_lone(sim, prompt, output))
    one, many = runs
    assert many.first_token_s[0] - one.first_token_s[0] == pytest.approx(pp * HANDOFF_1_S, rel=1e-6)
    assert many.finish_s[0] - one.finish_s[0] == pytest.approx(output * pp * HANDOFF_1_S, rel=1e-6)


@pytest.mark.parametrize("fast", ["kernel", "closed", "reference"])
@pytest.mark.parametrize("engine,slots", [(None, 2), ("trtllm", 3)])
def test_two_micro_batches_in_flight_or_fill_and_drain(fast, engine, slots):
    """Two identical requests at t = 0 on pp = 2 with 2 micro-batches: each step is two micro-batches of one
    sequence whose work is one lone sequence's (the same prompt, the same context), so a step takes slots x (T1 / 2
    + handoff(1)), T1 the lone request's step at pp = 1 (both prompts fit one step's 8,192-token budget). The ideal
    bound keeps its batches in flight from step to step (engines.timing 26.): max(2, 2) = 2 slots, T1 + 2 handoff(1);
    TensorRT-LLM (its executor not read) keeps the GPipe fill and drain: 2 + 2 - 1 = 3 slots, 1.5 T1 + 3 handoff(1)."""
    prompt, output = 1500, 120
    base = simulator(kernel=fast == "kernel", engine=engine)
    pair = simulator(pp=2, micro=2, kernel=fast == "kernel", engine=engine)
    if fast == "reference":
        base, pair = reference(base), reference(pair)
    elif fast == "closed":
        base, pair = python_loop(base), python_loop(pair)
    one, two = _lone(base, prompt, output), _lone(pair, prompt, output, copies=2)
    half = slots / 2
    assert two.first_token_s == pytest.approx(np.full(2, half * one.first_token_s[0] + slots * HANDOFF_1_S),
                                              rel=1e-9)
    assert two.finish_s == pytest.approx(np.full(2, half * one.finish_s[0] + output * slots * HANDOFF_1_S), rel=1e-9)


def test_breaking_the_pipeline_term_fails(monkeypatch):
    """The hand derivation catches a pipeline law without its handoff, in the closed form and in the compiled loop
    (whose handoff terms come from serving.pipeline.handoff_terms)."""
    prompt, output, pp = 1500, 120, 4
    expected = output * pp * HANDOFF_1_S
    one = _lone(simulator(kernel=False), prompt, output)
    monkeypatch.setattr(pipeline.Micro, "outer", lambda self, whole_s: self.slots * whole_s / self.pp)
    closed = _lone(python_loop(simulator(pp=pp)), prompt, output)
    assert abs(closed.finish_s[0] - one.finish_s[0] - expected) > 0.5 * expected
    monkeypatch.undo()
    monkeypatch.setattr(pipeline, "handoff_terms", lambda phases: (0.0, 1.0, 0.0))
    compiled = _lone(simulator(pp=pp, kernel=True), prompt, output)
    assert abs(compiled.finish_s[0] - one.finish_s[0] - expected) > 0.5 * expected
    slow = _lone(reference(simulator(pp=pp)), prompt, output)
    assert compiled.finish_s[0] != pytest.approx(slow.finish_s[0], rel=1e-9)


PP_SPECS = ["draft=Llama-3.2-1B:3:0.7", "eagle:3:0.8,0.6,0.4", "mtp:1:0.9"]


def _spec_simulator(spec: str, pp: int, micro: int, engine: str | None) -> Simulator:
    from roofline.serving.speculative import Speculative
    return simulator(pp=pp, micro=micro, engine=engine, kernel=True, speculative=Speculative.parse(spec))


def _same_records(fast, slow) -> None:
    """A verify step is a record in both loops: the same records (times to 1e-9) and per-request times."""
    assert fast.steps.shape == slow.steps.shape and fast.preemptions == slow.preemptions
    assert np.array_equal(fast.steps[:, 2:4], slow.steps[:, 2:4]) and np.array_equal(fast.steps[:, 6], slow.steps[:, 6])
    assert fast.steps[:, :2] == pytest.approx(slow.steps[:, :2], rel=1e-9, abs=1e-12)
    for name in ("first_token_s", "finish_s", "ttft_s", "tpot_s"):
        assert getattr(fast, name) == pytest.approx(getattr(slow, name), rel=1e-9, abs=1e-12, nan_ok=True), name


@pytest.mark.parametrize("spec", PP_SPECS)
@pytest.mark.parametrize("pp,micro,engine", [(2, 1, None), (2, 2, "vllm"), (3, 2, "vllm")])
def test_speculative_decoding_on_pp_stages_compiled_matches_the_python_loop(spec, pp, micro, engine):
    """pp > 1 with speculative decoding through the kernel (its verify step and a draft model's passes pipelined,
    serving.kernel_spec) against the Python loop, which times them by StepModel.step_time's numpy pipeline (the
    Simulator keeps no closed form for them): one replica and a fleet of 2, the same records and times."""
    sim = _spec_simulator(spec, pp, micro, engine)
    reqs = requests(rate=12.0, n=120)
    assert sim.closed is None and kernel.covers(sim, reqs, single=True) is None
    slow = python_loop(sim)
    assert not slow.use_kernel(reqs, single=True)
    _same_records(sim.run(reqs), slow.run(reqs))
    fast, ref = Fleet(sim, 2, "least-outstanding").run(reqs), Fleet(slow, 2, "least-outstanding").run(reqs)
    assert np.array_equal(fast.routed, ref.routed)
    _same_records(fast.trace, ref.trace)


@pytest.mark.parametrize("spec", [PP_SPECS[0], PP_SPECS[1]])
def test_speculative_pp_without_the_stages_handoff_fails(monkeypatch, spec):
    """The comparison above can fail: the kernel given no handoff between stages (the target's and a draft
    model's, serving.pipeline.handoff_terms) no longer matches the Python loop, which pays it."""
    sim = _spec_simulator(spec, 2, 2, "vllm")
    reqs = requests(rate=12.0, n=80)
    slow = python_loop(sim).run(reqs)
    _same_records(sim.run(reqs), slow)
    monkeypatch.setattr(pipeline, "handoff_terms", lambda phases: (0.0, 1.0, 0.0))
    with pytest.raises(AssertionError):
        _same_records(sim.run(reqs), slow)
