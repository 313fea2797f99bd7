"""llama-server's host prompt cache (timing mechanism 18, run 6): the save of each finished request's KV before the next
task starts, its law read from the server's own log, and its place in the simulator."""

from __future__ import annotations

import gzip
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.scheduling import scheduling
from roofline.engines.timing import timing
from roofline.methods import parse_method
from roofline.serving.requests import Requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

RUN6 = Path(__file__).resolve().parents[2] / "validate/results/engines/nvidia-h200-llamacpp-2026-12-01-run6"
F16_TOKEN = 32 * 2 * 8 * 128 * 2  # Llama-3.1-8B's KV a token at f16: 32 layers x K, V x 8 heads x 128 x 2 bytes


def _stamp(line: str) -> float:
    mi, s, ms, us = map(int, line.split(" ", 1)[0].split("."))  # common_log: minutes.seconds.ms.us
    return mi * 60 + s + ms / 1e3 + us / 1e6


def _saves(kv: str) -> list[tuple[float, float]]:
    """(bytes, seconds) of each save in run 6's log: from 'prompt_save: - saving prompt ... = X MiB' to the cache's
    next 'cache state' line."""
    lines = gzip.open(RUN6 / f"save-{kv}.log.gz", "rt").read().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.search(r"prompt_save: +- saving prompt with length \d+, total state size = ([\d.]+) MiB", line)
        if m and "already in the cache" not in lines[i + 1]:
            end = next(x for x in lines[i + 1:] if "cache state:" in x)
            out.append((float(m.group(1)) * 2**20, _stamp(end) - _stamp(line)))
    return out


def test_a_save_costs_its_bytes_and_the_profile_holds_their_law():
    # run 6: one slot, eight requests one after another, prompts 256 / 1024 / 4096 / 8192 twice, 16 outputs: seven
    # saves per KV type, of 271 / 1039 / 4111 / 8207 tokens' state (33.9 / 129.9 / 513.9 / 1026.0 MiB at f16)
    f16, q8 = _saves("f16"), _saves("q8_0")
    assert len(f16) == len(q8) == 7
    assert [round(b / 2**20, 1) for b, _ in f16[:4]] == [33.9, 129.9, 513.9, 1026.0]
    # q8_0's state is 34 / 64 of f16's (34-byte blocks of 32 values), and so is its time, within the latency's share
    for (bf, tf), (bq, tq) in zip(f16, q8, strict=True):
        assert bq / bf == pytest.approx(34 / 64, rel=1e-3)
        if bf > 500 * 2**20:
            assert tq / tf == pytest.approx(34 / 64, rel=0.12)
    b = np.array([x for x, _ in f16 + q8])
    t = np.array([y for _, y in f16 + q8])
    (lat, per_byte), *_ = np.linalg.lstsq(np.stack([np.ones_like(b), b], axis=1), t, rcond=None)
    prof = timing("llamacpp")
    assert prof.cache_save_s == pytest.approx(lat, rel=1e-6)
    assert prof.cache_save_byte_s == pytest.approx(per_byte, rel=1e-6)
    assert 1.5e9 < 1 / per_byte < 2.2e9 and 0 < lat < 0.02  # ~1.8 GB/s and a few ms


def _sim(model, hw, save: bool, kernel: bool) -> Simulator:
    engine = scheduling("llamacpp", hw)
    if not save:
        engine = replace(engine, overheads=replace(engine.overheads, save_s=0.0, save_byte_s=0.0))
    return Simulator(model, hw, Workload(context_tokens=4096, engine="llamacpp", weight_dtype="fp16"),
                     parse_method("fp16"), max_tokens=4096, engine=engine, kernel=kernel)


@pytest.mark.parametrize("kernel", [False, True])
def test_the_next_request_waits_for_the_last_ones_save(kernel):
    # two requests far apart: the second's first step admits it after the first finished, so llama-server saves the
    # first's 512 + 64 - 1 computed tokens (73.7 MiB at f16) before it and clears its slot (one stream: --cache-idle-
    # slots): its TTFT is the first's plus that save. With the cache off the idle slot keeps its cells, which the
    # second's prompt attends over in the one stream (timing 22.): later than the first, with no save
    model, hw = load_model("Llama-3.1-8B"), load_hardware("H200")
    reqs = Requests(np.array([0.0, 30.0]), np.array([512, 512]), np.array([64, 64]))
    on, off = _sim(model, hw, True, kernel).run(reqs), _sim(model, hw, False, kernel).run(reqs)
    prof = timing("llamacpp")
    save = prof.cache_save_s + (512 + 64 - 1) * F16_TOKEN * prof.cache_save_byte_s
    assert 0.035 < save < 0.05
    assert on.ttft_s[0] == pytest.approx(off.ttft_s[0], rel=1e-9)  # nothing to save before the first
    assert on.ttft_s[1] - on.ttft_s[0] == pytest.approx(save, rel=1e-6)
    assert 0 < off.ttft_s[1] - off.ttft_s[0] < save


def test_simulate_cache_ram_zero_turns_the_saves_off_and_says_so(capsys):
    # two requests 30 s apart on llama-server: the second's TTFT holds the first's save by default and not with
    # --cache-ram 0; the engine's note says which; another engine has no such cache (one line, exit 2)
    import json

    from roofline.cli import main

    base = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "fp16", "--engine", "llamacpp",
            "--rate", "0.03", "--requests", "2", "--prompt-tokens", "512", "--output-tokens", "64", "--no-search",
            "--json"]
    out = {}
    for flag in ((), ("--cache-ram", "0")):
        main([*base, *flag])
        d = json.loads(capsys.readouterr().out)
        out[flag] = d
    on, off = out[()], out[("--cache-ram", "0")]
    assert "prompt cache on" in " ".join(on["engine"]["notes"])
    assert "prompt cache off" in " ".join(off["engine"]["notes"])
    prof = timing("llamacpp")  # the second request waits for the first's 575 tokens' save, ~46 ms
    save = prof.cache_save_s + (512 + 64 - 1) * F16_TOKEN * prof.cache_save_byte_s
    # two TTFTs t0 <= t1: p50 is their mean and p90 t0 + 0.9 (t1 - t0), so t1 - t0 = (p90 - p50) / 0.4; cache on, the
    # second's step holds the save (its slot cleared, as the first's stream was); off, the first's kept cells widen the
    # second's attention (timing 22.), with no save
    on_gap, off_gap = ((d["ttft_s"]["p90"] - d["ttft_s"]["p50"]) / 0.4 for d in (on, off))
    assert on_gap == pytest.approx(save, rel=1e-3)
    assert 0 < off_gap < save
    assert main(["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "fp16", "--engine", "vllm",
                 "--rate", "1", "--requests", "2", "--cache-ram", "0"]) == 2
    assert "--cache-ram" in capsys.readouterr().err
