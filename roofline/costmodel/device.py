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
    t_l2      = bytes / L2 bandwidth                                       loads (kv.quant.metadata_loads)
    t_latency = bytes x DRAM latency / (min(SMs, programs) x bytes in flight per SM)
The plan names the binding ceiling (binding_ceiling): memory, compute, issue, shared-memory, l2, latency.
All-reduce ops (tensor parallelism) take the ring time 2(n-1)/n * bytes / link + 2(n-1) * hop latency;
all-to-all ops (expert parallelism) take costmodel.collectives.alltoall_seconds.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from roofline.costmodel.collectives import alltoall_seconds
from roofline.costmodel.graph import Graph
from roofline.costmodel.ops import EXPERTS, ROUTING, TRAFFIC, Op
from roofline.lazy import sp
from roofline.specs import Hardware, Link
from roofline.units import lambdify

MEMO_ENTRIES = 20_000  # op times and compiled graphs kept per device (the long-running app must not grow)


@dataclass(frozen=True)
class RooflineOptions:
    overlap: Literal["max", "sum"] = "max"
    use_measured: bool = True


@dataclass(frozen=True)
class OpTimes:
    """An op's time by ceiling (s): compute (tensor + vector + integer, with `issue` the vector + integer part),
    DRAM, communication, shared memory, L2, Little's-law latency; `total` the overlap rule over them."""

    compute: sp.Expr
    memory: sp.Expr
    comm: sp.Expr
    total: sp.Expr
    shared: sp.Expr = field(default_factory=lambda: sp.S.Zero)
    l2: sp.Expr = field(default_factory=lambda: sp.S.Zero)
    latency: sp.Expr = field(default_factory=lambda: sp.S.Zero)
    issue: sp.Expr = field(default_factory=lambda: sp.S.Zero)


# Extra per-op row entries (after the traffic classes) that name the binding ceiling.
CEILING_FIELDS = ("shared_s", "l2_s", "latency_s", "issue_s")


def binding_ceiling(compute: float, memory: float, shared: float = 0.0, l2: float = 0.0, latency: float = 0.0,
                    issue: float = 0.0) -> str:
    """The ceiling with the longest time: "memory" (DRAM), "compute" (tensor cores) or "issue" (vector and
    integer instructions, when they are most of the compute time), "shared-memory", "l2" or "latency" (Little's
    law: too few bytes in flight); ties go to memory."""
    best, value = "memory", memory
    on_cores = "issue" if issue > compute - issue else "compute"
    for name, t in ((on_cores, compute), ("shared-memory", shared), ("l2", l2), ("latency", latency)):
        if t > value:
            best, value = name, t
    return best


