"""A device's named ceilings: every number a Roofline puts into an op's time, in one flat dict.

`ceilings(hardware, options, tp)` is the one place the cost model reads a device (Roofline._op_times reads only
its dict), so the op times are functions of these names and the workload symbols alone. In the symbolic mode
(Roofline(symbolic=True)) each non-zero ceiling becomes a sympy Symbol `c_<key>` (`symbol_name`), while every
branch of the cost model (is a ceiling present, zero, None; which ceiling an op kind meets) is decided on the
numbers and summed up by `structure`: two devices of one structure give the same expressions, so their compiled
graphs are one (roofline.numbers.codegen keys them by the structure; the numbers are bound when a graph is loaded).

Keys (None: the device lacks the ceiling; a key per dtype or head dim is present only where the spec has one):
    bandwidth            bytes/s: the fitted streaming bandwidth when calibrated, else measured read, else datasheet
    memory_latency       s: alpha of that fit (0 uncalibrated)
    peak:<dtype>         matmul FLOP/s: measured large-GEMM rate, else the datasheet peak
    vector_peak          FP32 vector FLOP/s;  int_rate: vector integer ops/s
    smem_bw, l2_bw       shared-memory and L2 bandwidth, bytes/s
    dram_latency, inflight_per_sm, sm_count     Little's law (latency s, bytes in flight per SM, SMs)
    latency_floor        s: measured launch latency (0 uncalibrated)
    kernel_overhead      s: measured per-kernel time of a CUDA graph chain (None: the single-kernel law)
    kernel_time          s: per-kernel time (kernel_overhead, else memory_latency, else 0)
    gemm_shape:<dtype>, gemm_stream_bw, gemm_latency          the GEMM laws at the model shapes
    gemm_latency_hidden                       compute / stream ratio from which a GEMM's latency is hidden (gemm_time)
    attn_decode_bw, attn_decode_latency, attn_flops:<head dim> attention kernels' laws
    sustained_gemm:<dtype>, sustained_attn:<head dim>, clock_ratio (min(1, sustained / burst SM clock))
    aten_kernel_time     s: per-kernel time of eager aten kernels; fused_kernel_time: of Inductor's fused kernels
    grouped_gemm_bw, grouped_gemm_latency, routing_kernel    the routed experts' grouped-GEMM law, routing kernels
    moe_block_m:<M>      an engine's tuned fused-MoE config: BLOCK_SIZE_M at key M (the rows' padding; part of the
                         structure by value, since it sets the Piecewise's thresholds and values)
    attn_prefill_latency, attn_prefill_row    an engine's prefill attention call: s a call, s a (query, head) row
    copy_latency, copy_bw                     an engine's strided activation copy (attention.q_copy)
    norm_kernel                               an engine's RMSNorm kernel a call in its step (fusion.NORMS ops)
    one_row_epilogue                          1 where an engine's mat-vec takes the residual adds and the GLU at one
                                              row (device.EPILOGUE_OPS)
    link_bw              bytes/s: bus bandwidth of the link tensor parallelism's all-reduce meets (tp > 1:
                         scale-up when the group fits)
    allreduce_latency:<p>   s: NCCL's ring all-reduce latency over tp GPUs per protocol p (LL, LL128, Simple) on
                         that link's hardware class (costmodel.collectives.ring_latencies)
    allreduce_ll_max_bw  bytes/s: NCCL's cap on LL's bus bandwidth inside a node (None: no cap)
    scale_up_bw, scale_up_latency, scale_up_max_gpus, scale_out_bw, scale_out_latency   both links, for the
                         all-to-all of expert parallelism (its tp x ep GPUs choose one: scale_up_max_gpus is
                         part of the structure by value, since it decides that branch)
"""

from __future__ import annotations

import re
from functools import cache

from roofline.costmodel.collectives import PROTOCOLS, ll_max_bw, nccl_hw, ring_latencies
from roofline.specs import Hardware
from roofline.specs.hardware import DTYPES

Ceilings = dict[str, float | None]


def _first(*values):
    """The first truthy value (None when none is)."""
    return next((v for v in values if v), None)


def _measured(hardware: Hardware, options) -> Ceilings:
    """The keys only a measured section fills (None, or absent per dtype / head dim, without one)."""
    m = hardware.measured if options.use_measured else None
    if m is None:
        names = ("gemm_stream_bw", "gemm_latency", "attn_decode_bw", "attn_decode_latency", "clock_ratio",
                 "aten_kernel_time", "fused_kernel_time", "kernel_overhead", "grouped_gemm_bw", "grouped_gemm_latency",
                 "routing_kernel", "gemm_latency_hidden")
        return dict.fromkeys(names)
    c: Ceilings = {
        "gemm_stream_bw": m.gemm_stream_bytes_per_s, "gemm_latency": m.gemm_latency_s,
        "attn_decode_bw": m.decode_attention_bytes_per_s, "attn_decode_latency": m.decode_attention_latency_s,
        "clock_ratio": (min(1.0, m.sustained_sm_clock_hz / m.burst_sm_clock_hz)
                        if m.burst_sm_clock_hz and m.sustained_sm_clock_hz else None),
        "aten_kernel_time": m.aten_kernel_s, "fused_kernel_time": m.fused_kernel_s,
        "kernel_overhead": m.kernel_overhead_s,
        "grouped_gemm_bw": m.grouped_gemm_stream_bytes_per_s, "grouped_gemm_latency": m.grouped_gemm_latency_s,
        "routing_kernel": m.routing_kernel_s, "gemm_latency_hidden": m.gemm_latency_hidden_ratio,
    }
    c.update({f"gemm_shape:{d}": v for d, v in m.gemm_shape_flops_per_s.items()})
    c.update({f"attn_flops:{h}": v for h, v in m.attention_flops_per_s.items()})
    c.update({f"sustained_gemm:{d}": v for d, v in m.sustained_gemm_flops_per_s.items()})
    c.update({f"sustained_attn:{h}": v for h, v in m.sustained_attention_flops_per_s.items()})
    return c


