# ruff: noqa: E402  (the backend is chosen before anything imports pyplot)
import matplotlib

matplotlib.use("Agg")

import math
import os
import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest
from matplotlib.figure import Figure

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.ceiling_sources import with_ceilings
from roofline.methods import parse_method
from roofline.planner import plan
from roofline.report import plots
from roofline.specs import Workload
from roofline.units import SOFTMAX_FLOPS

GIB = 1 << 30
# Llama-3.1-8B decode on one H100-SXM: B = 16 sequences at L = 32,768 cached tokens
BATCH, CONTEXT = 16, 32_768
H, H_KV, D = 32, 8, 128  # query heads, KV heads, head dim
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def scenario():
    # the hand derivations below are on the datasheet roofline (the catalogue's H100-SXM also carries measured
    # ceilings, which the planner uses by default)
    return (load_model("Llama-3.1-8B"), with_ceilings(load_hardware("H100-SXM"), "datasheet"),
            Workload(batch=BATCH, context_tokens=CONTEXT, generated_tokens=1024))


@pytest.fixture(scope="module")
def the_plan(scenario):
    model, hw, wl = scenario
    # bf16 does not fit at this batch (64 GiB of KV in a 55 GiB pool); the KIVI presets do
    return plan(model, hw, wl, [parse_method(m) for m in ("bf16", "kivi-2", "kivi-4")])


