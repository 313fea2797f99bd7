"""Hardware spec: dense peaks per dtype, memory, caches, links, and an optional measured section.

Peaks are dense (never 2:4-sparse). Every number set in a catalogue file carries a `sources` entry.
Measured derates live in `measured`, never folded into the peaks.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from roofline.specs import bounds
from roofline.specs.base import Spec

# Compute dtypes -> the field holding their dense peak (int dtypes count operations, not FLOPs).
DTYPES: dict[str, str] = {
    "fp32": "fp32_dense_flops_per_s",
    "tf32": "tf32_dense_flops_per_s",
    "bf16": "bf16_dense_flops_per_s",
    "fp16": "fp16_dense_flops_per_s",
    "fp8": "fp8_dense_flops_per_s",
    "int8": "int8_dense_ops_per_s",
    "fp4": "fp4_dense_flops_per_s",
    "int4": "int4_dense_ops_per_s",
}


class Link(Spec):
    """A GPU's link to its peers (scale-up domain) or to other nodes (scale-out)."""

    BOUNDS: ClassVar = bounds.LINK_FIELDS

    kind: str = Field(description="Link technology, e.g. 'nvlink4', 'pcie5', 'infinity-fabric', 'roce'.")
    bytes_per_s: PositiveFloat = Field(
        description="Bandwidth per GPU per direction, bytes/s (a bidirectional datasheet figure halved)."
    )
    latency_s: PositiveFloat = Field(description="Per-hop latency of one transfer, seconds (the all-to-all of expert "
                                     "parallelism, the pipeline hand-off; the all-reduce takes NCCL's constants).")
    max_gpus: PositiveInt = Field(
        description="Largest group of GPUs this link connects all-to-all (e.g. 8 in an HGX board)."
    )


