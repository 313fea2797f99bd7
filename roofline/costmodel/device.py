"""Roofline times of ops on a device: compute and memory times kept apart until the overlap rule; a hierarchical
roofline where the spec has on-chip ceilings (shared memory, L2, bytes in flight).

For an op with matmul FLOPs F_m (at its dtype), vector FLOPs F_v and bytes M:
    t_compute = F_m / (peak_dtype * e_gemm) + F_v / peak_fp32 + I / int_rate   (I: dequant int ops)
    t_memory  = M / bandwidth
    t         = max(t_compute, t_memory)          (overlap "max": compute hides under memory or vice versa)
              = t_compute + t_memory              (overlap "sum": no overlap)
    t        += kernels x t_kernel                (each kernel the op launches, by the graph's fusion level)
A spec whose measured section has no per-kernel time (kernel_overhead_s: a kernel family's own results) keeps
the single-kernel law t_memory = alpha + M / bandwidth, t = max(t, launch latency).
e_gemm (measured GEMM rate over peak), the bandwidth and t_kernel come from the hardware's measured section
when it has one (and `use_measured`): the bandwidth is the fit time = alpha + bytes / bandwidth of the
streaming-read microbenchmark over every size measured (a latency-bandwidth law, one per device, no
per-kernel fitting); t_kernel the per-kernel time of a CUDA graph of dependent small kernels (else that
fit's alpha, the same constant). Without it: peak, datasheet bandwidth, t_kernel = 0 — the pure datasheet
roofline.
On-chip ceilings (`_on_chip`), each applied where the spec has it, and t = max(t, t_shared, t_l2, t_latency):
    t_shared  = shared bytes / (B/clock/SM x SMs x clock)   shared bytes: the op's staged operands and metadata
    t_l2      = L2 bytes / L2 bandwidth                                    loads (kv.quant.metadata_loads);
                L2 bytes: the op's re-read tiles where it has them (op.l2_bytes), else its DRAM bytes
    t_latency = bytes x DRAM latency / (min(SMs, programs) x bytes in flight per SM)
The plan names the binding ceiling (binding_ceiling): memory, compute, issue, shared-memory, l2, latency.
All-reduce ops (tensor parallelism) take NCCL's tuner model (costmodel.collectives.allreduce_time): the smallest
over its protocols p (LL, LL128, Simple) of latency_p(n) + 2(n-1)/n * bytes / (link bus bandwidth x factor_p);
all-to-all ops (expert parallelism) take costmodel.collectives.alltoall_time on the link their tp x ep GPUs meet.
Every number above is read from one flat dict of named ceilings (costmodel.device_ceilings), never from the spec
directly; Roofline(symbolic=True) puts those ceilings into the times as symbols, so compiled graphs are shared by
the devices of one structure and bound to each one's numbers (costmodel.compiled).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Literal

from roofline.costmodel import device_ceilings as ceil
from roofline.costmodel.blocks import block_m, padded_rows
from roofline.costmodel.collectives import PROTOCOLS, allreduce_time, alltoall_time
from roofline.costmodel.fusion import NORMS
from roofline.costmodel.graph import Graph
from roofline.costmodel.ops import COPY, EXPERTS, ROUTING, TRAFFIC, Op
from roofline.costmodel.optimes import CEILING_FIELDS, OpTimes, binding_ceiling
from roofline.ggml_types import MMVQ_MAX_COLUMNS, law_type
from roofline.lazy import sp
from roofline.specs import Hardware, Link
from roofline.units import lambdify

# an engine whose mat-vec kernel takes these ops into its epilogue at one row (kernel ceiling one_row_epilogue:
# ggml-cuda's ggml_cuda_should_fuse_mul_mat adds the residual in o_proj's and down's mat-vec and runs gate, up and
# the GLU as one call): at one row they launch nothing and the gate / up projection is one call
EPILOGUE_OPS = frozenset({"attn_residual", "mlp_residual", "mlp_act"})
EPILOGUE_GEMM = "mlp_up"
# the op names that pick an op's ceilings (_ceilings_of, _calls): a serving step's aggregated ops keep these names
# (serving.stepmodel), every other op's name says nothing of its laws
LAW_NAMES = frozenset({EXPERTS, "kv_update", *NORMS, *EPILOGUE_OPS, EPILOGUE_GEMM})

MEMO_ENTRIES = 20_000  # op times and compiled graphs kept per device (the long-running app must not grow)


@dataclass(frozen=True)
class RooflineOptions:
    overlap: Literal["max", "sum"] = "max"
    use_measured: bool = True
    # an engine's own kernels on this device (roofline.engines.timing): ceilings keys replaced by their measured
    # laws; left out of repr, so the structure (and the compile cache) changes only where a key's flag does
    kernels: tuple[tuple[str, float | None], ...] = field(default=(), repr=False)


@dataclass
class Roofline:
    """A device's ceilings, and the times of ops and graphs on it. Every number it puts into an op's time comes
    from `ceilings` (roofline.costmodel.device_ceilings); `symbolic`: the non-zero ceilings enter the times as symbols
    (c_<key>) instead of numbers, the branches still decided on the numbers (`structure` sums them up)."""

    hardware: Hardware
    options: RooflineOptions = field(default_factory=RooflineOptions)
    tp: int = 1
    symbolic: bool = False
    _memo: OrderedDict = field(default_factory=OrderedDict, repr=False, compare=False)

    @cached_property
    def ceilings(self) -> ceil.Ceilings:
        """The device's named ceilings under the options and tp (ceilings.ceilings): all _op_times reads."""
        return ceil.ceilings(self.hardware, self.options, self.tp)

    @cached_property
    def _values(self) -> dict:
        """What the op times use for each ceiling: its number, or (symbolic) its symbol when non-zero."""
        if not self.symbolic:
            return dict(self.ceilings)
        return {k: sp.Symbol(ceil.symbol_name(k), positive=True) if v else v for k, v in self.ceilings.items()}

    def structure(self) -> tuple:
        """What the symbolic times depend on besides the workload (ceilings.structure): devices of one structure
        share compiled graphs, bound to their own numbers (`bindings`)."""
        return self._structure

    def bindings(self) -> dict[str, float]:
        """The symbolic ceilings' names and this device's numbers."""
        return self._bindings

    @cached_property
    def _structure(self) -> tuple:
        return ceil.structure(self.ceilings, self.options, self.tp)

    @cached_property
    def _bindings(self) -> dict[str, float]:
        return ceil.bindings(self.ceilings)

    @cached_property
    def _twin(self) -> Roofline:
        return Roofline(self.hardware, self.options, self.tp, symbolic=True)

    def as_symbolic(self) -> Roofline:
        """This device with symbolic ceilings (its own memo of op times)."""
        return self if self.symbolic else self._twin

    @property
    def measured(self):
        return self.hardware.measured if self.options.use_measured else None

    def bandwidth(self) -> float:
        """Effective memory bandwidth, bytes/s: the fitted streaming bandwidth when calibrated (else the
        measured large-size read, else the datasheet)."""
        return self.ceilings["bandwidth"]

    def memory_latency(self) -> float:
        """alpha of the measured latency-bandwidth law (0 when not calibrated)."""
        return self.ceilings["memory_latency"]

    def matmul_peak(self, dtype: str) -> float:
        """Matmul FLOP/s of `dtype`: measured large-GEMM rate, else the datasheet peak (raises if it has none)."""
        value = self.ceilings.get(f"peak:{dtype}")
        return value if value is not None else self.hardware.peak_flops_per_s(dtype)

    def vector_peak(self) -> float:
        """FP32 vector FLOP/s: measured (FMA issue microbenchmark) when calibrated, else the datasheet."""
        return self.ceilings["vector_peak"]

    def int_rate(self) -> float:
        """Vector integer ops/s: measured when calibrated, else the spec's INT32 rate (Hardware.int_ops_per_s)."""
        return self.ceilings["int_rate"]

    def shared_bandwidth(self) -> float | None:
        """Shared-memory bandwidth of the device, bytes/s: measured, else B/clock/SM x SMs x clock; None: unknown."""
        return self.ceilings["smem_bw"]

    def l2_bandwidth(self) -> float | None:
        """L2 bandwidth, bytes/s: measured, else the spec's; None: no L2 ceiling."""
        return self.ceilings["l2_bw"]

    def little(self) -> tuple[float, float] | None:
        """(DRAM latency s, bytes in flight per SM) for Little's law: measured, else the spec's latency and its
        shared memory per SM (asynchronous copies land there); None when either is unknown."""
        latency, inflight = self.ceilings["dram_latency"], self.ceilings["inflight_per_sm"]
        return (latency, inflight) if latency and inflight else None

    def latency_floor(self) -> float:
        """Measured launch latency, s (0 uncalibrated): the floor of a single-kernel op."""
        return self.ceilings["latency_floor"]

    def kernel_time(self) -> float:
        """Per-kernel time of a kernel in a CUDA graph of dependent kernels (launch, ramp-up, drain), s:
        the measured chain of small kernels when calibrated, else alpha of the streaming fit (the same
        constant, read off single streaming kernels in a graph); 0 for the datasheet roofline."""
        return self.ceilings["kernel_time"]

    def _peak_key(self, dtype: str) -> str:
        key = f"peak:{dtype}"
        if key not in self.ceilings:
            self.hardware.peak_flops_per_s(dtype)  # raises: unknown dtype, or the device has no such peak
        return key

    def _ceilings_of(self, op: Op) -> tuple[str, str, str]:
        """Keys of the (matmul FLOP/s, bytes/s, per-kernel s) that bound `op`: a GEMM meets the GEMM laws measured
        at the model shapes (weights streamed at M <= 64, FLOP/s at M >= 2048), the routed experts (blocks.moe_mlp)
        the grouped-GEMM law (active experts' weights at grouped_gemm_bw, grouped_gemm_latency per call; FLOP/s as
        a GEMM: the grouped rate is not measured), routing kernels routing_kernel, attention its own kernels'
        ceilings (decode: KV bytes at the one-query latency-bandwidth law; prefill: the causal flash rate of its
        head dim), the KV write an engine's measured law (kv_write_latency, kv_write_bw), every other op the
        streaming bandwidth and the graph's per-kernel time. Uncalibrated devices have none of the kernels' laws
        (None), so every op meets peak, bandwidth and kernel_time."""
        c, peak = self.ceilings, self._peak_key(op.dtype)
        if op.name == EXPERTS and op.kind == "gemm" and c["grouped_gemm_bw"]:  # grouped-GEMM law
            shape = "grouped_gemm_flops" if self._grouped_rate(op) else f"gemm_shape:{op.dtype}"
            return (shape if shape in c else peak, "grouped_gemm_bw",
                    "grouped_gemm_latency" if c["grouped_gemm_latency"] else "kernel_time")
        if self._grouped_rate(op):  # the fused MoE's FLOP/s measured, its streaming law not: a GEMM's stream law
            return ("grouped_gemm_flops", "gemm_stream_bw" if c["gemm_stream_bw"] else "bandwidth",
                    "gemm_latency" if c["gemm_stream_bw"] and c["gemm_latency"] else "kernel_time")
        if op.kind == ROUTING and c["routing_kernel"]:
            return peak, "bandwidth", "routing_kernel"
        if op.kind == "gemm" and c["gemm_stream_bw"]:
            shape = f"gemm_shape:{op.dtype}"
            return (shape if shape in c else peak, "gemm_stream_bw",
                    "gemm_latency" if c["gemm_latency"] else "kernel_time")
        if op.name == "kv_update" and c.get("kv_write_latency"):  # an engine's own KV write (engines.timing)
            return peak, "kv_write_bw" if c.get("kv_write_bw") else "bandwidth", "kv_write_latency"
        if op.kind == "attention" and "kv_read" in op.traffic and c["attn_decode_bw"]:
            return peak, "attn_decode_bw", "attn_decode_latency" if c["attn_decode_latency"] else "kernel_time"
        if op.kind == "attention" and "kv_read" not in op.traffic and f"attn_flops:{op.head_dim}" in c:
            return (f"attn_flops:{op.head_dim}", "bandwidth",
                    "attn_prefill_latency" if c.get("attn_prefill_latency") else "kernel_time")
        if op.kind == COPY and c.get("copy_bw"):  # an engine's strided copy (engines.timing 14.)
            return peak, "copy_bw", "copy_latency" if c.get("copy_latency") else "kernel_time"
        if op.name in NORMS and c.get("norm_kernel"):  # an engine's RMSNorm kernel as its step runs it (17.)
            return peak, "bandwidth", "norm_kernel"
        return peak, "bandwidth", "kernel_time"

    def _padding(self, op: Op):
        """Rows the routed experts' GEMMs run over the rows routed, where an engine's tuned fused-MoE configs are
        known on this device (ceilings moe_block_m:<M>, engines.timing 14.): each expert's rows padded to the tile
        height of the config at the call's tokens (blocks.block_m, blocks.padded_rows); 1 elsewhere."""
        table = {int(k.split(":")[1]): int(v) for k, v in self.ceilings.items() if k.startswith("moe_block_m:") and v}
        if not table or not op.grouped:
            return 1
        tokens, rows, experts = op.grouped
        return padded_rows(rows, experts, block_m(tokens, table)) / rows

    def _grouped_rate(self, op: Op) -> bool:
        """The routed experts of a 16-bit MMA meet the engine's fused-MoE FLOP/s where one was measured on this
        device (RooflineOptions.kernels 'grouped_gemm_flops': roofline.engines.timing), not the dense GEMM's."""
        return op.name == EXPERTS and op.dtype in ("bf16", "fp16") and bool(self.ceilings.get("grouped_gemm_flops"))

    def steady_state(self, op: Op, rate, per_kernel):
        """(tensor-core FLOP/s, per-kernel s) of `op` in the planner's steady state, from _ceilings_of's burst figures
        (numbers or, symbolic, expressions in the ceilings):
        - a GEMM or prefill attention takes the sustained rate (measured sustained_gemm_flops_per_s per dtype,
          sustained_attention_flops_per_s per head dim; else its burst rate x sustained / burst SM clock when both
          clocks are measured). The mechanism: under back-to-back tensor-core load the board reaches its power limit
          and the SM clock settles lower within sustained_after_s (tens of ms); a phase is long when the device runs
          it back to back for longer than that, and the planner's phases are steady-state serving (steps back to
          back, as are the clients' 30-replay medians), so every such op is in one. Only the compute term changes:
          a memory-bound op (decode GEMMs at the streaming law) keeps its time.
        - an eager aten kernel (op.aten, fusion 'none') costs the measured aten_kernel_s, and a fused Triton kernel
          of torch.compile (op.fused, fusion 'full') the measured fused_kernel_s, instead of the chain of minimal
          adds (validate.clients.step_costs h2, probe_fused: 1.3-3.2 us against ~1 us).
        Absent fields leave the burst figures as they are."""
        c, v = self.ceilings, self._values
        if op.aten and c["aten_kernel_time"]:
            per_kernel = v["aten_kernel_time"]
        if op.fused and c["fused_kernel_time"]:
            per_kernel = v["fused_kernel_time"]
        if self._grouped_rate(op):  # a burst-measured kernel rate: the clock ratio only
            rate = rate * v["clock_ratio"] if c["clock_ratio"] else rate
        elif op.kind == "gemm" or (op.kind == "attention" and "kv_read" not in op.traffic):
            sustained = f"sustained_gemm:{op.dtype}" if op.kind == "gemm" else f"sustained_attn:{op.head_dim}"
            if c.get(sustained):
                rate = v[sustained]
            elif c["clock_ratio"]:
                rate = rate * v["clock_ratio"]
        return rate, per_kernel

    def tensor_rate(self, op: Op) -> float:
        """The tensor-core FLOP/s a GEMM or attention op's compute term divides its matmul FLOPs by (its ceilings,
        then the steady state, as op_times takes them), as a number also when the roofline is symbolic; 0 when
        the device has no rate for it."""
        peak_key, _, kernel_key = self._ceilings_of(op)
        rate, _ = self.steady_state(op, self._values[peak_key], self._values[kernel_key])
        if isinstance(rate, sp.Basic):
            rate = rate.subs({sp.Symbol(k, positive=True): v for k, v in ceil.bindings(self.ceilings).items()})
        return float(rate) if rate else 0.0

    def ridge_point(self, dtype: str) -> float:
        """FLOP/byte where this dtype's (effective) peak meets the (effective) bandwidth."""
        return self.matmul_peak(dtype) / self.bandwidth()

    def link(self) -> Link | None:
        """The link tensor parallelism's all-reduce meets: none at tp 1, the scale-up link when the group fits in
        its domain, else the scale-out link (raises when there is none)."""
        hw = self.hardware
        if self.tp == 1:
            return None
        if hw.scale_up is not None and self.tp <= hw.scale_up.max_gpus:
            return hw.scale_up
        if hw.scale_out is None:
            raise ValueError(f"tp: {self.tp} GPUs exceed {hw.name}'s scale-up domain and it has no scale-out link")
        return hw.scale_out

    def _launched(self, op: Op, comm):
        """A collective's time in a CUDA graph: NCCL's own cost model (its time inside the kernel) plus, like every
        other kernel of the graph, the measured per-kernel time of a graph chain (when the device has one)."""
        if self.ceilings["kernel_overhead"] is not None and op.kernels and self.ceilings["kernel_time"]:
            return op.kernels * self._values["kernel_time"] + comm
        return comm

    def _alltoall_link(self, ranks: int) -> str:
        """'scale_up' or 'scale_out': the link an all-to-all over `ranks` expert-parallel replicas of tp GPUs meets
        (scale-up when the tp x ep GPUs fit its domain); ValueError naming `ep` when the device has neither."""
        c, gpus = self.ceilings, ranks * self.tp
        if c["scale_up_bw"] and gpus <= c["scale_up_max_gpus"]:
            return "scale_up"
        if not c["scale_out_bw"]:
            raise ValueError(f"ep: {ranks} replicas ({gpus} GPUs with tp) exceed {self.hardware.name}'s scale-up "
                             "domain and it has no scale-out link")
        return "scale_out"

    def _remember(self, key, owner, value):
        """Keep `value` for (key, owner) in a bounded memo (the owner is held, so its id is not reused)."""
        self._memo[key] = (owner, value)
        while len(self._memo) > MEMO_ENTRIES:
            self._memo.popitem(last=False)
        return value

    def op_times(self, op: Op) -> OpTimes:
        """The op's times on this device (_op_times), once per op object and once per content: equal ops of
        different graphs (the dense layers of every method, a phase's ops the occupancy rewrite left as they were)
        share one symbolic computation."""
        key = id(op)
        cached = self._memo.get(key)
        if cached is not None and cached[0] is op:
            return cached[1]
        content = _content(op)
        hit = self._memo.get(content)
        times = hit[1] if hit is not None else self._remember(content, None, self._op_times(op))
        return self._remember(key, op, times)

    def _custom_allreduce(self, message_bytes, nccl, nccl_launched) -> tuple:
        """(comm, total) of an all-reduce where the engine's own one was measured (vLLM's custom all-reduce at the
        tp it was timed at: engines/timing.py KERNEL_KEYS): latency + bytes / rate below the engine's max message
        size (timed per call inside a CUDA graph, so no per-kernel cost is added), the NCCL model (`nccl`,
        `nccl_launched`) from it on; vLLM dispatches its custom kernel first whenever the message fits."""
        v = self._values
        custom = v["allreduce_custom_latency"] + message_bytes / v["allreduce_custom_bw"]
        limit = self.ceilings["allreduce_custom_max_bytes"]
        size = sp.sympify(message_bytes)
        if size.is_Number:
            return (custom, custom) if size < limit else (nccl, nccl_launched)
        fits = size < limit
        return (sp.Piecewise((custom, fits), (nccl, True)), sp.Piecewise((custom, fits), (nccl_launched, True)))

    def _op_times(self, op: Op) -> OpTimes:
        """The op's times from the ceilings alone: `c` (numbers) decides every branch, `v` (numbers, or symbols
        in the symbolic mode) goes into the expressions."""
        c, v = self.ceilings, self._values
        zero = sp.Integer(0)
        if sp.sympify(op.passes) != 1:  # a chunked prefill's chunks, an engine's ubatches: each pass its own kernels
            return self.op_times(op.one_pass()).times(op.passes)
        if op.is_comm and op.collective == "alltoall":  # expert parallelism: ranks = ep replicas of tp GPUs each
            link = self._alltoall_link(op.ranks)
            comm = alltoall_time(op.comm_bytes, op.ranks, v[f"{link}_bw"], v[f"{link}_latency"])
            return OpTimes(zero, zero, comm, self._launched(op, comm))
        if op.is_comm:
            n = self.tp
            if not c["link_bw"]:
                self.link()  # raises: the group exceeds the scale-up domain and there is no scale-out link
            cap = v["allreduce_ll_max_bw"] if c["allreduce_ll_max_bw"] else None
            comm = allreduce_time(op.comm_bytes, n, v["link_bw"], {p: v[f"allreduce_latency:{p}"] for p in PROTOCOLS},
                                  cap)
            if c.get("allreduce_custom_latency") and n == c.get("allreduce_custom_ranks"):
                return OpTimes(zero, zero, *self._custom_allreduce(op.comm_bytes, comm, self._launched(op, comm)))
            return OpTimes(zero, zero, comm, self._launched(op, comm))
        ggml = self._ggml_matmul(op)
        if ggml is not None:
            return ggml
        keys = self._ceilings_of(op)
        peak, bandwidth, per_kernel = (v[k] for k in keys)
        peak, per_kernel = self.steady_state(op, peak, per_kernel)
        if op.kind == "gemm" and keys[1] == "gemm_stream_bw" and c.get("gemv_bw") and op.query_rows != 0:
            # an engine's mat-vec kernel for a one-row call, its batched path from two rows on (engines.timing 15.)
            bandwidth = one_row(op.query_rows, v["gemv_bw"], bandwidth)
            per_kernel = one_row(op.query_rows, v["gemv_latency"], per_kernel) if c.get("gemv_latency") else per_kernel
        issue = op.vector_flops / v["vector_peak"]
        if op.int_ops != 0:
            issue += op.int_ops / v["int_rate"]
        compute = op.matmul_flops * self._padding(op) / peak + issue
        memory = op.bytes / bandwidth
        additive = c["kernel_overhead"] is not None
        if not additive and c["memory_latency"] and op.bytes != 0:
            memory = v["memory_latency"] + memory  # a kernel family's own ceilings: alpha inside the memory term
        shared, l2, latency = self._on_chip(op)
        # unevaluated Max: sympy's argument comparison is the slow part, and numpy evaluates it anyway
        work = sp.Max(compute, memory, evaluate=False) if self.options.overlap == "max" else compute + memory
        on_chip = [t for t in (shared, l2, latency) if t != 0]
        total = sp.Max(work, *on_chip, evaluate=False) if on_chip else work
        if additive and op.kernels and keys[2] == "gemm_latency" and c["gemm_latency_hidden"] \
                and self.options.overlap == "max":
            # a dense GEMM's fixed latency hides under compute that outlasts its stream law (gemm_time)
            stream = sp.Max(memory, *on_chip, evaluate=False) if on_chip else memory
            total = gemm_time(compute, stream, self._calls(op) * per_kernel, v["gemm_latency_hidden"])
        elif additive and op.kernels:
            # each kernel the op launches pays the graph's per-kernel time before its own work
            total = self._calls(op) * per_kernel + total
        if c.get("attn_prefill_row") and op.kind == "attention" and op.query_rows != 0:
            # an engine's prefill attention: a cost per (query token, head) row of its tiles (engines.timing 14.)
            total = total + op.query_rows * v["attn_prefill_row"]
        if op.kind == COPY and op.query_rows != 0:
            # an engine's copy of a strided view: one row is contiguous already, so a single token copies nothing
            rows = sp.sympify(op.query_rows)
            total = (total if rows > 1 else zero) if rows.is_number else sp.Piecewise((zero, rows <= 1), (total, True))
        if c.get("one_row_epilogue") and op.name in EPILOGUE_OPS and op.query_rows != 0:
            total = one_row(op.query_rows, zero, total)  # in the mat-vec before it at one row (EPILOGUE_OPS)
        if c.get("attn_decode_program") and op.kind == "attention" and "kv_read" in op.traffic and op.programs != 0:
            # an engine's decode attention as it runs in the engine: a cost per (sequence, KV head, split) tile on
            # top of its latency-bandwidth law (roofline.engines.timing, measured in the engine's own steps)
            total = total + op.programs * v["attn_decode_program"]
            if c.get("attn_decode_local_program") and op.group.startswith("sliding"):
                # a sliding-window layer: the engine runs the kernel's local instantiation, dearer per tile (vLLM
                # captures at max_model_len, so FA3 keeps a window below it: validate/engines/micro5_window.py)
                total = total + op.programs * v["attn_decode_local_program"]
        elif not additive and c["latency_floor"]:
            total = sp.Max(total, v["latency_floor"], evaluate=False)
        return OpTimes(compute, memory, zero, total, shared, l2, latency, issue)

    def _ggml_matmul(self, op: Op) -> OpTimes | None:
        """A GEMM on quantized weights (op.weight_type) timed by the engine's measured laws of ggml-cuda's kernels
        for that type (roofline.engines.timing 16.; ggml_types.law_type: its family's where the type itself was not
        timed); None where none applies. ggml_cuda_mul_mat runs MMVQ, the mat-vec kernel over the columns, up to
        MMVQ_MAX_COLUMNS rows and MMQ, the tile kernel, above. W = the op's bytes, F = its FLOPs:
            one row     k gemv_latency + W / gemv_bw
            2 .. 8      one row + F (1 - 1 / n) mmvq_flop_s(n)            (each further column's dot products redo the
                                                                           dequant: the weights are read once; one
                                                                           rate per column count, as ggml-cuda compiles
                                                                           one kernel per count)
            9 ..        k mmq_latency + W / mmq_bw + F / mmq_rate         (load and tile compute in turn)
        k the op's kernels (llama.cpp calls q, k and v apart: engines' op_kernels), each paying its law's latency."""
        c = self.ceilings
        if op.kind != "gemm" or not op.weight_type or op.name == EXPERTS:
            return None
        measured = {k.split(":")[1] for k in c if k.startswith("ggml:") and k.endswith(":gemv_bw") and c[k]}
        law = law_type(op.weight_type, measured)
        if law is None:
            return None
        v, zero = self._values, sp.Integer(0)

        def k(name: str) -> sp.Expr:
            return v[f"ggml:{law}:{name}"]

        # W: the op's bytes, weights and activations (the laws' fits count both, at the engine's activation bytes; a
        # serving step's op carries them as one sum: serving.stepmodel)
        weights, flops, rows = op.bytes, op.matmul_flops, sp.sympify(op.query_rows)
        calls = self._calls(op)
        one = calls * k("gemv_latency") + weights / k("gemv_bw")

        def mmvq(n: int) -> sp.Expr:  # n columns: the count's own seconds per further FLOP
            return one + flops * (1 - 1 / rows) * k(f"mmvq_flop_s:{n}")

        mmq = calls * k("mmq_latency") + weights / k("mmq_bw") + flops / k("mmq_rate")
        if rows.is_number:
            total = one if rows <= 1 else mmvq(int(sp.ceiling(rows))) if rows <= MMVQ_MAX_COLUMNS else mmq
        else:
            total = sp.Piecewise((one, rows <= 1), *((mmvq(n), rows <= n) for n in range(2, MMVQ_MAX_COLUMNS + 1)),
                                 (mmq, True))
        return OpTimes(flops / k("mmq_rate"), weights / k("gemv_bw"), zero, total)

    def _calls(self, op: Op):
        """The kernels `op` launches: op.kernels, but one for the gate / up projection at one row where the engine
        runs gate, up and the GLU as one mat-vec (one_row_epilogue, EPILOGUE_OPS)."""
        if op.name == EPILOGUE_GEMM and op.kernels > 1 and op.query_rows != 0 and self.ceilings.get("one_row_epilogue"):
            return one_row(op.query_rows, 1, op.kernels)
        return op.kernels

    def _on_chip(self, op: Op) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
        """(shared-memory, L2, latency) times of `op`, 0 where the device spec lacks the ceiling:
            t_shared  = shared bytes / (shared-memory bandwidth)
            t_l2      = L2 bytes / L2 bandwidth                 (op.l2_bytes where the op re-reads tiles through L2,
                                                                 else its DRAM bytes: every DRAM byte passes L2)
            t_latency = bytes x DRAM latency / (min(SMs, programs) x bytes in flight per SM)   (Little's law)."""
        c, v = self.ceilings, self._values
        zero = sp.Integer(0)
        shared = op.shared_bytes / v["smem_bw"] if c["smem_bw"] and op.shared_bytes != 0 else zero
        l2_bytes = op.l2_bytes if op.l2_bytes != 0 else op.bytes
        l2 = l2_bytes / v["l2_bw"] if c["l2_bw"] and l2_bytes != 0 else zero
        latency = zero
        if c["dram_latency"] and c["inflight_per_sm"] and op.bytes != 0:
            sms = v["sm_count"]
            active = sp.Min(sms, op.programs, evaluate=False) if op.programs != 0 else sms
            latency = op.bytes * v["dram_latency"] / (active * v["inflight_per_sm"])
        return shared, l2, latency

    def time(self, graph: Graph) -> sp.Expr:
        """Seconds for the whole phase: sum over ops of count x op time (kernels run one after another)."""
        return sp.Add(*(op.count * self.op_times(op).total for op in graph.ops))

    def compile(self, graph: Graph, symbols, cse: bool = True) -> callable:
        """A numpy function of `symbols` giving the phase time, lambdified once per graph and symbols (cse for
        array sweeps; without it the compile is cheaper, for scalar points)."""
        key = ("time", id(graph), tuple(symbols), cse)
        cached = self._memo.get(key)
        if cached is not None and cached[0] is graph:
            return cached[1]
        return self._remember(key, graph, lambdify(symbols, self.time(graph), cse=cse))

    def _compiled_rows(self, graph: Graph):
        """(symbols, numpy function -> per-op [7 numbers + traffic]) for `graph`, lambdified once."""
        key = ("rows", id(graph))
        cached = self._memo.get(key)
        if cached is not None and cached[0] is graph:
            return cached[1]
        exprs = []
        for op in graph.ops:
            t = self.op_times(op)
            exprs.append([op.matmul_flops, op.vector_flops, op.bytes, t.compute, t.memory, t.comm, t.total,
                          *(op.traffic.get(c, 0) for c in TRAFFIC), t.shared, t.l2, t.latency, t.issue])
        symbols = sorted(set().union(*(sp.sympify(e).free_symbols for row in exprs for e in row)), key=str)
        return self._remember(key, graph, (symbols, lambdify(symbols, exprs, cse=False)))

    def evaluate(self, graph: Graph, values: dict[sp.Symbol, float]) -> list[dict]:
        """Per-op numbers at one point: FLOPs, bytes by class, intensity, ridge, bound, times (per instance).
        The graph's expressions are compiled once (numpy) and reused for every point."""
        symbols, fn = self._compiled_rows(graph)
        missing = [str(s) for s in symbols if s not in values]
        if missing:
            raise ValueError(f"evaluate: no value for {sorted(missing)}")
        table = fn(*(float(values[s]) for s in symbols))
        names = ("matmul_flops", "vector_flops", "bytes", "compute_s", "memory_s", "comm_s", "time_s")
        rows = []
        for op, numbers in zip(graph.ops, table, strict=True):
            num = {k: float(v) for k, v in zip(names, numbers[:7], strict=True)}
            ceil = {k: float(v) for k, v in zip(CEILING_FIELDS, numbers[7 + len(TRAFFIC):], strict=True)}
            flops = num["matmul_flops"] + num["vector_flops"]
            intensity = flops / num["bytes"] if num["bytes"] else float("inf")
            if op.is_comm:
                bound = "communication"
            elif op.kernels and self.kernel_time() * op.kernels >= max(num["compute_s"], num["memory_s"]) > 0:
                bound = "latency"  # the kernels' fixed time outweighs the work they do
            else:
                bound = binding_ceiling(num["compute_s"], num["memory_s"], *ceil.values())
            rows.append({
                "name": op.name, "group": op.group, "count": op.count, "source": op.source, "dtype": op.dtype,
                **num, **ceil, "flops": flops,
                "traffic": {c: float(v) for c, v in zip(TRAFFIC, numbers[7:7 + len(TRAFFIC)], strict=True)},
                "intensity_flops_per_byte": intensity,
                "ridge_flops_per_byte": self.ridge_point(op.dtype),
                "bound": bound,
            })
        return rows


