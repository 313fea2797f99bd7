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


def test_gaps_name_the_host_calls_while_the_gpu_waited(tmp_path):
    # a step from the copy ending at 1.0 ms to the one ending at 2.0 ms: a 300 us matmul from +100 us, a 50 us norm from
    # +450, so one idle gap of 50 us at +400 (the GPU waits from the matmul's end); two synchronisations of 10 us fall
    # in it and a launch at +80 us, before the first kernel, does not
    lines = [f"M\t990000\t1000000\t1\t13\t{V}\t2", f"M\t1990000\t2000000\t2\t13\t{V}\t2",
             "R\t1080000\t1085000\t3\t7\t211\tcudaGraphLaunch",
             "K\t1100000\t1400000\t4\t13\t1\tvoid mul_mat_vec_f<half>(...)",
             "R\t1410000\t1420000\t5\t7\t130\tcudaStreamSynchronize",
             "R\t1430000\t1440000\t6\t7\t130\tcudaStreamSynchronize",
             "K\t1450000\t1500000\t7\t13\t1\tvoid rms_norm_f32<1024>(...)"]
    f = tmp_path / "g.tsv"
    f.write_text("\n".join(lines) + "\n")
    from validate.engines.kernel_trace import gaps
    out = gaps(read(f), V, min_gap_us=20)
    assert len(out) == 1 and out[0]["kernels"] == 2 and out[0]["busy_us"] == 350.0
    (g,) = out[0]["gaps"]
    assert g["us"] == 50.0 and g["at_us"] == 400.0
    assert g["calls"] == [{"name": "cudaStreamSynchronize", "count": 2, "host_us": 20.0}]
    assert gaps(read(f), V, min_gap_us=60)[0]["gaps"] == []  # the one gap is under 60 us
