"""A step past the capture sizes (roofline/engines/timing.py mechanism 8) where the engine captures prefill graphs
apart from its decode batches (SGLang: decode bs 1 .. 256, prefill 4 .. 8,192 tokens): EngineOverheads.eager's two
limits by hand, and the compiled record loop (serving.kernel) against the Python loop with both limits in play."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.catalogue import load_hardware  # noqa: E402
from roofline.engines.scheduling import EngineOverheads, scheduling  # noqa: E402
from roofline.serving import kernel  # noqa: E402
from tests.serving.test_serving_kernel import assert_same, python_loop, requests, simulator  # noqa: E402


def test_the_two_limits_by_hand():
    """Host 1 ms + 10 us a sequence, launches 70 ms past B 256 (decode) or 8,192 tokens (a step with chunks), no
    overlap: a decode of 288 takes host + max(GPU, launches) = 1 + 2.88 + 70 = 73.88 ms; a 1,024-token prefill of one
    sequence GPU + host = 20 + 1.01 = 21.01 ms (within the prefill graphs); one of 9,000 tokens 1.01 + 70 = 71.01
    ms. With no prefill limit of its own (vLLM's) the 1,024-token prefill pays the launches: 71.01 ms."""
    o = EngineOverheads(step_s=1e-3, per_seq_s=1e-5, eager_s=0.07, eager_above_tokens=256,
                        eager_above_prefill_tokens=8192)
    assert o.combine(0.02, 288, 288) == pytest.approx(0.07388)
    assert o.combine(0.02, 1, 1024, prefill=True) == pytest.approx(0.02101)
    assert o.combine(0.02, 1, 9000, prefill=True) == pytest.approx(0.07101)
    assert o.combine(0.02, 256, 256) == pytest.approx(0.02 + 1e-3 + 256e-5)
    one = dataclasses.replace(o, eager_above_prefill_tokens=0)
    assert one.combine(0.02, 1, 1024, prefill=True) == pytest.approx(0.07101)


def test_sglangs_limits_give_the_python_loops_times_past_b_256():
    """SGLang's profile with the 8B at 400 req/s: batches pass 256 (eager decode), prefill steps of thousands of
    tokens stay graphed; kernel and Python loop agree, and the prefill limit changes the run (with vLLM's single
    limit every prefill of more than 256 tokens would pay the launches). Not always later: under the overlap loop
    the next schedule waits for an eager launch that outlasts its step's start (timing mechanism 24), so it takes
    in the requests that arrived meanwhile (here the first prefill's 22 ms launch: the second step takes 10 prompts
    instead of 1)."""
    h100 = load_hardware("H100-SXM")
    reqs = requests(400.0, 420)
    sim = simulator(reqs.max_tokens, engine=scheduling("sglang", h100, "api", 1, context_len=reqs.max_tokens))
    eng = sim.engine.overheads
    assert eng.eager_s > 0.015 and eng.eager_above_tokens == 256 and eng.eager_above_prefill_tokens == 8192
    assert kernel.covers(sim, reqs) is None
    fast = sim.run(reqs)
    assert_same(fast, python_loop(sim).run(reqs))
    assert fast.steps[:, 2].max() > 256  # some steps ran past the decode graphs
    old = simulator(reqs.max_tokens, engine=scheduling("sglang", h100, "api", 1, context_len=reqs.max_tokens))
    old.engine = dataclasses.replace(old.engine, overheads=dataclasses.replace(eng, eager_above_prefill_tokens=0))
    slow_old = old.run(reqs)
    assert np.any(np.abs(slow_old.finish_s - fast.finish_s) > 1e-3)
    assert slow_old.steps[1, 6] > fast.steps[1, 6]


def test_sglangs_prefill_buckets_by_hand():
    """SGLang 0.5.17's prefill graph buckets (server_args.py 4990-5007, up to the chunked_prefill_size 8,192 on the
    H200, as its start-up log lists them: 4, 8, ..., 1,024, 1,280, ..., 8,192) and a replay's padding
    (prefill_cuda_graph_runner.py: the smallest bucket >= tokens, unless more than twice the tokens)."""
    from roofline.engines.scheduling import sglang_prefill_capture_sizes, sglang_prefill_padded

    sizes = sglang_prefill_capture_sizes(8192)
    assert sizes[:9] == (4, 8, 12, 16, 20, 24, 28, 32, 48) and sizes[-3:] == (7168, 7680, 8192)
    assert len(sizes) == 8 + 13 + 8 + 8 + 13 + 8  # 4..32/4, 48..256/16, 288..512/32, 576..1024/64, 1280..4096/256, ..
    assert [sglang_prefill_padded(t, sizes) for t in (1, 2, 3, 1024, 1025, 3000, 8192, 9000)] == [
        1, 4, 4, 1024, 1280, 3072, 8192, 9000]
    profile = scheduling("sglang", load_hardware("H200"), "api", 1, context_len=4096)
    assert profile.padded_tokens(1025, decode_only=False) == 1280
    assert profile.padded_tokens(100, decode_only=True) == 104  # a decode batch of 100 runs the bs-104 graph


def test_sglangs_prefill_padding_gives_the_python_loops_times_and_moves_the_run():
    """Prompts of 64-3,000 tokens, mostly between buckets: the compiled loop pads each prefill step as the Python
    loop does, and the run differs from one without prefill buckets (every prefill one exact step)."""
    h100 = load_hardware("H100-SXM")
    reqs = requests(30.0, 150)
    sim = simulator(reqs.max_tokens, engine=scheduling("sglang", h100, "api", 1, context_len=reqs.max_tokens))
    assert sim.engine.prefill_capture_sizes[-1] == sim.engine.max_num_batched_tokens
    fast = sim.run(reqs)
    assert_same(fast, python_loop(sim).run(reqs))
    exact = simulator(reqs.max_tokens, engine=dataclasses.replace(
        scheduling("sglang", h100, "api", 1, context_len=reqs.max_tokens), prefill_capture_sizes=()))
    unpadded = exact.run(reqs)
    assert unpadded.ttft_s.mean() < fast.ttft_s.mean()  # the padded tokens cost GEMM work (batches may regroup)
    assert not np.allclose(unpadded.first_token_s, fast.first_token_s)
