"""Phase times for a plan: decode step at (B, L), its closed-form average over a generation, prefill,
and the pipeline-parallel schedule — the one step-time path (plan, inversions, plots and serving use it).

Pipeline (pp stages, m micro-batches of B/m sequences): one decode step for all B sequences takes max(m, pp)
stage-times of a micro-batch where the engine keeps its batches in flight from step to step (vLLM, SGLang, the ideal
bound: engines.timing 26.), (m + pp - 1) where it fills and drains the pipeline every step (llama.cpp, TensorRT-LLM;
the bubble is the pp - 1), a stage-time being the whole-model time for B/m sequences over pp plus one activation
hand-off (B/m x d x act bytes over the link).

The graphs are compiled once per (model, method, device structure, tp, dtypes) into numeric functions
(costmodel.compiled, cached by content in memory and on disk); the device's numbers are bound on load, so
another GPU with the same ceilings present (a structure) reuses them. The sympy graphs are built only on a miss,
or when a caller asks for them (`graph`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from roofline.costmodel import Graph, Roofline, build_graph, roofline_for
from roofline.costmodel.compiled import GraphKernel, graph_kernel
from roofline.engines import as_run
from roofline.engines.timing import IDEAL, EngineTiming, eager_layers, engine_options, pipeline_slots, timing_on
from roofline.lazy import np, sp
from roofline.methods import CacheModel, MethodConfig
from roofline.numbers import codegen
from roofline.planner.memory import DEFAULT_PREFILL_CHUNK
from roofline.specs import Hardware, Model, Workload
from roofline.units import integrate_pieces

_GRAPH_ARGS = {"decode": ("B", "L"), "decode_mean": ("B", "L"), "prefill": ("B", "P", "CHUNKS")}  # units.*


@dataclass
class PhaseModel:
    """Compiled decode and prefill times of one (model, method, hardware, workload) on its GPUs."""

    model: Model
    hardware: Hardware
    workload: Workload
    method: MethodConfig | CacheModel
    roofline: Roofline
    flavour: str = "scalar"
    _kernels: dict[str, GraphKernel] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, model: Model, hardware: Hardware, workload: Workload, method: MethodConfig | CacheModel,
              roofline: Roofline | None = None, flavour: str = "scalar") -> PhaseModel:
        """Pass the method config (not its CacheModel) so compiled graphs are cached by content and shared
        across workloads; `flavour` 'vector' takes numpy arrays of batch and context. The workload's engine sets
        the kernels' ceilings it measured on this device (engines.timing) and its step costs (`engine`)."""
        roof = roofline or roofline_for(hardware, tp=workload.tp, options=engine_options(workload.engine, hardware))
        return cls(as_run(workload.engine, model), hardware, workload, method, roof, flavour)

    @property
    def engine(self) -> EngineTiming:
        """The workload's engine's time profile (IDEAL: the GPU work alone) on the workload's host (its host_speed:
        engines.timing mechanism 11)."""
        return timing_on(self.workload.engine, self.workload.host_speed)

    def _graph_kwargs(self, phase: str) -> dict:
        w = self.workload
        kwargs = dict(tp=w.tp, weight_dtype=w.weight_dtype, compute_dtype=w.compute_dtype,
                      act_bytes=self.engine.activation_bytes or w.activation_bytes,
                      occupancy="mean" if phase == "decode_mean" else "exact",
                      fusion=w.fusion)
        if w.ep != 1 or w.expert_weight_dtype is not None:  # expert parallelism / mixed dtypes (keys unchanged without)
            kwargs.update(ep=w.ep, expert_weight_dtype=w.expert_weight_dtype)
        overrides = self.engine.op_kernels_on(self.hardware.name)
        if overrides:  # the engine's own fused calls (keys unchanged without)
            kwargs.update(kernel_overrides=overrides)
        if self.engine.graph_ops:  # ops the engine adds to the model's (keys unchanged without)
            kwargs.update(engine_ops=self.engine.graph_ops)
        return kwargs

    def graph(self, phase: str) -> Graph:
        """The sympy op graph of 'decode', 'decode_mean' (windows at their mean fill) or 'prefill' (weights read
        once per chunk: CHUNKS)."""
        from roofline.units import CHUNKS
        graph = build_graph(self.model, self.method, "prefill" if phase == "prefill" else "decode",
                            **self._graph_kwargs(phase))
        if phase != "prefill":
            return graph
        # each chunk a pass of every op: its kernels launched and its weights read once a chunk (Op.passes), the
        # weights a chunk's own tokens touch (the embedding's rows, the routed experts: P / CHUNKS tokens a chunk)
        from roofline.units import P
        ops = tuple(replace(op, traffic={**op.traffic, "weights": sp.sympify(op.traffic["weights"]).subs(P, P / CHUNKS)
                                         * CHUNKS}, passes=CHUNKS)
                    if "weights" in op.traffic else replace(op, passes=CHUNKS) for op in graph.ops)
        return replace(graph, ops=ops)

    @property
    def decode(self) -> Graph:
        """The sympy op graph of one decode step (`graph('decode')`)."""
        return self.graph("decode")

    @property
    def prefill(self) -> Graph:
        """The sympy op graph of prefill, weights read once per chunk (`graph('prefill')`)."""
        return self.graph("prefill")

    @property
    def cache(self) -> CacheModel:
        """The method's CacheModel on this model, as the decode graph built it."""
        return self.decode.cache

    def kernel(self, phase: str) -> GraphKernel:
        """The compiled graph of `phase` (see `graph`), loaded or compiled once."""
        if phase not in self._kernels:
            key = None
            if isinstance(self.method, MethodConfig):
                key = codegen.content_key("graph", self.model, self.method, self.roofline.structure(), phase,
                                          self._graph_kwargs(phase))
            self._kernels[phase] = graph_kernel(self.roofline, key, lambda: self.graph(phase), _GRAPH_ARGS[phase],
                                                self.flavour, kinks_in="L" if phase == "decode_mean" else None,
                                                rows=phase != "decode_mean")
        return self._kernels[phase]

    def handoff_link(self):
        """The link a pipeline stage hands its activations over: None at pp 1; the scale-up link when the tp x pp
        GPUs fit its domain; else the scale-out link (the stages span nodes, and the pipeline runs at its slowest
        hand-off: a boundary between nodes); a device with only one of them, that one."""
        hw, w = self.hardware, self.workload
        if w.pp == 1:
            return None
        if hw.scale_up is not None and (w.tp * w.pp <= hw.scale_up.max_gpus or hw.scale_out is None):
            return hw.scale_up
        return hw.scale_out

    def _handoff(self, seqs) -> float:
        """Activation transfer between pipeline stages for `seqs` sequences over handoff_link, plus its latency."""
        link = self.handoff_link()
        if link is None:
            return 0.0
        return float(seqs * self.model.hidden_size * self.workload.activation_bytes / link.bytes_per_s
                     + link.latency_s)

    def micro_count(self, batch, tokens=None):
        """The step's micro-batches m: the pipeline's (pp > 1: min(micro_batches, batch); 1 otherwise), at least
        the engine's passes over the step's `tokens` (a pass of at most pass_tokens tokens: llama.cpp's ubatches,
        engines.timing 19.; None: not split by tokens)."""
        m = min(self.workload.micro_batches, batch) if self.workload.pp > 1 else 1
        if tokens is None or not self.engine.pass_tokens:
            return m
        if getattr(tokens, "ndim", 0):  # the vector flavour's arrays
            return np.maximum(m, np.maximum(1, np.ceil(np.asarray(tokens, dtype=np.float64) / self.engine.pass_tokens)))
        return max(m, 1, math.ceil(float(tokens) / self.engine.pass_tokens))

    def pipeline(self, whole_model_time, batch, tokens=None, one_off: bool = False):
        """Step time with pp stages and m micro-batches (whole_model_time: a function of sequences; m from
        micro_count, so an engine's passes over `tokens` split the step at pp 1 too: m x a pass): max(m, pp) or
        m + pp - 1 stage-times by the engine (engines.timing.pipeline_slots); a `one_off` pass from an empty
        pipeline (a batch's prefill, TTFT) fills and drains it whatever the engine: m + pp - 1."""
        pp, m = self.workload.pp, self.micro_count(batch, tokens)
        if pp == 1 and (m == 1 if not getattr(m, "ndim", 0) else bool(np.all(m == 1))):
            return whole_model_time(batch)
        micro = batch / m
        stage = whole_model_time(micro) / pp + self._handoff(micro)
        slots = m + pp - 1 if one_off else pipeline_slots(self.workload.engine, m, pp)
        return slots * stage

    def decode_time(self, batch, context):
        """TPOT: one decode step for `batch` sequences at `context` cached tokens (pipeline included); under an
        engine the GPU runs the batch padded to its CUDA-graph size and the step pays its host work
        (EngineTiming.step)."""
        total = self.kernel("decode").total
        engine = self.engine
        if engine is IDEAL:
            return self.pipeline(lambda b: total(b, context), batch)
        padded = engine.padded(batch)
        return engine.step(self.pipeline(lambda b: total(b, context), padded, padded) + self.sampler_s(batch),
                           batch, self.eager_host_s(batch))

    def sampler_s(self, rows):
        """GPU seconds of the engine's sampler over `rows` sequences (EngineTiming.sampler_s on this device and the
        model's vocabulary: an op the graph lacks, measured under the engine; 0 elsewhere)."""
        return self.engine.sampler_s(self.hardware.name, rows, self.model.vocab_size)

    def eager_host_s(self, tokens: int, prefill: bool = False) -> float:
        """Host seconds of launching a step of `tokens` tokens (`prefill`: a prefill chunk) without CUDA graphs under
        the engine (its EngineTiming.eager_host_s over this model's layers on one pipeline stage; 0 within the
        capture sizes)."""
        return self.engine.eager_host_s(tokens, *eager_layers(self.model, self.workload), prefill)

    def average_decode_time(self, batch: int, start: int, tokens: int) -> float:
        """Mean TPOT while the context grows from `start` to `start + tokens`: the integral of the step
        time over L (residual windows at their mean fill) divided by `tokens`. The step time is piecewise
        affine in L between the kinks of its Min/Max nodes, so the trapezoid rule on those pieces is exact
        (a piece that is still not affine, a kink the search missed, is split until its midpoint agrees)."""
        if tokens <= 0:
            return self.decode_time(batch, start)
        kernel = self.kernel("decode_mean")
        engine = self.engine
        if engine is IDEAL:
            return self.pipeline(lambda b: _integral(kernel, b, start, start + tokens) / tokens, batch)
        padded = engine.padded(batch)
        gpu = self.pipeline(lambda b: _integral(kernel, b, start, start + tokens) / tokens, padded, padded)
        return engine.step(gpu + self.sampler_s(batch), batch, self.eager_host_s(batch))

    def prefill_time(self, batch: int, prompt: int) -> float:
        """TTFT of `batch` prompts of `prompt` tokens prefilled together; chunked prefill re-reads the
        weights once per chunk (ceil(B P / chunk) passes)."""
        chunks = self.prefill_chunks(batch, prompt)
        total = self.kernel("prefill").total
        gpu = self.pipeline(lambda b: total(b, prompt, chunks), batch, one_off=True)
        if self.engine is IDEAL:
            return gpu
        # a request's own cost (engines.timing, mechanism 5): its first step has nothing to hide behind; a chunk past
        # the largest capture size launches its kernels from Python, ahead of the GPU (mechanism 8)
        eager = chunks * self.eager_host_s(-(-batch * prompt // chunks), prefill=True)
        # each prompt token's host work before the GPU's (timing mechanism 17: llama.cpp; 0 for the other engines)
        return max(gpu + self.sampler_s(batch), eager) + self.engine.request_s + self.engine.token_s * batch * prompt

    def prefill_chunks(self, batch: int, prompt: int) -> int:
        """Passes over the weights when `batch` prompts of `prompt` tokens are prefilled in chunks of the workload's
        prefill_chunk_tokens, each chunk in passes of at most the engine's pass_tokens (llama.cpp's ubatch: timing
        19.): ceil(B P / chunk) or ceil(B P / pass_tokens), the more."""
        chunk = self.workload.prefill_chunk_tokens or DEFAULT_PREFILL_CHUNK
        return max(-(-batch * prompt // chunk), self.engine.passes(batch * prompt))

    def rows(self, phase: str, batch, context) -> list[dict]:
        """Per-op rows (Roofline.evaluate's) of 'decode' at (batch, context) or 'prefill' at P = context (chunked as
        prefill_time is: weights read once per chunk)."""
        if phase == "decode":
            return self.kernel("decode").rows(batch, context)
        return self.kernel("prefill").rows(batch, context, self.prefill_chunks(batch, context))

    def dominant(self, phase: str, batch: int, context: int) -> dict:
        """The op taking the most time in a phase, its share, and the phase's bound: the bound (compute, memory,
        communication or launch latency) of the ops that take most of the phase's time, so a step whose
        largest op is ALU-bound reads "compute" even when its other ops move more bytes than they compute."""
        s = self.kernel("decode").summary(batch, context) if phase == "decode" \
            else self.prefill_summary(batch, context)
        return dominant_of(s)

    def prefill_summary(self, batch: int, prompt: int) -> dict:
        """The prefill kernel's summary for `batch` prompts of `prompt` tokens, chunked as prefill_time is: its
        total_s is prefill_time's whole-model time when pp = 1 (the same float)."""
        return self.kernel("prefill").summary(batch, prompt, self.prefill_chunks(batch, prompt))

    def decode_summary(self, batch: int, context: int) -> dict:
        """The decode kernel's summary at (batch, context): its total_s is decode_time's whole-model step when
        pp = 1 (the same float: the generated total adds the ops in the summary's order)."""
        return self.kernel("decode").summary(batch, context)


def dominant_of(s: dict) -> dict:
    """PhaseModel.dominant's figures from a kernel summary (GraphKernel.summary)."""
    return {"bound": s["bound"], "dominant_op": s["dominant_op"],
            "dominant_share": s["dominant_time_s"] / (s["total_s"] or 1.0), "dominant_bound": s["dominant_bound"],
            "compute_s": s["compute_s"], "memory_s": s["memory_s"], "comm_s": s["comm_s"]}


def _integral(kernel: GraphKernel, batch, lo: float, hi: float) -> float:
    """Exact integral over L in [lo, hi] of the kernel's total at `batch` (piecewise affine between kinks)."""
    total = kernel.functions["total"]
    f = lambda x: float(total(batch, x))  # noqa: E731
    points = {float(lo), float(hi)}
    for slope, intercept in kernel.kinks(batch, lo):
        if slope:
            root = -float(intercept) / float(slope)
            if lo < root < hi:
                points.add(root)

    return integrate_pieces(f, points)