def one_row(rows, at_one, above):
    """`at_one` for a call of one row, `above` for more: a number where `rows` is one, else a Piecewise in it."""
    rows = sp.sympify(rows)
    if rows.is_number:
        return at_one if rows <= 1 else above
    return sp.Piecewise((at_one, rows <= 1), (above, True))


def gemm_time(compute, stream, latency, ratio, maximum=None, minimum=None):
    """A dense GEMM's time where its fixed latency hides under compute (hardware gemm_latency_hidden_ratio = k):

        m = latency + stream                    (the stream law: the skinny GEMMs' alpha + bytes / bw)
        t = max(m, compute + latency w),        w = min(1, max(0, (k m - compute) / ((k - 1) m)))

    w = 1 while compute <= m: latency + max(compute, stream), the law without k; 0 from compute = k m on: the GEMM
    runs at its FLOP rate alone. gemm_latency_s is the intercept of the decode GEMMs (M <= 64), where cuBLAS splits
    K and adds a reduce kernel; a GEMM with tiles enough to fill the device does neither, so timed alone a
    compute-bound GEMM shows no intercept at its FLOP rate (validate/engines/gemm_hidden.py: SGLang run 4's qkv and
    o_proj at T 1,024-8,192, vLLM micro4's at M 512-2,048). `maximum` / `minimum`: max and min for numbers
    (default: sympy's, unevaluated)."""
    mx = maximum or (lambda *a: sp.Max(*a, evaluate=False))
    mn = minimum or (lambda *a: sp.Min(*a, evaluate=False))
    m = latency + stream
    return mx(m, compute + latency * mn(1, mx(0, (ratio * m - compute) / ((ratio - 1) * m))))


