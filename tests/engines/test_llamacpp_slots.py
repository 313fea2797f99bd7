"""llama-server's slots with one KV stream each (roofline.engines.timing 20.): a request takes the least recently used
slot, and llama_decode splits a step's batch with split_equal, whose ubatch holds only consecutive sequence (slot) ids.
The rules come from llama.cpp's source at 0c1e570 (cited in engines.llamacpp), the evidence from the committed server
logs of runs 6 and 8 (-lv 4: each task's slot, start, release and decode time)."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from roofline.catalogue.store import load_hardware, load_model
from roofline.cli import main
from roofline.engines.llamacpp import lru_slot, ubatches
from roofline.engines.scheduling import scheduling
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.serving.clients import Clients
from roofline.serving.requests import LengthDist, poisson_requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload
from validate.engines.llamacpp_slots import table

RESULTS = Path(__file__).resolve().parents[2] / "validate/results/engines"
MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")


def test_split_equal_takes_consecutive_slots_and_equal_tokens():
    """split_equal (sequential): busy slots {0, 1, 4, 5} are two ubatches; four prompts of 512 tokens run 128 of each a
    ubatch, and unequal ones leave their tails apart (the shortest done after 4 x 128: then 3 of the rest, 3 of the two
    left, 3 of the last); a prompt in slot 0 behind decodes in slots 1 and 2 runs apart from them, 512 then its 7."""
    assert ubatches([0, 1, 4, 5], [], [], 512) == [2, 2]
    assert ubatches([0, 2, 4, 6], [], [], 512) == [1, 1, 1, 1]
    assert ubatches([4, 5, 6, 7], [], [], 512) == [4]
    assert ubatches([], [0, 1, 2, 3], [512] * 4, 512) == [512] * 4
    assert ubatches([], [0, 1, 2, 3], [515, 518, 521, 512], 512) == [512] * 4 + [9, 6, 3]
    assert ubatches([1, 2], [0], [519], 512) == [2, 512, 7]


def test_a_fresh_server_fills_its_slots_from_the_last():
    """get_available_slot's LRU choice with `<=` over slots in order: equal (never used) slots go to the last one, as
    run 6's log shows (slots 7, 6, 5, 4, 3 selected first)."""
    assert lru_slot({s: -1.0 for s in range(8)}) == 7
    assert lru_slot({0: 5.0, 3: 2.0, 6: 2.0}) == 6


def test_the_servers_decode_slows_by_a_pass_when_its_slots_split():
    """Runs 6 and 8a (cache off, c4 after r8): the four streaming slots in two runs decode at 14.6 / 15.4 ms a token;
    run 8b's in one run at 9.4: an extra pass over the F16 weights (16 GB at ~3.5-3.8 TB/s: 4.2-4.6 ms) and more."""
    def rows(path):
        return {(r["busy"], r["runs"]): r for r in table(RESULTS / path)}
    slow6 = rows("nvidia-h200-llamacpp-2026-12-01-run6/serve.log.gz")
    slow8 = rows("nvidia-h200-llamacpp-2026-12-01-run8a/serve-off.log.gz")
    fast = rows("nvidia-h200-llamacpp-2026-12-01-run8/serve-off.log.gz")
    assert slow6[(4, 2)]["tasks"] == slow8[(4, 2)]["tasks"] == 48 and (4, 2) not in fast
    assert slow6[(4, 2)]["ms_per_token"] - fast[(4, 1)]["ms_per_token"] > 4.2
    assert slow8[(4, 2)]["ms_per_token"] - fast[(4, 1)]["ms_per_token"] > 4.2


def _c4(slot_last):
    profile = scheduling("llamacpp", H200)
    from dataclasses import replace
    profile = replace(profile, max_num_seqs=8, slot_streams=True)
    wl = Workload(batch=1, context_tokens=1024, engine="llamacpp", weight_dtype="fp16", prefill_chunk_tokens=2048,
                  page_tokens=256)
    sim = Simulator(MODEL, H200, wl, parse_method("fp16"), max_tokens=1024, engine=profile, clock="sustained")
    sim.slot_last = slot_last
    reqs = poisson_requests(math.inf, 8, LengthDist.parse("512", "p"), LengthDist.parse("128", "o"), 0)
    return sim.run(reqs, None, Clients(max_concurrency=4))


