"""validate/engines/sglang_prefill.py: SGLang's served prefill step taken apart. Expected values are worked by hand:
the tuned config's nearest key, the padded rows of a toy routing, and for the committed runs their files' own numbers
(run 2c's 1 x 1,024 census: out=1 kernels 28.363 ms less the decode step's 3.757 ms; run 3's one-prompt prefill lines
per run, `grep -c "#new-seq: 1,"` between each run's flush and the next warm-up: 137 / 162 / 135 at 12 / 24 / 36,
each run's first line, a one-prompt prefill after the flush, left out: its gap spans the pause between runs)."""

import json

import pytest

from validate.engines import sglang_prefill as mod


def test_the_tuned_configs_block_is_the_nearest_keys():
    assert mod.block_m(1024) == 128 and mod.block_m(8192) == 128  # past the largest key, 4096's
    assert mod.block_m(700) == 64  # |700 - 512| = 188 < |700 - 1024| = 324
    assert mod.block_m(300) == 32  # 256's


def test_padded_rows_of_a_toy_routing_and_of_a_1024_token_call():
    # 2 tokens, 2 experts, top-1: an expert's rows 0 / 1 / 2 with 1/4, 1/2, 1/4; a block of 16 (key 2) pads 1 or 2
    # rows to 16: E[padded] = 16 x 3/4 = 12 over the mean 1 routed
    assert mod.padded_ratio(2, experts=2, topk=1) == pytest.approx(12.0)
    # 1,024 tokens to top-8 of 128: 64 rows an expert (sd 7.7), one block of 128 each: twice the rows
    assert mod.padded_ratio(1024) == pytest.approx(2.0, abs=1e-6)


def test_the_census_of_one_prefill_is_out1_less_one_decode_step():
    case = json.loads(mod.CENSUS.read_text())["profile"][0]
    total = sum(v["s"] for v in case["out1_kernels"].values()) - case["kernel_step_s"]
    got = mod.census(0, 1)
    assert sum(got.values()) == pytest.approx(total) and total == pytest.approx(24.606e-3, abs=1e-6)
    assert set(got) <= {c for c, _ in mod.CLASSES} | {"other"}
    assert got["q_copy"] == pytest.approx(0.436e-3, abs=1e-6)  # 48 copies, none in the decode step at B 1


def test_served_prefills_pool_the_three_poisson_runs():
    from validate import stored
    rows = mod.served(stored.read_text(mod.RUN3 / f"{mod.MODEL}-server.log", newline=""))
    assert rows[1]["n"] == (137 - 1) + (162 - 1) + (135 - 1)
    assert 0.024 < rows[1]["q10_s"] < 0.026