class Measured(Spec):
    """Ceilings measured by `python -m validate calibrate` on a real device (kind 'measured'), by a user's
    `roofline calibrate` ('calibrated'), or derived from a measured per-op database ('derived':
    roofline.catalogue.derive, from NVIDIA aiconfigurator's tables; the fields that database cannot give are left
    out, so driver / torch / triton / copy / launch are required of measured sections only)."""

    BOUNDS: ClassVar = bounds.MEASURED

    kind: Literal["measured", "calibrated", "derived"] = Field(
        "measured", description="How this section was obtained: measured on the device by this project's "
        "microbenchmarks, calibrated by a user's `roofline calibrate`, or derived from a measured database "
        "(aiconfigurator) with provenance in `source`.")
    device: str = Field(description="Device name as the driver reports it.")
    date: dt.date = Field(description="Date of the measurement (derived: of the database release).")
    driver: str | None = Field(None, description="GPU driver version (required when kind is 'measured').")
    torch: str | None = Field(None, description="torch version used for the measurement (required when kind is "
                              "'measured').")
    triton: str | None = Field(None, description="triton version used for the measurement (required when kind is "
                               "'measured').")
    read_bytes_per_s: PositiveFloat = Field(description="Streaming-read bandwidth at large sizes, bytes/s.")
    copy_bytes_per_s: PositiveFloat | None = Field(
        None, description="Device-to-device copy bandwidth, bytes read plus bytes written per second (required when "
        "kind is 'measured')."
    )
    gemm_flops_per_s: dict[str, PositiveFloat] = Field(
        description="Achieved dense GEMM throughput per dtype on large random matrices, FLOP/s."
    )
    launch_latency_s: PositiveFloat | None = Field(
        None, description="Time of an empty kernel launch, seconds (required when kind is 'measured'; none: the "
        "cost model's latency floor is 0, as with datasheet ceilings).")
    memory_latency_s: PositiveFloat | None = Field(
        None, description="alpha of the streaming-read curve fitted as time = alpha + bytes / stream_bytes_per_s "
        "(relative least squares over every measured size): a kernel's ramp-up and drain, seconds.")
    stream_bytes_per_s: PositiveFloat | None = Field(
        None, description="1/beta of that fit: the bandwidth a streaming kernel sustains across sizes, bytes/s.")
    bandwidth_curve: list[tuple[PositiveInt, PositiveFloat]] = Field(
        default_factory=list,
        description="Streaming-read bandwidth against bytes moved: (bytes, bytes_per_s) pairs.",
    )
    source: str = Field(description="Path of the committed results file the figures come from.")
    # from the decoder clients' microbenchmarks (validate/clients/micro.py, python -m validate.clients.calibrate)
    kernel_overhead_s: PositiveFloat | None = Field(
        None, description="Per-kernel time of dependent small kernels in a CUDA graph (a chain of adds), s.")
    gemm_latency_s: PositiveFloat | None = Field(
        None, description="alpha of time = alpha + weight bytes / gemm_stream_bytes_per_s fitted to the bf16 GEMMs "
        "of the model shapes at M <= 64 tokens (cuBLAS, split-K reduce included), s.")
    gemm_stream_bytes_per_s: PositiveFloat | None = Field(
        None, description="1/beta of that fit: the rate at which skinny GEMMs stream their weights, bytes/s.")
    gemm_latency_hidden_ratio: float | None = Field(
        None, gt=1.0, description="Compute time over the stream law (gemm_latency_s + bytes / gemm_stream_bytes_per_s) "
        "from which a dense GEMM pays none of gemm_latency_s; between 1 and it the share paid falls linearly from 1 to "
        "0 (costmodel.device.gemm_time). Fitted to the GEMMs timed alone (validate/engines/gemm_hidden.py); absent: "
        "every GEMM pays it.")
    gemm_shape_flops_per_s: dict[str, PositiveFloat] = Field(
        default_factory=dict,
        description="Median GEMM throughput per dtype over the model shapes at M >= 2048, FLOP/s.")
    attention_flops_per_s: dict[int, PositiveFloat] = Field(
        default_factory=dict, description="Causal flash attention (SDPA, GQA) throughput per head dim at the longest "
        "prompt measured, FLOP/s.")
    decode_attention_latency_s: PositiveFloat | None = Field(
        None,
        description="alpha of time = alpha + KV bytes / decode_attention_bytes_per_s fitted to one-query SDPA, s.")
    decode_attention_bytes_per_s: PositiveFloat | None = Field(
        None, description="1/beta of that fit: the KV read rate of decode attention, bytes/s.")
    cuda_context_bytes: PositiveInt | None = Field(
        None, description="Device memory the CUDA context takes before the first allocation: total - free right "
        "after CUDA init with nothing allocated (validate/clients/micro.py cuda_context), bytes. The planner's default "
        "runtime reserve counts it in place of its estimate (planner.memory.default_reserve).")
    client_source: str | None = Field(None, description="Results file of the client microbenchmarks above.")
    # from the issue-13 probe (validate/clients/step_costs.py, python -m validate.clients.calibrate --probe)
    sustained_gemm_flops_per_s: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="Steady GEMM throughput per dtype with the tensor cores under back-to-back "
        "load past sustained_after_s (median over the prefill shapes at M >= 2048), FLOP/s: the power-capped rate "
        "compute-bound ops of steady-state phases meet (gemm_shape_flops_per_s is the rate of a burst of ms).")
    sustained_attention_flops_per_s: dict[int, PositiveFloat] = Field(
        default_factory=dict, description="Steady causal flash throughput per head dim under back-to-back load, at the "
        "longest prompt measured, FLOP/s.")
    burst_sm_clock_hz: PositiveFloat | None = Field(
        None, description="SM clock during the GEMM bursts (median over the probe's shapes), Hz.")
    sustained_sm_clock_hz: PositiveFloat | None = Field(
        None, description="SM clock in the steady window of the back-to-back GEMMs, Hz: with burst_sm_clock_hz it "
        "scales the tensor-core rates that have no sustained measurement of their own.")
    sustained_after_s: PositiveFloat | None = Field(
        None, description="Settling time of the tensor-core rate under back-to-back load from idle (the end of the "
        "first 50 ms bin after which every bin stays within 2 % of the steady rate; median over the shapes), s: "
        "compute-bound work running back to back for longer than this is a long phase.")
    aten_kernel_s: PositiveFloat | None = Field(
        None, description="Per-kernel time of eager aten kernels in a CUDA graph, s: the probe's 2000-op chains of "
        "each small op of the eager decode layer (casts, pow/mean, rsqrt, broadcast muls, RoPE neg/cat, index_put, "
        "strided SiLU), weighted by how many of each one layer launches (fusion 'none').")
    fused_kernel_s: PositiveFloat | None = Field(
        None, description="Per-kernel time of Inductor's small fused Triton kernels in a CUDA graph, s: the chains of "
        "validate.clients.probe_fused (RMSNorm, residual add + RMSNorm, RoPE, SiLU x up at decode size), weighted by "
        "how many of each one compiled layer launches (fusion 'full').")
    grouped_gemm_latency_s: PositiveFloat | None = Field(
        None, description="alpha of time = alpha + active experts' weight bytes / grouped_gemm_stream_bytes_per_s "
        "fitted (relative least squares) to the probe's torch._grouped_mm calls of Mixtral-8x7B's w13 and w2 at decode "
        "batches 1 .. 64 (CUTLASS grouped GEMM, its prepare_grouped_gemm_data kernel included), s per call.")
    grouped_gemm_stream_bytes_per_s: PositiveFloat | None = Field(
        None, description="1/beta of that fit: the rate at which a grouped GEMM streams the active experts' weights, "
        "bytes/s (the routed experts op, blocks.moe_mlp, is priced at this law instead of the dense-GEMM one).")
    routing_kernel_s: PositiveFloat | None = Field(
        None, description="Per-kernel time of the routing kernels of a routed MLP in a CUDA graph (topk, sort, "
        "scatter, cumsum, gathers, index_add, their casts and fills), s: the probe's whole moe_mlp less its two "
        "grouped GEMM calls and the router GEMM (at the GEMM law), over the kernels left (median over batches).")
    probe_source: str | None = Field(None, description="Results file of the issue-13 probe the fields above "
                                     "come from.")
    # on-chip ceilings of the hierarchical roofline (validate/ops/ceilings/onchip.py; each None until measured, and
    # the datasheet-derived figure of the Hardware spec stands)
    onchip_source: str | None = Field(
        None, description="Results file of the on-chip microbenchmarks (validate.ops.ceilings.onchip) the "
        "shared-memory, integer and FP32 rates come from.")
    shared_memory_bytes_per_s: PositiveFloat | None = Field(
        None, description="Shared-memory read bandwidth of the whole device, bytes/s: ld.shared of conflict-free "
        "128-byte wavefronts by every SM at once (ceilings microbenchmark 'smem_read').")
    l2_bytes_per_s: PositiveFloat | None = Field(
        None, description="L2 read bandwidth, bytes/s: streaming reads of a buffer that fits in L2, after a warm-up "
        "pass (ceilings microbenchmark 'l2_read').")
    int32_ops_per_s: PositiveFloat | None = Field(
        None, description="Vector integer issue rate, ops/s: dependent-free chains of lop3/prmt/shift per thread "
        "(ceilings microbenchmark 'int_issue').")
    fp32_flops_per_s: PositiveFloat | None = Field(
        None, description="Vector FP32 FMA rate, FLOP/s (ceilings microbenchmark 'fma_issue').")
    bytes_in_flight_per_sm: PositiveFloat | None = Field(
        None, description="Bytes of DRAM reads one SM keeps in flight at most, bytes: bandwidth x latency / SMs at "
        "the knee of a sweep of outstanding cp.async bytes per SM (ceilings microbenchmark 'inflight').")
    dram_latency_s: PositiveFloat | None = Field(
        None, description="Unloaded DRAM load latency, s: a dependent pointer chase over a buffer past L2 "
        "(ceilings microbenchmark 'pointer_chase').")
    allreduce_curve_s: dict[int, list[tuple[PositiveInt, PositiveFloat]]] = Field(
        default_factory=dict, description="NCCL all-reduce time against message size, per GPU count: {gpus: "
        "[(message bytes, s), ...]} (derived sections: aiconfigurator's comm/nccl table, fp16).")
    estimate: str | None = Field(
        None, description="Set when this section was not measured on the device but carried over from measured "
        "devices of the same architecture and memory technology (catalogue.ceiling_sources): from which, and the "
        "spread of their fractions of datasheet.")

    @model_validator(mode="after")
    def _dtypes_known(self) -> Measured:
        if self.kind == "measured":
            missing = [n for n in ("driver", "torch", "triton", "copy_bytes_per_s", "launch_latency_s")
                       if getattr(self, n) is None]
            if missing:
                raise ValueError(f"{', '.join(missing)}: required when kind is 'measured' (a derived section says "
                                 "kind: derived)")
        for field_name in ("gemm_flops_per_s", "sustained_gemm_flops_per_s"):
            for dtype in getattr(self, field_name):
                if dtype not in DTYPES:
                    raise ValueError(f"{field_name}: unknown dtype {dtype!r}; valid: {sorted(DTYPES)}")
        bounds.check({f"gemm_flops_per_s.{k}": v for k, v in self.gemm_flops_per_s.items()},
                     {f"gemm_flops_per_s.{k}": bounds.PEAK for k in self.gemm_flops_per_s})
        for size, rate in self.bandwidth_curve:
            if size > 1e13 or rate > bounds.BANDWIDTH.hard_hi:
                raise ValueError(f"bandwidth_curve: ({size}, {rate:g}) is outside 1 .. 1e13 bytes at "
                                 f"most {bounds.BANDWIDTH.hard_hi:g} bytes/s")
        return self