@dataclass
class Roofline:
    """A device's ceilings, and the times of ops and graphs on it."""

    hardware: Hardware
    options: RooflineOptions = field(default_factory=RooflineOptions)
    tp: int = 1
    _memo: OrderedDict = field(default_factory=OrderedDict, repr=False, compare=False)

    def content(self) -> tuple:
        """What the times depend on, for content keys: the hardware spec, the options and tp."""
        return (self.hardware.model_dump_json(), repr(self.options), self.tp)

    @property
    def measured(self):
        return self.hardware.measured if self.options.use_measured else None

    def bandwidth(self) -> float:
        """Effective memory bandwidth, bytes/s: the fitted streaming bandwidth when calibrated (else the
        measured large-size read, else the datasheet)."""
        m = self.measured
        if m is None:
            return self.hardware.memory_bytes_per_s
        return m.stream_bytes_per_s or m.read_bytes_per_s

    def memory_latency(self) -> float:
        """alpha of the measured latency-bandwidth law (0 when not calibrated)."""
        m = self.measured
        return m.memory_latency_s or 0.0 if m is not None else 0.0

    def matmul_peak(self, dtype: str) -> float:
        m = self.measured
        if m is not None and dtype in m.gemm_flops_per_s:
            return m.gemm_flops_per_s[dtype]
        return self.hardware.peak_flops_per_s(dtype)

    def vector_peak(self) -> float:
        """FP32 vector FLOP/s: measured (FMA issue microbenchmark) when calibrated, else the datasheet."""
        m = self.measured
        return m.fp32_flops_per_s if m is not None and m.fp32_flops_per_s else self.hardware.fp32_dense_flops_per_s

    def int_rate(self) -> float:
        """Vector integer ops/s: measured when calibrated, else the spec's INT32 rate (Hardware.int_ops_per_s)."""
        m = self.measured
        return m.int32_ops_per_s if m is not None and m.int32_ops_per_s else self.hardware.int_ops_per_s()

    def shared_bandwidth(self) -> float | None:
        """Shared-memory bandwidth of the device, bytes/s: measured, else B/clock/SM x SMs x clock; None: unknown."""
        m = self.measured
        if m is not None and m.shared_memory_bytes_per_s:
            return m.shared_memory_bytes_per_s
        return self.hardware.shared_memory_bytes_per_s_total()

    def l2_bandwidth(self) -> float | None:
        """L2 bandwidth, bytes/s: measured, else the spec's; None: no L2 ceiling."""
        m = self.measured
        return (m.l2_bytes_per_s if m is not None and m.l2_bytes_per_s else None) or self.hardware.l2_bytes_per_s

    def little(self) -> tuple[float, float] | None:
        """(DRAM latency s, bytes in flight per SM) for Little's law: measured, else the spec's latency and its
        shared memory per SM (asynchronous copies land there); None when either is unknown."""
        m, hw = self.measured, self.hardware
        latency = (m.dram_latency_s if m is not None and m.dram_latency_s else None) or hw.dram_latency_s
        inflight = (m.bytes_in_flight_per_sm if m is not None and m.bytes_in_flight_per_sm else None) \
            or hw.shared_memory_bytes_per_sm
        return (latency, float(inflight)) if latency and inflight else None

    def latency_floor(self) -> float:
        m = self.measured
        return m.launch_latency_s if m is not None else 0.0

    def kernel_time(self) -> float:
        """Per-kernel time of a kernel in a CUDA graph of dependent kernels (launch, ramp-up, drain), s:
        the measured chain of small kernels when calibrated, else alpha of the streaming fit (the same
        constant, read off single streaming kernels in a graph); 0 for the datasheet roofline."""
        m = self.measured
        if m is None:
            return 0.0
        return m.kernel_overhead_s or m.memory_latency_s or 0.0

    def _ceilings_of(self, op: Op) -> tuple[float, float, float]:
        """(matmul FLOP/s, bytes/s, per-kernel s) that bound `op`: a GEMM meets the GEMM laws measured at the
        model shapes (weights streamed at M <= 64, FLOP/s at M >= 2048), the routed experts (blocks.moe_mlp) the
        grouped-GEMM law (active experts' weights at grouped_gemm_stream_bytes_per_s, grouped_gemm_latency_s per
        call; FLOP/s as a GEMM: the grouped rate is not measured), routing kernels routing_kernel_s, attention its
        own kernels' ceilings (decode: KV bytes at the one-query latency-bandwidth law; prefill: the causal flash
        rate of its head dim), every other op the streaming bandwidth and the graph's per-kernel time."""
        peak, bandwidth, per_kernel = self.matmul_peak(op.dtype), self.bandwidth(), self.kernel_time()
        m = self.measured
        if m is None:
            return peak, bandwidth, per_kernel
        if op.name == EXPERTS and op.kind == "gemm" and m.grouped_gemm_stream_bytes_per_s:  # grouped-GEMM law
            return (m.gemm_shape_flops_per_s.get(op.dtype, peak), m.grouped_gemm_stream_bytes_per_s,
                    m.grouped_gemm_latency_s or per_kernel)
        if op.kind == ROUTING and m.routing_kernel_s:
            return peak, bandwidth, m.routing_kernel_s
        if op.kind == "gemm" and m.gemm_stream_bytes_per_s:
            return (m.gemm_shape_flops_per_s.get(op.dtype, peak), m.gemm_stream_bytes_per_s,
                    m.gemm_latency_s or per_kernel)
        if op.kind == "attention" and "kv_read" in op.traffic and m.decode_attention_bytes_per_s:
            return peak, m.decode_attention_bytes_per_s, m.decode_attention_latency_s or per_kernel
        if op.kind == "attention" and "kv_read" not in op.traffic and op.head_dim in m.attention_flops_per_s:
            return m.attention_flops_per_s[op.head_dim], bandwidth, per_kernel
        return peak, bandwidth, per_kernel

    def steady_state(self, op: Op, rate: float, per_kernel: float) -> tuple[float, float]:
        """(tensor-core FLOP/s, per-kernel s) of `op` in the planner's steady state, from _ceilings_of's burst figures:
        - a GEMM or prefill attention takes the sustained rate (measured sustained_gemm_flops_per_s per dtype,
          sustained_attention_flops_per_s per head dim; else its burst rate x sustained / burst SM clock when both
          clocks are measured). The mechanism: under back-to-back tensor-core load the board reaches its power limit
          and the SM clock settles lower within sustained_after_s (tens of ms); a phase is long when the device runs
          it back to back for longer than that, and the planner's phases are steady-state serving (steps back to
          back, as are the clients' 30-replay medians), so every such op is in one. Only the compute term changes:
          a memory-bound op (decode GEMMs at the streaming law) keeps its time.
        - an eager aten kernel (op.aten, fusion 'none') costs the measured aten_kernel_s instead of the chain of
          minimal adds.
        Absent fields leave the burst figures as they are."""
        m = self.measured
        if m is None:
            return rate, per_kernel
        if op.aten and m.aten_kernel_s:
            per_kernel = m.aten_kernel_s
        prefill_attention = op.kind == "attention" and "kv_read" not in op.traffic
        if op.kind == "gemm" or prefill_attention:
            sustained = (m.sustained_gemm_flops_per_s.get(op.dtype) if op.kind == "gemm"
                         else m.sustained_attention_flops_per_s.get(op.head_dim))
            if sustained:
                rate = sustained
            elif m.burst_sm_clock_hz and m.sustained_sm_clock_hz:
                rate = rate * min(1.0, m.sustained_sm_clock_hz / m.burst_sm_clock_hz)
        return rate, per_kernel

    def ridge_point(self, dtype: str) -> float:
        """FLOP/byte where this dtype's (effective) peak meets the (effective) bandwidth."""
        return self.matmul_peak(dtype) / self.bandwidth()

    def link(self) -> Link | None:
        hw = self.hardware
        if self.tp == 1:
            return None
        if hw.scale_up is not None and self.tp <= hw.scale_up.max_gpus:
            return hw.scale_up
        if hw.scale_out is None:
            raise ValueError(f"tp: {self.tp} GPUs exceed {hw.name}'s scale-up domain and it has no scale-out link")
        return hw.scale_out

    def _remember(self, key, owner, value):
        """Keep `value` for (key, owner) in a bounded memo (the owner is held, so its id is not reused)."""
        self._memo[key] = (owner, value)
        while len(self._memo) > MEMO_ENTRIES:
            self._memo.popitem(last=False)
        return value

    def op_times(self, op: Op) -> OpTimes:
        key = id(op)
        cached = self._memo.get(key)
        if cached is not None and cached[0] is op:
            return cached[1]
        return self._remember(key, op, self._op_times(op))

    def _op_times(self, op: Op) -> OpTimes:
        zero = sp.Integer(0)
        if op.is_comm and op.collective == "alltoall":  # expert parallelism: ranks = ep replicas of tp GPUs each
            comm = alltoall_seconds(self.hardware, op.comm_bytes, op.ranks, op.ranks * self.tp)
            return OpTimes(zero, zero, comm, comm)
        if op.is_comm:
            link = self.link()
            n = self.tp
            comm = 2 * sp.Rational(n - 1, n) * op.comm_bytes / link.bytes_per_s + 2 * (n - 1) * link.latency_s
            return OpTimes(zero, zero, comm, comm)
        peak, bandwidth, per_kernel = self._ceilings_of(op)
        peak, per_kernel = self.steady_state(op, peak, per_kernel)
        issue = op.vector_flops / self.vector_peak()
        if op.int_ops != 0:
            issue += op.int_ops / self.int_rate()
        compute = op.matmul_flops / peak + issue
        memory = op.bytes / bandwidth
        m = self.measured
        additive = m is not None and m.kernel_overhead_s is not None
        if not additive and m is not None and m.memory_latency_s and op.bytes != 0:
            memory = m.memory_latency_s + memory  # a kernel family's own ceilings: alpha inside the memory term
        shared, l2, latency = self._on_chip(op)
        # unevaluated Max: sympy's argument comparison is the slow part, and numpy evaluates it anyway
        work = sp.Max(compute, memory, evaluate=False) if self.options.overlap == "max" else compute + memory
        on_chip = [t for t in (shared, l2, latency) if t != 0]
        total = sp.Max(work, *on_chip, evaluate=False) if on_chip else work
        if additive and op.kernels:
            # each kernel the op launches pays the graph's per-kernel time before its own work
            total = op.kernels * per_kernel + total
        elif not additive and self.latency_floor():
            total = sp.Max(total, self.latency_floor(), evaluate=False)
        return OpTimes(compute, memory, zero, total, shared, l2, latency, issue)

    def _on_chip(self, op: Op) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
        """(shared-memory, L2, latency) times of `op`, 0 where the device spec lacks the ceiling:
            t_shared  = shared bytes / (shared-memory bandwidth)
            t_l2      = bytes / L2 bandwidth                    (every DRAM byte passes L2)
            t_latency = bytes x DRAM latency / (min(SMs, programs) x bytes in flight per SM)   (Little's law)."""
        zero = sp.Integer(0)
        smem, l2_bw, little = self.shared_bandwidth(), self.l2_bandwidth(), self.little()
        shared = op.shared_bytes / smem if smem and op.shared_bytes != 0 else zero
        l2 = op.bytes / l2_bw if l2_bw and op.bytes != 0 else zero
        latency = zero
        if little is not None and op.bytes != 0:
            sms = self.hardware.sm_count
            active = sp.Min(sms, op.programs, evaluate=False) if op.programs != 0 else sms
            latency = op.bytes * little[0] / (active * little[1])
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


_ROOFLINES: dict[tuple, Roofline] = {}


def roofline_for(hardware: Hardware, tp: int = 1, options: RooflineOptions | None = None) -> Roofline:
    """A shared Roofline per (hardware spec, tp, options), so its compiled graphs are reused across plans."""
    options = options or RooflineOptions()
    key = (hardware.model_dump_json(), tp, options)
    if key not in _ROOFLINES:
        if len(_ROOFLINES) >= 64:
            _ROOFLINES.pop(next(iter(_ROOFLINES)))
        _ROOFLINES[key] = Roofline(hardware, options, tp)
    return _ROOFLINES[key]
