"""Symbolic ceilings (issue 16): op times read a device only through its named ceilings, so devices of one
structure share their compiled graphs, bound to their own numbers; the numbers equal those of graphs with the
device's numbers baked in (the compile before this change)."""

from __future__ import annotations

import math

import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.ceiling_sources import with_ceilings
from roofline.costmodel import Roofline, RooflineOptions, build_graph, roofline_for
from roofline.methods import parse_method
from roofline.numbers import codegen, codeprint
from roofline.planner import phases, plan_method
from roofline.planner.phases import PhaseModel
from roofline.planner.plan import _PLANNERS
from roofline.specs import Hardware, Workload

LLAMA8, QWEN_MOE = load_model("Llama-3.1-8B"), load_model("Qwen3-30B-A3B")
H100, H200 = load_hardware("H100-SXM"), load_hardware("H200")


def _scaled(hw: Hardware, factor: float = 0.9) -> Hardware:
    """`hw` with every number in its spec and measured section scaled (ints rounded), link group sizes kept: the
    same ceilings present, none of the same numbers."""
    def scale(value, key=None):
        if isinstance(value, dict):
            return {k: scale(v, k) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [scale(v) for v in value]
        if isinstance(value, bool) or key == "max_gpus":
            return value
        if isinstance(value, int):
            return max(1, round(value * factor))
        return value * factor if isinstance(value, float) else value

    return Hardware.model_validate({**scale(hw.model_dump()), "name": hw.name + "-scaled"})


def _printed(roof: Roofline, graph) -> list[str]:
    """The generated source of every op's times (all eight ceilings' expressions) of `graph` on `roof`."""
    from roofline.units import CHUNKS, B, L, P

    out = []
    for op in graph.ops:
        t = roof.op_times(op)
        exprs = [t.compute, t.memory, t.comm, t.total, t.shared, t.l2, t.latency, t.issue]
        out.append(codeprint.sources([B, L, P, CHUNKS], {"f": exprs}, "scalar")["f"])
    return out


def _graphs():
    """Graphs with every op kind: GEMMs, attention (decode and prefill), elementwise, quantized attention with
    integer work, eager aten kernels, MoE, and tensor parallelism's all-reduce."""
    for model, spec, phase, fusion in ((LLAMA8, "bf16", "decode", "typical"), (LLAMA8, "kivi-2", "decode", "none"),
                                       (LLAMA8, "bf16", "prefill", "typical"), (QWEN_MOE, "bf16", "decode", "full")):
        yield build_graph(model, parse_method(spec), phase, tp=2, fusion=fusion)


def _every_ceiling(hw: Hardware) -> Hardware:
    """`hw` with the on-chip ceilings the catalogue lacks (L2 bandwidth, DRAM latency: Little's law) set, so
    every branch of the op times is taken (figures of the order of H100's, for the test only)."""
    data = hw.model_dump()
    data.update(l2_bytes_per_s=1.2e13, dram_latency_s=6e-7,
                sources={**hw.sources, "l2_bytes_per_s": "test figure", "dram_latency_s": "test figure"})
    return Hardware.model_validate(data)


@pytest.mark.parametrize("ceilings", ["measured", "datasheet"])
def test_no_device_number_reaches_a_symbolic_expression(ceilings: str) -> None:
    hw = with_ceilings(_every_ceiling(H100), ceilings)
    other = _scaled(hw)
    first, second = Roofline(hw, tp=2, symbolic=True), Roofline(other, tp=2, symbolic=True)
    assert first.structure() == second.structure()
    assert first.bindings() != second.bindings()
    for graph in _graphs():
        assert _printed(first, graph) == _printed(second, graph)
        # with the numbers baked in, the two devices' sources differ: the scaling reaches the op times
        assert _printed(Roofline(hw, tp=2), graph) != _printed(Roofline(other, tp=2), graph)


def test_structure_names_the_branches_not_the_numbers() -> None:
    measured, datasheet = roofline_for(H100), roofline_for(H100, options=RooflineOptions(use_measured=False))
    assert measured.structure() != datasheet.structure()
    # both calibrated by the same probes; the H200 alone has its GEMMs alone fitted for the hidden latency
    h100, h200 = roofline_for(H100).structure(), roofline_for(H200).structure()
    assert {key for key, _ in set(h100[0]) ^ set(h200[0])} == {"gemm_latency_hidden"} and h100[1:] == h200[1:]
    assert roofline_for(H100, tp=2).structure() != measured.structure()  # the all-reduce's link
    # peaks are checked per graph, not part of the structure: at datasheet ceilings L40S differs from L40 by its
    # INT4 peak alone (L40S carries a derived measured section, L40 an estimate from it)
    sheet = RooflineOptions(use_measured=False)
    assert (roofline_for(load_hardware("L40"), options=sheet).structure()
            == roofline_for(load_hardware("L40S"), options=sheet).structure())


def _plans(hardware, workload, specs, baked: bool, monkeypatch) -> list[dict]:
    """plan_method's dicts for `specs`, compiled afresh (no cache), with numbers baked in or bound."""
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", "off")
    codegen._MEMORY.clear()
    _PLANNERS.clear()
    with monkeypatch.context() as patch:
        if baked:  # the compile before symbolic ceilings: the numeric roofline's expressions
            patch.setattr(Roofline, "as_symbolic", lambda self: self)
        out = [plan_method(LLAMA8 if workload.tp == 1 else load_model("Llama-3.1-70B"), hardware, workload,
                           parse_method(s)).as_dict() for s in specs]
    codegen._MEMORY.clear()
    _PLANNERS.clear()
    return out


def _close(a, b, path="") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and not (math.isnan(a) or math.isinf(a)):
        assert b == pytest.approx(a, rel=1e-9, abs=0), path
    else:
        assert a == b, path


@pytest.mark.parametrize(("hardware", "workload", "specs"), [
    (H200, Workload(batch=16, context_tokens=32_768, fusion="none"), ("bf16", "kivi-2")),
    (with_ceilings(load_hardware("A100-80GB"), "datasheet"), Workload(batch=32, context_tokens=8192, tp=2),
     ("bf16",)),
])
def test_bound_ceilings_plan_as_baked_numbers(hardware, workload, specs, monkeypatch) -> None:
    baked = _plans(hardware, workload, specs, True, monkeypatch)
    bound = _plans(hardware, workload, specs, False, monkeypatch)
    _close(baked, bound)


def test_a_new_device_of_the_same_structure_builds_no_graph(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    codegen._MEMORY.clear()
    w, method = Workload(batch=8, context_tokens=4096), parse_method("kivi-2")
    first = PhaseModel.build(LLAMA8, H100, w, method)
    for phase in ("decode", "decode_mean", "prefill"):
        first.kernel(phase)
    codegen._MEMORY.clear()  # a new process: the disk keeps H100's graphs

    def no_graph(self, phase):
        raise AssertionError(f"{phase}: graph rebuilt for a device of the same structure")

    with monkeypatch.context() as patch:
        patch.setattr(phases.PhaseModel, "graph", no_graph)
        # the H200 less the one figure the H100 was not fitted for (gemm_latency_hidden_ratio): H100's structure
        same = H200.model_copy(update={"measured": H200.measured.model_copy(
            update={"gemm_latency_hidden_ratio": None})})
        second = PhaseModel.build(LLAMA8, same, w, method)
        decode, mean, prefill = (second.decode_time(8, 4096), second.average_decode_time(8, 3072, 1024),
                                 second.prefill_time(8, 3072))
    codegen._MEMORY.clear()
    # the same numbers from H200's own sympy graph, evaluated by the numeric roofline
    from roofline.units import CHUNKS, B, L, P, piecewise_linear_integral

    roof = roofline_for(same)
    assert decode == pytest.approx(float(roof.time(second.graph("decode")).subs({B: 8, L: 4096})), rel=1e-12)
    exact_mean = piecewise_linear_integral(roof.time(second.graph("decode_mean")), L, 3072, 4096, {B: 8}) / 1024
    assert mean == pytest.approx(exact_mean, rel=1e-9)
    chunks = -(-8 * 3072 // 8192)
    assert prefill == pytest.approx(float(roof.time(second.graph("prefill")).subs({B: 8, P: 3072, CHUNKS: chunks})),
                                    rel=1e-12)
    assert decode != pytest.approx(first.decode_time(8, 4096), rel=1e-3)  # H200's numbers, not H100's


def test_bind_gives_each_binding_its_numbers_from_one_build() -> None:
    import sympy as sp

    from roofline.units import B

    builds = []

    def build():
        builds.append(1)
        return [B], {"f": B / sp.Symbol("c_bandwidth", positive=True) + 1}, {}

    key = codegen.content_key("test-bind", 1)
    f2 = codegen.compiled(key, build, bind={"c_bandwidth": 2.0})[0]["f"]
    f4 = codegen.compiled(key, build, bind={"c_bandwidth": 4.0})[0]["f"]
    assert (f2(8), f4(8), len(builds)) == (5.0, 3.0, 1)


def test_a_shared_graph_still_refuses_a_dtype_the_device_lacks(tmp_path, monkeypatch) -> None:
    # H100-PCIe and A10 share a structure (peaks are not part of it), but A10 has no fp8 tensor cores
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    pcie, a10 = load_hardware("H100-PCIe"), load_hardware("A10")
    assert roofline_for(pcie).structure() == roofline_for(a10).structure() and not a10.has_dtype("fp8")
    w, method = Workload(batch=4, context_tokens=2048, compute_dtype="fp8"), parse_method("bf16")
    PhaseModel.build(LLAMA8, pcie, w, method).kernel("decode")
    graph = PhaseModel.build(LLAMA8, a10, w, method).graph("decode")
    gemm = next(op for op in graph.ops if op.kind == "gemm")
    with pytest.raises(ValueError) as built:  # the error of timing the graph on A10 itself
        roofline_for(a10).op_times(gemm)
    with pytest.raises(ValueError) as loaded:
        PhaseModel.build(LLAMA8, a10, w, method).kernel("decode")
    assert str(loaded.value) == str(built.value) and "fp8" in str(built.value)