def _content(op: Op) -> tuple:
    """Every field of `op` that its times read (all but its place in the graph: count, source; the group only for
    attention, whose sliding-window layers an engine may run in another kernel), hashable."""
    skip = ("count", "source") if op.kind == "attention" else ("group", "count", "source")
    return ("op", *(tuple(op.traffic.items()) if f.name == "traffic" else getattr(op, f.name)
                    for f in fields(Op) if f.name not in skip))


_ROOFLINES: dict[tuple, Roofline] = {}


def burst_options(hardware: Hardware, options: RooflineOptions | None = None,
                  share: float = 0.0) -> RooflineOptions | None:
    """`options` with the tensor-core rates between the burst and the sustained clock: each sustained figure of the
    device (sustained_gemm per dtype, sustained_attn per head dim, the sustained / burst clock ratio) moved to
    burst + `share` x (sustained - burst), its burst figure the GEMM shape rate (else the peak) or the attention
    rate of that key; share 0 sets them aside (RooflineOptions.kernels: Roofline.steady_state then keeps the burst
    rates). None when the device has none of them (nothing to move). The board reaches its power cap only while
    GEMMs run near back to back: micro6 and micro7 (validate/notes/2026-11-29-micro6-duty.md, one H200) timed a
    prefill's GEMM at the burst rate at GEMM duty 0.5 or less and falling toward the sustained rate as the duty
    rises to 1 (serving.clock)."""
    m = hardware.measured
    if m is None or not (m.sustained_gemm_flops_per_s or m.sustained_attention_flops_per_s
                         or (m.burst_sm_clock_hz and m.sustained_sm_clock_hz)):
        return None
    base = options or RooflineOptions()
    c = ceil.ceilings(hardware, base, 1)
    moved: dict[str, float | None] = {}
    for key, value in c.items():
        if not value or not key.startswith(("sustained_gemm:", "sustained_attn:")):
            continue
        kind, tag = key.split(":")
        burst = (c.get(f"gemm_shape:{tag}") or c.get(f"peak:{tag}")) if kind == "sustained_gemm" \
            else c.get(f"attn_flops:{tag}")
        moved[key] = burst + share * (value - burst) if share and burst else None
    if c.get("clock_ratio"):
        moved["clock_ratio"] = 1.0 - share * (1.0 - c["clock_ratio"]) if share else None
    kept = tuple(kv for kv in base.kernels if kv[0] not in moved)
    return replace(base, kernels=tuple(sorted(kept + tuple(moved.items()), key=lambda kv: kv[0])))


def roofline_for(hardware: Hardware, tp: int = 1, options: RooflineOptions | None = None) -> Roofline:
    """A shared Roofline per (hardware spec, tp, options), so its compiled graphs are reused across plans."""
    options = options or RooflineOptions()
    key = (hardware.model_dump_json(), tp, options, options.kernels)
    if key not in _ROOFLINES:
        if len(_ROOFLINES) >= 64:
            _ROOFLINES.pop(next(iter(_ROOFLINES)))
        _ROOFLINES[key] = Roofline(hardware, options, tp)
    return _ROOFLINES[key]