class Hardware(Spec):
    """One accelerator (per GPU, even when sold in a multi-GPU package)."""

    BOUNDS: ClassVar = bounds.HARDWARE

    name: str = Field(description="Catalogue name, e.g. 'H100-SXM'.")
    vendor: Literal["nvidia", "amd", "intel"] = Field(description="Vendor.")
    description: str = Field(description="SKU, form factor and memory type in words.")
    memory_bytes: PositiveInt = Field(description="Device memory capacity, bytes (decimal datasheet GB).")
    driver_memory_bytes: PositiveInt | None = Field(
        None, description="Device memory as CUDA reports it (cudaGetDeviceProperties totalGlobalMem), bytes: what a "
        "program can allocate from, below the marketing figure.")
    memory_bytes_per_s: PositiveFloat = Field(description="Peak device-memory bandwidth, bytes/s.")
    memory_type: str | None = Field(
        None, description="Memory technology as the datasheet names it, e.g. 'HBM3', 'HBM3e', 'GDDR6': devices of "
        "one architecture and memory generation (HBM3 and HBM3e alike) share achievable fractions of datasheet.")
    architecture: str | None = Field(
        None, description="GPU architecture (lower case), e.g. 'hopper', 'ampere', 'blackwell', 'cdna3'.")
    l2_cache_bytes: PositiveInt = Field(description="Last-level on-chip cache, bytes.")
    sm_count: PositiveInt = Field(description="Streaming multiprocessors (NVIDIA) or compute units (AMD, Intel).")
    fp32_dense_flops_per_s: PositiveFloat = Field(description="Dense FP32 (non-tensor) peak, FLOP/s.")
    tf32_dense_flops_per_s: PositiveFloat | None = Field(None, description="Dense TF32 matrix peak, FLOP/s.")
    bf16_dense_flops_per_s: PositiveFloat = Field(description="Dense BF16 matrix peak, FLOP/s.")
    fp16_dense_flops_per_s: PositiveFloat = Field(description="Dense FP16 matrix peak, FLOP/s.")
    fp8_dense_flops_per_s: PositiveFloat | None = Field(None, description="Dense FP8 matrix peak, FLOP/s.")
    int8_dense_ops_per_s: PositiveFloat | None = Field(None, description="Dense INT8 matrix peak, OP/s.")
    fp4_dense_flops_per_s: PositiveFloat | None = Field(None, description="Dense FP4 matrix peak, FLOP/s.")
    int4_dense_ops_per_s: PositiveFloat | None = Field(None, description="Dense INT4 matrix peak, OP/s.")
    int32_vector_ops_per_s: PositiveFloat | None = Field(
        None, description="Vector (non-tensor) INT32 instruction throughput, ops/s: unpacking and converting "
        "quantized codes; None: half the FP32 FLOP/s (one int op per FP32 lane-cycle).")
    sm_clock_hz: PositiveFloat | None = Field(
        None, description="SM (boost) clock, Hz: turns per-clock datasheet figures into rates.")
    shared_memory_bytes_per_clock_per_sm: PositiveInt | None = Field(
        None, description="Shared-memory (L1) bandwidth of one SM, bytes per clock: 32 banks x 4 B = 128 on NVIDIA "
        "Volta .. Hopper; the shared-memory ceiling is this x SMs x sm_clock_hz.")
    shared_memory_bytes_per_sm: PositiveInt | None = Field(
        None, description="Largest shared memory one SM gives its blocks, bytes: asynchronous copies (cp.async, TMA) "
        "land there, so it bounds the DRAM bytes an SM keeps in flight (Little's law).")
    l2_bytes_per_s: PositiveFloat | None = Field(None, description="L2 read bandwidth, bytes/s (every DRAM byte "
                                                 "passes L2); None: no L2 ceiling.")
    dram_latency_s: PositiveFloat | None = Field(
        None, description="Unloaded DRAM load latency, s (Little's law: bandwidth <= SMs x bytes in flight / latency).")
    scale_up: Link | None = Field(None, description="Link to peer GPUs in one node; None for none.")
    scale_out: Link | None = Field(None, description="Link to other nodes (per GPU); None if not specified.")
    tdp_watts: PositiveFloat = Field(description="Board power (TDP / TBP), watts.")
    sources: dict[str, str] = Field(
        description="Provenance: for every number set above, the field name -> URL or document and a note."
    )
    measured: Measured | None = Field(None, description="Measured ceilings from validate/, if calibrated.")

    @model_validator(mode="after")
    def _every_number_sourced(self) -> Hardware:
        numeric = [
            name
            for name in type(self).model_fields
            if name not in {"name", "vendor", "description", "sources", "measured"}
            and getattr(self, name) is not None
        ]
        missing = [name for name in numeric if not self.sources.get(name, "").strip()]
        if missing:
            raise ValueError(f"sources: no source for {', '.join(missing)} (every number needs one)")
        unknown = sorted(set(self.sources) - set(type(self).model_fields))
        if unknown:
            raise ValueError(f"sources: keys {unknown} are not fields of Hardware")
        if self.fp16_dense_flops_per_s < self.fp32_dense_flops_per_s:
            raise ValueError("fp16_dense_flops_per_s: must be at least fp32_dense_flops_per_s")
        return self

    def peak_flops_per_s(self, dtype: str) -> float:
        """Dense peak for a compute dtype; raises if the dtype is unknown or the device lacks it."""
        if dtype not in DTYPES:
            raise ValueError(f"dtype: unknown {dtype!r}; valid: {sorted(DTYPES)}")
        value = getattr(self, DTYPES[dtype])
        if value is None:
            raise ValueError(f"dtype: {self.name} has no dense {dtype} peak in its spec")
        return float(value)

    def int_ops_per_s(self) -> float:
        """Rate of the integer unpack/convert work of dequantization (see int32_vector_ops_per_s)."""
        return float(self.int32_vector_ops_per_s or self.fp32_dense_flops_per_s / 2)

    def shared_memory_bytes_per_s_total(self) -> float | None:
        """Datasheet shared-memory bandwidth of the device, bytes/s: B/clock/SM x SMs x clock (None if unknown)."""
        if self.shared_memory_bytes_per_clock_per_sm is None or self.sm_clock_hz is None:
            return None
        return float(self.shared_memory_bytes_per_clock_per_sm * self.sm_count * self.sm_clock_hz)

    def has_dtype(self, dtype: str) -> bool:
        return dtype in DTYPES and getattr(self, DTYPES[dtype]) is not None

    def ridge_point(self, dtype: str) -> float:
        """Arithmetic intensity (FLOP/byte) where the dtype's peak meets memory bandwidth."""
        return self.peak_flops_per_s(dtype) / self.memory_bytes_per_s