def _attention_by_hand(method: str) -> tuple[int, int]:
    """(FLOPs, bytes) of one layer's fused decode attention for the whole batch.

    QK^T and PV: 2 B H L (d + d) matmul FLOPs; online softmax: SOFTMAX_FLOPS per score. Bytes: the cache
    read, plus the query read and the output written in bf16 (B H d x 2 bytes each).
    KIVI-2 (G = 32, R = 128, fp16 scale + zero per group): at L = 32,768 (a multiple of R) the key residual
    has just been flushed, so all L keys are 2-bit codes with one group of 32 tokens per channel; values
    keep the last R tokens in fp16 and the other L - R as 2-bit codes, one group of 32 channels per token.
    Dequantizing a code costs 2 FLOPs (scale multiply, zero add).
    """
    matmul = 2 * BATCH * H * CONTEXT * (2 * D)
    softmax = SOFTMAX_FLOPS * BATCH * H * CONTEXT
    # q read; the split kernel writes fp32 partials (max, sum, D accumulators) per head per split of 2048 tokens
    act = BATCH * H * D * 2 + BATCH * H * (-(-CONTEXT // 2048)) * (D + 2) * 4
    width = H_KV * D  # channels of K (or V) per token
    if method == "bf16":
        return matmul + softmax, BATCH * CONTEXT * 2 * width * 2 + act
    k_codes = CONTEXT * width * 2 // 8
    k_meta = CONTEXT // 32 * width * (2 + 2)
    v_window = 128 * width * 2
    v_codes = (CONTEXT - 128) * width * 2 // 8
    v_meta = (CONTEXT - 128) * (width // 32) * (2 + 2)
    dequant = 2 * BATCH * (CONTEXT + CONTEXT - 128) * width
    return matmul + softmax + dequant, BATCH * (k_codes + k_meta + v_window + v_codes + v_meta) + act


@pytest.mark.parametrize("method, flops, n_bytes", [
    ("bf16", 8_673_820_672, 2_151_874_560),
    ("kivi-2", 10_817_110_016, 410_451_968),
])
def test_attention_point_matches_hand_derivation(scenario, method, flops, n_bytes):
    assert _attention_by_hand(method) == (flops, n_bytes)
    model, hw, wl = scenario
    points = plots.op_points(model, hw, wl, parse_method(method))
    (attn,) = [p for p in points if p["op"] == "attention"]
    assert attn["label"] == f"{method}: attention" and attn["method"] == method and attn["kind"] == "attention"
    assert attn["intensity"] == pytest.approx(flops / n_bytes, rel=1e-12)
    if method == "kivi-2":
        # 2-bit codes cost 3 integer instructions per 4 elements (one and + two prmt per word of four code
        # bytes) at Hopper's 64 INT32 lanes/clk/SM; with the dequant and softmax FLOPs at the fp32 rate the
        # vector units take 90 us (8.7 + 33.3 + 48.0), under the 122.5 us of memory: the op stays memory-bound
        width = H_KV * D
        int_ops = 3 * BATCH * (CONTEXT + CONTEXT - 128) * width / 4
        matmul = 2 * BATCH * H * CONTEXT * (2 * D)
        compute = matmul / 989.4e12 + (flops - matmul) / 66.9e12 + int_ops / hw.int_ops_per_s()
        assert compute == pytest.approx(90.0e-6, rel=1e-3) and compute < n_bytes / hw.memory_bytes_per_s
        # hierarchical roofline (kv.quant.metadata_loads, operand_loads): every cache byte passes shared memory
        # once; each quantized element (K and V are grouped across their dot's reduction) loads its own fp16
        # scale + zero (4 B) and each of the kernel's 4 warps copies every group's (4 B / 32 elements); q is
        # read once a step for the 4 sub-tile dots of 8 tokens (16 padded rows x d x 2 B / 32 per token and KV
        # head) and p is staged once
        # and read by the 4 warps (16 rows x 2 B x 5 per token and KV head); at the datasheet's 128 B/clock x 132
        # SMs x 1.98 GHz the op is shared-memory-bound
        act = BATCH * H * D * 2 + BATCH * H * (-(-CONTEXT // 2048)) * (D + 2) * 4
        quantized = BATCH * (CONTEXT + CONTEXT - 128) * width
        metadata = 4 * quantized + 4 * quantized // 32 * 4
        operands = BATCH * CONTEXT * width * 16 * 2 // 32 + BATCH * (CONTEXT - 128) * H_KV * 16 * 2 * 5
        shared = n_bytes - act + metadata + operands
        t_shared = shared / (128 * 132 * 1.98e9)
        assert t_shared > n_bytes / hw.memory_bytes_per_s
        assert attn["flops_per_s"] == pytest.approx(flops / t_shared, rel=1e-12)
        return
    # memory-bound on the datasheet roofline: achieved FLOP/s = intensity x bandwidth
    assert attn["flops_per_s"] == pytest.approx(flops / (n_bytes / hw.memory_bytes_per_s), rel=1e-12)


def test_points_are_flops_over_bytes_and_skip_ops_without_flops(scenario):
    from roofline.costmodel import Roofline, build_graph
    from roofline.units import B, L, P

    model, hw, wl = scenario
    method = parse_method("bf16")
    rows = Roofline(hw).evaluate(build_graph(model, method, "decode"), {B: BATCH, L: CONTEXT, P: wl.prompt})
    by_name = {r["name"]: r for r in rows}
    points = plots.op_points(model, hw, wl, method)
    names = {p["op"] for p in points}
    assert {"embedding", "kv_update"}.isdisjoint(names)  # zero FLOPs in bf16 decode
    assert names == {r["name"] for r in rows if r["flops"] > 0}
    for p in points:
        row = by_name[p["op"]]
        assert p["intensity"] == pytest.approx(row["flops"] / row["bytes"], rel=1e-12)
        assert p["flops_per_s"] == pytest.approx(row["flops"] / row["time_s"], rel=1e-12)


def test_op_points_prefill_and_bad_phase(scenario):
    model, hw, wl = scenario
    prefill = plots.op_points(model, hw, wl, parse_method("bf16"), phase="prefill")
    (attn,) = [p for p in prefill if p["op"] == "attention"]
    assert attn["intensity"] > 100  # prefill attention reuses K and V across the prompt
    with pytest.raises(ValueError, match="phase"):
        plots.op_points(model, hw, wl, parse_method("bf16"), phase="train")


def test_roofline_figure_ridges_and_axes(scenario):
    model, hw, wl = scenario
    points = plots.op_points(model, hw, wl, parse_method("kivi-2"))
    fig = plots.roofline_figure(hw, points, title="t")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    lines = {line.get_gid(): line for line in ax.lines}
    # H100-SXM datasheet: 989.4 TFLOP/s bf16, 1,978.9 fp8, 66.9 fp32 (non-tensor) over 3.35 TB/s
    for dtype, peak in (("bf16", 989.4e12), ("fp8", 1978.9e12), ("fp32", 66.9e12)):
        x, y = lines[f"ridge-{dtype}"].get_data()
        assert x[0] == pytest.approx(peak / 3.35e12, rel=1e-12)
        assert x[0] == pytest.approx(hw.ridge_point(dtype), rel=1e-12)
        assert y[0] == pytest.approx(peak, rel=1e-12)
    assert lines["ridge-bf16"].get_data()[0][0] == pytest.approx(295.343, abs=1e-3)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "FLOP/byte" in ax.get_xlabel() and "FLOP/s" in ax.get_ylabel()
    assert "memory-bound" in ax.get_title()
    assert fig._suptitle.get_text() == "t"
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("bf16 ridge 295") for t in texts) and any("3.35 TB/s" in t for t in texts)
    legend_labels = {t.get_text() for lg in ax.findobj(matplotlib.legend.Legend) for t in lg.get_texts()}
    assert "kivi-2" in legend_labels and "attention" in legend_labels
    scattered = sum(len(c.get_offsets()) for c in ax.collections)
    assert scattered == len(points)


def _bars(fig) -> dict[float, list]:
    ax = fig.axes[0]
    rows = defaultdict(list)
    for patch in ax.patches:
        if (patch.get_gid() or "").startswith("segment-"):
            rows[patch.get_y()].append(patch)
    return rows


def test_memory_bars_sum_to_capacity(the_plan):
    fig = plots.memory_figure(the_plan)
    bars = _bars(fig)
    assert len(bars) == 3
    # what CUDA reports on an H100-SXM (79.18 GiB, the real-decode issue's measurement), not the marketing 80 GiB
    capacity = load_hardware("H100-SXM").driver_memory_bytes
    assert capacity / GIB == pytest.approx(79.18, abs=0.005)
    for (_, patches), result in zip(sorted(bars.items(), reverse=True), the_plan["results"], strict=True):
        patches.sort(key=lambda p: p.get_x())
        for a, b in zip(patches, patches[1:], strict=False):  # stacked end to end from 0
            assert b.get_x() == pytest.approx(a.get_x() + a.get_width())
        assert patches[0].get_x() == 0
        total = sum(p.get_width() for p in patches)
        mem = result["memory"]
        used = (mem["weights_bytes"] + sum(mem["kv_parts_bytes"].values()) + mem["method_params_bytes"]
                + mem["activations_bytes"] + mem["reserve_bytes"])
        if result["fits"]:
            assert total == pytest.approx(capacity / GIB, rel=1e-12)
        else:  # bf16: 64 GiB of KV, the bar runs past the capacity line
            assert result["method"] == "bf16" and used > capacity
            assert total == pytest.approx(used / GIB, rel=1e-12)
    capacity_line = [line for line in fig.axes[0].lines if line.get_gid() == "capacity"]
    assert capacity_line[0].get_xdata()[0] == pytest.approx(79.18, abs=0.005)


def test_memory_segments(the_plan):
    kivi = the_plan["results"][1]
    seg = plots.memory_segments(kivi)
    mem = kivi["memory"]
    assert list(seg) == [k for k, _, _ in plots.SEGMENTS]
    assert sum(seg.values()) == pytest.approx(mem["capacity_bytes"], rel=1e-12)
    assert seg["held_back"] == pytest.approx(mem["capacity_bytes"] - mem["usable_bytes"])
    kv = sum(seg[k] for k in seg if k.startswith("kv_"))
    assert kv == pytest.approx(kivi["kv_bytes"], rel=1e-12)
    assert seg["free"] == pytest.approx(mem["kv_pool_bytes"] - kivi["kv_bytes"], rel=1e-9)


def test_write_plots(scenario, the_plan, tmp_path):
    model, hw, wl = scenario
    out = tmp_path / "new" / "dir"
    paths = plots.write_plots(the_plan, model, hw, wl, ["bf16", parse_method("kivi-2")], out)
    assert sorted(p.name for p in paths) == ["memory.png", "memory.svg", "roofline.png", "roofline.svg"]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths)  # no temporary files left
    umask = os.umask(0)
    os.umask(umask)
    for path in paths:
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() would leave it, not mkstemp's 0600
        data = path.read_bytes()
        assert data
        if path.suffix == ".png":
            assert data.startswith(PNG_MAGIC)
        else:
            assert ET.fromstring(data).tag.endswith("svg")


def test_write_plots_failure_leaves_no_partial_file(scenario, the_plan, tmp_path, monkeypatch):
    model, hw, wl = scenario
    (tmp_path / "roofline.png").write_bytes(b"old")
    save = Figure.savefig

    def fail_on_svg(self, fh, *args, format=None, **kwargs):
        if format == "svg":
            fh.write(b"<svg partial")
            raise RuntimeError("disk full")
        return save(self, fh, *args, format=format, **kwargs)

    monkeypatch.setattr(Figure, "savefig", fail_on_svg)
    with pytest.raises(RuntimeError, match="disk full"):
        plots.write_plots(the_plan, model, hw, wl, ["kivi-2"], tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["roofline.png"]
    assert (tmp_path / "roofline.png").read_bytes() == b"old"


def test_no_pyplot_figures_left_behind(scenario, the_plan):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    model, hw, wl = scenario
    plots.roofline_figure(hw, plots.op_points(model, hw, wl, parse_method("bf16")))
    plots.memory_figure(the_plan)
    assert plt.get_fignums() == before


def test_roofline_figure_without_points():
    hw = load_hardware("H100-SXM")
    ax = plots.roofline_figure(hw, []).axes[0]
    assert {line.get_gid() for line in ax.lines} >= {"bandwidth", "ridge-bf16", "ridge-fp8", "ridge-fp32"}
    assert math.isfinite(ax.get_xlim()[0])
