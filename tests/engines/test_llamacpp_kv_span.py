"""A one-stream llama-server attends over every cell its stream holds (roofline.engines.timing 22.): ggml-cuda's
FLASH_ATTN_EXT trims a query tile to its last unmasked cell only with >= 1,024 query rows or several streams, so a
ubatch of the server's one stream (-kvu, its default) computes its whole K/V view, pad256 of the stream's used cells
(llama_kv_cache::get_n_kv), idle slots' cells included while they keep them. Rules from llama.cpp's source at 0c1e570
(fattn.cu, fattn-common.cuh, llama-kv-cache.cpp, tools/server/server-context.cpp), figures derived by hand here, the
evidence run 13 (predicted before the run) and run 12."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from roofline.catalogue.store import load_hardware, load_model
from roofline.engines.llamacpp import fa_query_tile, kv_view
from roofline.engines.scheduling import scheduling
from roofline.engines.timing import timing
from roofline.methods.registry import parse_method
from roofline.serving import kernel
from roofline.serving.pool import KVPool
from roofline.serving.requests import Requests
from roofline.serving.scheduler import Scheduler, SchedulerConfig
from roofline.serving.simulate import Simulator
from roofline.serving.stepmodel import QUANTITIES
from roofline.specs import Workload
from validate.engines.llamacpp_logs import served_summary

RESULTS = Path(__file__).resolve().parents[2] / "validate/results/engines"
RUN13 = RESULTS / "nvidia-h200-llamacpp-2026-12-01-run13"
MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")


def test_the_mma_block_takes_64_over_the_grouped_heads_query_rows():
    # ncols2 is the largest of 8, 4, 2, 1 dividing the GQA ratio (fattn.cu _switch_ncols2), the tile 64 / ncols2 rows
    assert fa_query_tile(4) == 16  # Llama-3.1-8B: 32 query heads over 8 K/V heads
    assert fa_query_tile(8) == 8
    assert fa_query_tile(32) == 8
    assert fa_query_tile(6) == 32
    assert fa_query_tile(1) == 64  # MHA


def test_the_view_is_the_used_cells_padded_to_256_within_the_stream():
    assert kv_view(0, 65536) == 256  # at least 256 cells
    assert kv_view(256, 65536) == 256
    assert kv_view(257, 65536) == 512
    assert kv_view(36_515, 65536) == 36_608
    assert kv_view(70_000, 65536) == 65536  # never past the stream


def _sched(save: tuple[float, float]) -> Scheduler:
    reqs = Requests(np.zeros(2), np.array([100, 50]), np.array([3, 3]))
    pool = KVPool.uniform(10**6, 16, 1.0, 4096, "test: 1 byte per token")
    s = Scheduler(reqs, pool, SchedulerConfig(2048, 4, reserve_full=True, unified_slots=True), save=save)
    s.waiting.append(0)
    s.arrived = 1
    step = 0
    while s.n_running or s.waiting:  # request 0 alone, a step at a time: its prompt, then two decodes
        step += 1
        s.commit(s.schedule(), float(step))
    s.waiting.append(1)
    s.arrived = 2
    return s


def test_an_idle_slot_keeps_its_cells_in_the_stream_until_a_task_takes_it():
    # --cache-ram 0: request 0 (100 + 3) ends holding 100 + 3 - 1 computed cells in its slot, 3 (a fresh server's
    # last); request 1 takes slot 2 (the least recently used: never used), so the stream still holds those 102
    s = _sched((0.0, 0.0))
    assert s.n_running == 0 and s.stream_used() == 102
    s.schedule()
    assert s.stream_used() == 102  # admitted: its own prompt not yet computed
    assert np.flatnonzero(s.slot_cells).tolist() == [3] and s.slot[0] == 2


def test_with_the_host_prompt_cache_a_new_task_clears_every_idle_slot():
    # --cache-idle-slots (on with --cache-ram and one stream): the idle slots are saved and cleared when a task starts
    s = _sched((0.005, 1e-9))
    assert s.stream_used() == 102
    s.schedule()
    assert s.stream_used() == 0 and not s.slot_cells.any()


def _sim(save: bool = False) -> Simulator:
    engine = scheduling("llamacpp", H200)
    if not save:  # --cache-ram 0
        engine = replace(engine, overheads=replace(engine.overheads, save_s=0.0, save_byte_s=0.0))
    return Simulator(MODEL, H200, Workload(context_tokens=12_002, engine="llamacpp", weight_dtype="fp16"),
                     parse_method("fp16"), max_tokens=12_002, engine=engine)


def test_a_prompt_beside_kept_cells_scores_every_one_of_them():
    """By hand: a 512-token piece beside K kept cells scores 512 x (pad256(K + 512) - 512) more (query, key) pairs than
    alone, each 2 x (128 + 128) tensor-core FLOPs a head (QK and PV), 32 heads, 32 layers, at the engine's measured
    attention rate held at the sustained SM clock (the serving steady state: 1,452 of 1,500 MHz measured on the H200),
    plus the softmax's 5 FLOPs a score at the FP32 rate, plus the host's KQ mask over the cells past its own view
    (timing 23.: the first row walks them, the 511 others copy them)."""
    sim = _sim()
    steps, tile, n_ub = sim.steps, fa_query_tile(4), sim.phases.engine.pass_tokens
    empty = np.zeros(0, dtype=np.int64)
    piece = (np.zeros(1, dtype=np.int64), np.full(1, 512), np.ones(1, bool))
    alone = steps.span_time(empty, *piece, 0, sim.stream_cells, tile, n_ub)
    kept = 36_003
    beside = steps.span_time(empty, *piece, kept, sim.stream_cells, tile, n_ub)
    pairs = 512 * (kv_view(kept + 512, sim.stream_cells) - 512)
    flops, softmax = pairs * 2 * (128 + 128) * 32 * 32, pairs * 5 * 32 * 32
    measured = H200.measured
    rate = timing("llamacpp").attention_flops["H200"][128] * measured.sustained_sm_clock_hz / measured.burst_sm_clock_hz
    prof = timing("llamacpp")
    mask = (kv_view(kept + 512, sim.stream_cells) - 512) * (prof.mask_cell_s + 511 * prof.mask_copy_s)
    assert beside - alone == pytest.approx(flops / rate + softmax / H200.fp32_dense_flops_per_s + mask, rel=0.01)
    # alone, the one stream is the prompt's own: the split server's step (a stream a slot)
    assert alone == pytest.approx(steps.split_time(empty, *piece, [512]), rel=1e-9)
    # a decode reads its view once per 16 query rows: 17 sequences read it twice, 16 once
    view = kv_view(20_000, sim.stream_cells)
    d16, d17 = (steps._span_decodes(n, view, tile, True)[:, 0] - steps._dec_const * n for n in (16, 17))
    read = QUANTITIES.index("bytes") * len(steps.keys) + steps.dec_tab  # the context-read bytes of each decode op
    assert np.any(d16[read] > 0)
    assert d17[read] == pytest.approx(2 * d16[read])
    assert not np.any(steps._span_decodes(1, view, tile, False)[read, 0] - steps._dec_const[read])  # read beside


def test_run_13_the_kept_cells_cost_what_the_model_says():
    """Run 13 (H200, -np 4 --cache-ram 0): the lone 512-token prompt's TTFT p50 in slot 3 with slots 0-2 keeping
    36,003 cells, one stream (-kvu) less a stream a slot, against the model's difference (hand-derived above). The
    model reads it ~15 % over: run 3's attention rate, fitted at views to 8,192 cells, is slower than the kernel at
    36,000 (runs 14 and 15 show the same on the benchmark's prompts); the host mask (23.) is run 16's."""
    def ttft(variant):
        return served_summary(json.loads((RUN13 / f"lone-{variant}-k12.json").read_text()))["ttft_s"]["p50"]
    measured = ttft("kvu") - ttft("split")
    sim = _sim()
    empty = np.zeros(0, dtype=np.int64)
    piece = (np.zeros(1, dtype=np.int64), np.full(1, 512), np.ones(1, bool))
    model = (sim.steps.span_time(empty, *piece, 36_003, sim.stream_cells, 16, 512)
             - sim.steps.span_time(empty, *piece, 0, sim.stream_cells, 16, 512))
    assert 0.035 < measured < 0.045
    assert model == pytest.approx(measured, rel=0.18)


def test_the_one_stream_server_runs_the_python_loop_and_says_why():
    sim = _sim()
    assert sim.span and sim.scheduler.unified_slots and sim.closed is None
    reqs = Requests(np.zeros(3), np.full(3, 64), np.full(3, 4))
    assert "one KV stream" in kernel.covers(sim, reqs)


def test_the_compiled_laws_time_the_one_stream_steps_as_the_numpy_path_does():
    # a Poisson run with prompts, decode blocks and kept cells (--cache-ram 0): StepModel's numpy laws (fast False)
    # and the same laws compiled (serving.closedform) give the same times to float rounding
    rng = np.random.default_rng(3)
    n = 40
    reqs = Requests(np.sort(rng.uniform(0, 20, n)), rng.integers(64, 3000, n), rng.integers(2, 200, n))
    engine = scheduling("llamacpp", H200)
    engine = replace(engine, overheads=replace(engine.overheads, save_s=0.0, save_byte_s=0.0))
    runs = [Simulator(MODEL, H200, Workload(context_tokens=3200, engine="llamacpp", weight_dtype="fp16"),
                      parse_method("fp16"), max_tokens=3200, engine=engine, fast=fast).run(reqs)
            for fast in (False, True)]
    np.testing.assert_allclose(runs[1].ttft_s, runs[0].ttft_s, rtol=1e-9)
    np.testing.assert_allclose(runs[1].finish_s, runs[0].finish_s, rtol=1e-9)


RUN15 = RESULTS / "nvidia-h200-llamacpp-2026-12-01-run15"
RUN16 = RESULTS / "nvidia-h200-llamacpp-2026-12-01-run16"


def test_the_host_mask_law_is_run_16s_median_a_cell():
    # run 16 timed llama.cpp's mask loop alone (kq_mask_bench.cpp over llama_kv_cells): per case the median of three
    # repetitions; a decode row walks every cell of the view, ~4.5 ns a cell on the H200 machine's host
    import statistics
    cases: dict = {}
    for f in sorted(RUN16.glob("kq-mask-*.jsonl")):
        for line in f.read_text().splitlines():
            d = json.loads(line)
            cases.setdefault((d["kind"], d["seqs"], d["held"]), []).append(d)
    per_cell = [statistics.median(x["us"] for x in v) * 1e-6 / (v[0]["seqs"] * v[0]["n_kv"])
                for (kind, *_), v in cases.items() if kind == "decode"]
    assert len(per_cell) == 15 and 3e-9 < statistics.median(per_cell) < 6e-9
    assert timing("llamacpp").mask_cell_s == pytest.approx(statistics.median(per_cell), rel=1e-9)
    assert 0 < timing("llamacpp").mask_copy_s < timing("llamacpp").mask_cell_s


def _batched_step(variant: str, b: int) -> float:
    """llama-batched-bench's T_TG / TG at PP 1,024 and B `b` in run 15, the median of its repeats that have it."""
    import statistics

    from validate.engines.llamacpp_host import _batched_rows
    rows = [_batched_rows(p) for p in sorted(RUN15.glob(f"batched-{variant}-*.log"))]
    return statistics.median(r[(1024, b)]["t_tg"] / r[(1024, b)]["tg"] for r in rows if (1024, b) in r)


@pytest.mark.parametrize("b", [16, 17])
def test_run_15_one_streams_decode_costs_its_view_reads_and_mask(b):
    """Run 15: llama-batched-bench's decode step with one stream (-kvu) less with a stream a sequence, at B 16 (one
    query tile: the host's mask over the view, 23.) and B 17 (a second read of the view, 22., and the mask), against
    the model's span step less its split step at the benchmark's mid context."""
    measured = _batched_step("kvu", b) - _batched_step("split", b)
    sim = _sim()
    empty, none = np.zeros(0, dtype=np.int64), np.zeros(0, bool)
    ctx = np.full(b, 1024 + 16)
    model = (sim.steps.span_time(ctx, empty, empty, none, int((ctx - 1).sum()), 65536, 16, 512, sim.span_closed)
             - sim.steps.split_time(ctx, empty, empty, none, [b]))
    assert measured > 1e-3
    assert model == pytest.approx(measured, rel=0.2)
