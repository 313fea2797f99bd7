"""validate/engines/kernel_trace.py on a timeline written by hand (cupti_trace.c's line format)."""

import lzma

from validate.engines.kernel_trace import category, read, steps, summarize

V = 513_024  # one row of Llama-3's logits, F32


def _lines() -> list[str]:
    out = []
    # five steps of 1 ms: a 300 us matmul at +100 us, a 50 us norm at +450 us, the logits copy ending the step at +1000
    for i in range(5):
        t0 = 1_000_000 * i
        out.append(f"R\t{t0 + 80_000}\t{t0 + 85_000}\t{10 * i}\t7\t211\tcudaGraphLaunch")
        out.append(f"K\t{t0 + 100_000}\t{t0 + 400_000}\t{10 * i}\t13\t1\tvoid mul_mat_vec_f<half>(...)")
        out.append(f"K\t{t0 + 450_000}\t{t0 + 500_000}\t{10 * i}\t13\t1\tvoid rms_norm_f32<1024>(...)")
        out.append(f"M\t{t0 + 990_000}\t{t0 + 1_000_000}\t{10 * i + 1}\t13\t{V}\t2")
    out.append(f"M\t4_500_000\t4_600_000\t99\t13\t{2 * V}\t2")  # another batch size's copy: not a boundary of V
    out.append("M\t10\t20\t98\t13\t512\t1")  # a host-to-device copy
    return out


def test_steps_by_hand(tmp_path):
    f = tmp_path / "t.tsv.xz"
    with lzma.open(f, "wt") as fh:
        fh.write("\n".join(_lines()) + "\n")
    t = read(f)
    st = steps(t, V)
    assert len(st) == 4  # five boundaries, four spans
    s = st[0]
    assert s["wall_us"] == 1000.0 and s["kernels"] == 2
    assert s["busy_us"] == 350.0 and s["sum_us"] == 350.0
    assert s["lead_us"] == 100.0 and s["tail_us"] == 500.0  # the copy ends 1000 us after the last kernel's 500 us
    assert s["gaps_over_20us"] == [50.0]
    assert s["by_category_us"] == {"matmul": 300.0, "norm": 50.0}
    assert s["launch_calls"] == 1 and s["launch_host_us"] == 5.0
    g = summarize(t, V, skip=1)["groups"]
    assert [x["steps"] for x in g] == [3] and g[0]["median"]["wall_us"] == 1000.0
    assert g[0]["per_name_per_step"][0] == {"name": "void mul_mat_vec_f<half>(...)", "calls": 1.0, "us": 300.0,
                                            "cat": "matmul"}


def test_categories():
    assert category("void flash_attn_ext_f16<128, 64>(...)") == "attention"
    assert category("void mul_mat_q<(ggml_type)8, 64>(...)") == "matmul"
    assert category("void k_bin_bcast<&op_add>(...)") == "elementwise"
    assert category("void k_set_rows<half>(...)") == "kv-write"
    assert category("void convert_unary<float, half>(...)") == "convert"
    assert category("something_else") == "other"


def test_exclusive_time_under_programmatic_dependent_launch():
    from validate.engines.kernel_trace import exclusive
    # B starts 20 ns before A ends (it waits inside itself), C inside B's span: raw 300 + 120 + 10 ns, busy 400
    ks = [(100, 400, "a"), (380, 500, "b"), (450, 460, "c")]
    assert exclusive(ks) == [300, 100, 0]
    assert sum(exclusive(ks)) == 400
