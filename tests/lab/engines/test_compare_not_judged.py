"""Why compare.py leaves a timed step out of a vLLM report's figures: each reason a fact the run recorded (the lat.py
entry's reps, the routing simulation it ran under), never the row's own error; and the trust line counting them."""

from validate.engines.compare import STALL_RATIO, not_judged


def _decode(n_reps, slow=1.0):
    """A lat.py decode entry at B 16, P 1,024 whose 64-token reps read 1.0 s but for the first (x slow)."""
    times = [1.0 * slow] + [1.0] * (n_reps - 1)
    return {"B": 16, "P": 1024, "t_outN": {"times_s": times}, "t_out1": {"times_s": [0.2] * n_reps}}


UNIFORM = {"moe_routing_simulation": "uniform_random"}


def test_a_dense_step_with_agreeing_reps_is_judged():
    assert not_judged("Llama-3.1-8B", {}, _decode(3), "decode") == ""


def test_a_median_of_two_reps_with_a_stall_is_not_judged():
    # runs 3 and 9: Qwen3-30B-A3B B 16's reps of 2.236 and 1.085 s, 2.06x apart; the median of two is their mean
    why = not_judged("Qwen3-30B-A3B", UNIFORM, _decode(2, slow=2.236 / 1.085), "decode")
    assert "2 reps disagree 2.06x" in why


def test_three_reps_keep_a_stall_out_of_the_median():
    # run 11: 2.957 / 1.095 / 1.117 s, the median the second: judged
    assert not_judged("Qwen3-30B-A3B", UNIFORM, _decode(3, slow=2.7), "decode") == ""


def test_reps_within_the_stall_ratio_are_judged():
    assert not_judged("Llama-3.1-8B", {}, _decode(2, slow=STALL_RATIO * 0.99), "decode") == ""


def test_a_stalled_prefill_rep_is_not_judged():
    case = {"B": 1, "P": 2048, "times_s": [0.099, 0.05]}
    assert "reps disagree" in not_judged("Llama-3.1-8B", {}, case, "prefill")


def test_an_moe_without_routing_simulation_is_not_judged():
    # runs 1 and 2: dummy weights route every token to the same few experts
    assert "collapsed routing" in not_judged("Qwen3-30B-A3B", {}, _decode(3), "decode")
    assert "collapsed routing" in not_judged("DeepSeek-V2-Lite", {"moe_routing_simulation": ""}, _decode(3),
                                             "prefill")
    assert not_judged("Qwen3-30B-A3B", UNIFORM, _decode(3), "decode") == ""
    assert not_judged("Llama-3.1-8B", {}, _decode(3), "decode") == ""  # a dense model routes nothing


def test_the_profiles_own_inputs_are_not_judged():
    assert "microbenchmark" in not_judged("tiny-llama", {}, _decode(3), "decode")
    assert "profiled" in not_judged("Llama-3.1-8B", {}, {**_decode(3), "B": 256, "P": 256}, "decode")


def test_the_trust_line_counts_the_steps_it_leaves_out(tmp_path):
    from roofline.trust.engines import engine_bands

    report = tmp_path / "nvidia-h200-vllm-2026-11-28-compare.txt"
    report.write_text(
        "phase    model              B      P   measured ms   before ms (err %)   now ms (err %)\n"
        "decode   Llama-3.1-8B          1   1024       5.000      5.000 (  +0.0)     5.100 (  +2.0)\n"
        "decode   Qwen3-30B-A3B        16   1024      32.448     18.096 ( -44.2)    13.405 ( -58.7) *\n"
        "decode   tiny-llama            1    128       2.403      0.101 ( -95.8)     2.500 (  +4.0) *\n"
        "prefill  Qwen3-30B-A3B         1   2048      70.000     96.770 ( +38.2)    96.770 ( +38.2)\n")
    b = engine_bands(report)
    assert b["steps_not_judged"] == 1  # the tiny model is not a catalogue model: not counted
    assert b["decode_step"]["cases"] == 1 and b["decode_step"]["median_ape_pct"] == 2.0
    assert b["prefill_worst"]["error_pct"] == 38.2