def _allreduce(hw: Hardware, link, tp: int) -> Ceilings:
    """NCCL's ring all-reduce constants for `tp` GPUs on `link` (None: no link): per-protocol latencies and the
    LL bandwidth cap (costmodel.collectives)."""
    if link is None:
        return {f"allreduce_latency:{p}": None for p in PROTOCOLS} | {"allreduce_ll_max_bw": None}
    kind = nccl_hw(link.kind, scale_out=link is not hw.scale_up)
    lat = ring_latencies(kind, tp)
    return {f"allreduce_latency:{p}": lat[p] for p in PROTOCOLS} | {"allreduce_ll_max_bw": ll_max_bw(
        hw.architecture, kind)}


def ceilings(hardware: Hardware, options, tp: int) -> Ceilings:
    """The named ceilings of `hardware` under `options` (RooflineOptions: use_measured) with `tp` GPUs (see the
    module docstring for the keys); link_bw None with tp > 1: no link spans the group (an all-reduce raises)."""
    hw = hardware
    m = hw.measured if options.use_measured else None
    c: Ceilings = {
        "bandwidth": hw.memory_bytes_per_s if m is None else (m.stream_bytes_per_s or m.read_bytes_per_s),
        "memory_latency": (m.memory_latency_s or 0.0) if m is not None else 0.0,
        "vector_peak": _first(m and m.fp32_flops_per_s, hw.fp32_dense_flops_per_s),
        "int_rate": _first(m and m.int32_ops_per_s, hw.int_ops_per_s()),
        "smem_bw": _first(m and m.shared_memory_bytes_per_s, hw.shared_memory_bytes_per_s_total()),
        "l2_bw": _first(m and m.l2_bytes_per_s, hw.l2_bytes_per_s),
        "dram_latency": _first(m and m.dram_latency_s, hw.dram_latency_s),
        "sm_count": hw.sm_count,
        "latency_floor": (m.launch_latency_s or 0.0) if m is not None else 0.0,
        "kernel_time": (m.kernel_overhead_s or m.memory_latency_s or 0.0) if m is not None else 0.0,
    }
    inflight = _first(m and m.bytes_in_flight_per_sm, hw.shared_memory_bytes_per_sm)
    c["inflight_per_sm"] = float(inflight) if inflight else None
    for dtype in DTYPES:
        if m is not None and dtype in m.gemm_flops_per_s:
            c[f"peak:{dtype}"] = m.gemm_flops_per_s[dtype]
        elif hw.has_dtype(dtype):
            c[f"peak:{dtype}"] = hw.peak_flops_per_s(dtype)
    c.update(_measured(hw, options))
    if m is not None:  # an engine's kernels measured on this device (RooflineOptions.kernels) replace its laws
        c.update(dict(getattr(options, "kernels", ())))
    link = None
    if tp > 1:
        link = hw.scale_up if hw.scale_up is not None and tp <= hw.scale_up.max_gpus else hw.scale_out
    c["link_bw"] = link.bytes_per_s if link is not None else None
    c.update(_allreduce(hw, link, tp))
    for name, lk in (("scale_up", hw.scale_up), ("scale_out", hw.scale_out)):
        c[f"{name}_bw"], c[f"{name}_latency"] = (lk.bytes_per_s, lk.latency_s) if lk is not None else (None, None)
    c["scale_up_max_gpus"] = hw.scale_up.max_gpus if hw.scale_up is not None else None
    return c


def flag(value: float | None) -> str:
    """'none', 'zero' or 'value': all the cost model's branches ask of a ceiling."""
    return "none" if value is None else "zero" if value == 0 else "value"


def structure(values: Ceilings, options, tp: int) -> tuple:
    """What the symbolic op times depend on besides the workload: each key with its flag, the options and tp.
    The matmul peaks (peak:<dtype>) are left out: whether a device has one decides only whether an op of that
    dtype can be timed at all (else an error), never the shape of an expression, so a graph's loader checks its
    ops' dtypes against the device instead (costmodel.compiled.graph_kernel)."""
    return (tuple(sorted((key, flag(v)) for key, v in values.items() if not key.startswith("peak:"))),
            values.get("scale_up_max_gpus"), tuple(sorted((k, v) for k, v in values.items()
                                                          if k.startswith("moe_block_m:"))), repr(options), tp)


@cache
def symbol_name(key: str) -> str:
    """The Python identifier of a ceiling in symbolic expressions and generated code: c_<key>, ':' -> '_'."""
    return "c_" + re.sub(r"[^0-9A-Za-z_]", "_", key)


def bindings(values: Ceilings) -> dict[str, float]:
    """The symbolic names and numbers of the non-zero ceilings (what a compiled graph is bound to)."""
    return {symbol_name(k): float(v) for k, v in values.items() if v}