def test_four_streams_on_split_slots_pay_one_pass_more_a_step():
    """c4 on 8 slots: slots 0, 1, 4, 5 least recently used (so the first round takes them) decode in two ubatches of
    two, slots 4..7 in one of four: per step, the difference is one more decode pass of two sequences, which the
    planner's decode step of 2 less its host work gives (the GPU work of 2 sequences, at their contexts), and the
    server's graph rebuilt once (timing 21.: run 10's TPOT with LLAMA_GRAPH_REUSE_DISABLE=1 less run 9's with reuse)."""
    split = _c4((1.0, 2.0, 9.0, 9.0, 3.0, 4.0, 9.0, 9.0))
    whole = _c4((9.0, 9.0, 9.0, 9.0, 1.0, 2.0, 3.0, 4.0))
    assert split.slots_after is not None
    ph = PhaseModel.build(MODEL, H200, Workload(batch=2, context_tokens=1024, engine="llamacpp", weight_dtype="fp16"),
                          parse_method("fp16"))
    mid = 512 + 64
    gpu2 = ph.decode_time(2, mid) - ph.engine.host_s(2) - ph.sampler_s(2)
    gpu4 = ph.decode_time(4, mid) - ph.engine.host_s(4) - ph.sampler_s(4)
    first = slice(0, 4)  # the first round: the slots the state picks
    extra = float(np.median(split.tpot_s[first]) - np.median(whole.tpot_s[first]))
    rebuild = _tpot("nvidia-h200-llamacpp-2026-12-01-run10/set-noreuse-1.json") - \
        _tpot("nvidia-h200-llamacpp-2026-12-01-run9/set-split-1.json")
    assert 2.0e-3 < rebuild < 2.3e-3
    assert extra == pytest.approx(2 * gpu2 - gpu4 + rebuild, rel=0.05)


def _tpot(path: str) -> float:
    from validate.engines.llamacpp_logs import served_summary
    return served_summary(json.loads((RESULTS / path).read_text()))["tpot_s"]["p50"]


def test_a_prompt_step_and_a_split_step_rebuild_the_servers_graph():
    """EngineOverheads.combine: a step with prefill chunks, or one split by slots, adds the server's graph rebuild to
    its host work, once; a decode step that reuses its graph does not."""
    o = scheduling("llamacpp", H200).overheads
    assert o.graph_s > 0
    base = o.combine(1.0, 4, 4)
    assert o.combine(1.0, 4, 4, rebuilt=True) - base == pytest.approx(o.graph_s)
    assert o.combine(1.0, 4, 4, prefill=True) - base == pytest.approx(o.graph_s)


def test_kv_unified_is_llamacpps_alone(capsys):
    assert main(["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
                 "--kv-unified", "--rate", "1", "--requests", "5"]) == 2
    assert "--kv-unified" in capsys.readouterr().err


def test_the_simulated_server_gives_run_6s_r4_the_slots_the_server_gave():
    """Run 6's r4 (80 Poisson sends at 4 req/s on a fresh -np 8 server, --cache-ram 0): the server's log names each
    task's slot; the simulator, taking the LRU slot and releasing a step's slots in slot order, gives the same 80."""
    import gzip
    import tempfile

    import roofline.serving.scheduler as scheduler
    from validate.engines.llamacpp_client import schedule
    from validate.engines.llamacpp_logs import slot_tasks
    from validate.engines.llamacpp_slots import BASE, _simulation
    from validate.engines.predict import write_trace

    log = gzip.open(RESULTS / "nvidia-h200-llamacpp-2026-12-01-run6/serve.log.gz", "rt", errors="replace").read()
    served = [t["slot"] for t in slot_tasks(log)][:80]
    taken = []
    take = scheduler.Scheduler._take_slot

    def spy(self):
        taken.append(take(self))
        return taken[-1]
    trace = write_trace(Path(tempfile.mkdtemp()) / "r4.csv", schedule(1, 4, 80), 512, 128)
    sim, reqs, clients = _simulation([*BASE, "--max-num-seqs", "8", "--cache-ram", "0", "--trace", str(trace)])
    scheduler.Scheduler._take_slot = spy
    try:
        sim.run(reqs, None, clients)
    finally:
        scheduler.Scheduler._take_slot = take
    assert taken[-80:] == served  # the run returned (a duty-clock run may be run again: Simulator.run)
    assert served[16:19] == [7, 5, 6]  # two tasks freed by one step: the lower slot the less recently used
