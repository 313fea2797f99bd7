"""Phase times for a plan: decode step at (B, L), its closed-form average over a generation, prefill,
and the pipeline-parallel schedule.

Pipeline (pp stages, m micro-batches of B/m sequences): one decode step for all B sequences takes
(m + pp - 1) stage-times of a micro-batch (the bubble is the pp - 1), a stage-time being the whole-model
time for B/m sequences over pp plus one activation hand-off (B/m x d x act bytes over the link).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from roofline.costmodel import Graph, Roofline, build_graph, roofline_for
from roofline.methods import CacheModel, MethodConfig
from roofline.specs import Hardware, Model, Workload
from roofline.units import CHUNKS, B, L, P, piecewise_linear_integral


@dataclass
class PhaseModel:
    """Compiled decode and prefill times of one (model, method, hardware, workload) on its GPUs."""

    model: Model
    hardware: Hardware
    workload: Workload
    cache: CacheModel
    roofline: Roofline
    decode: Graph
    decode_mean: Graph
    prefill: Graph

    @classmethod
    def build(cls, model: Model, hardware: Hardware, workload: Workload, method: MethodConfig | CacheModel,
              roofline: Roofline | None = None) -> PhaseModel:
        """Pass the method config (not its CacheModel) so graphs are shared across workloads."""
        kw = dict(tp=workload.tp, weight_dtype=workload.weight_dtype, compute_dtype=workload.compute_dtype,
                  act_bytes=workload.activation_bytes)
        roof = roofline or roofline_for(hardware, tp=workload.tp)
        decode = build_graph(model, method, "decode", **kw)
        return cls(model, hardware, workload, decode.cache, roof, decode,
                   build_graph(model, method, "decode", occupancy="mean", **kw),
                   build_graph(model, method, "prefill", **kw))

    def _handoff(self, seqs) -> float:
        """Activation transfer between pipeline stages for `seqs` sequences (scale-up link, else out)."""
        link = self.hardware.scale_up or self.hardware.scale_out
        if self.workload.pp == 1 or link is None:
            return 0.0
        return float(seqs * self.model.hidden_size * self.workload.activation_bytes / link.bytes_per_s
                     + link.latency_s)

    def pipeline(self, whole_model_time, batch) -> float:
        """Step time with pp stages and m micro-batches (whole_model_time: a function of sequences)."""
        pp, m = self.workload.pp, min(self.workload.micro_batches, batch)
        if pp == 1:
            return float(whole_model_time(batch))
        micro = batch / m
        stage = float(whole_model_time(micro)) / pp + self._handoff(micro)
        return (m + pp - 1) * stage

    def decode_time(self, batch: int, context: int) -> float:
        """TPOT: one decode step for `batch` sequences at `context` cached tokens."""
        fn = self.decode_time_fn()
        return self.pipeline(lambda b: fn(b, context), batch)

    def decode_time_fn(self):
        """numpy function (B, L) -> whole-model decode time (no pipeline), for sweeps and bisection."""
        return self.roofline.compile(self.decode, [B, L], cse=False)

    def average_decode_time(self, batch: int, start: int, tokens: int) -> float:
        """Mean TPOT while the context grows from `start` to `start + tokens`: the integral of the step
        time over L (residual windows at their mean fill) divided by `tokens`. Each op's time is piecewise
        affine in L, so the integral is exact on its kinks (symbols.piecewise_linear_integral)."""
        if tokens <= 0:
            return self.decode_time(batch, start)

        def whole(b) -> float:
            total = 0.0
            for op in self.decode_mean.ops:
                t = self.roofline.op_times(op).total
                total += op.count * piecewise_linear_integral(t, L, start, start + tokens, {B: b})
            return total / tokens

        return self.pipeline(whole, batch)

    def prefill_time(self, batch: int, prompt: int) -> float:
        """TTFT of `batch` prompts of `prompt` tokens prefilled together; chunked prefill re-reads the
        weights once per chunk (ceil(B P / chunk) passes)."""
        chunk = self.workload.prefill_chunk_tokens or 8192
        chunks = -(-batch * prompt // chunk)
        fn = self.roofline.compile(self.chunked_prefill, [B, P, CHUNKS], cse=False)
        return self.pipeline(lambda b: fn(b, prompt, chunks), batch)

    @cached_property
    def chunked_prefill(self) -> Graph:
        """The prefill graph with each op's weight traffic times CHUNKS."""
        ops = tuple(replace(op, traffic={**op.traffic, "weights": op.traffic["weights"] * CHUNKS})
                    if "weights" in op.traffic else op for op in self.prefill.ops)
        return replace(self.prefill, ops=ops)

    def dominant(self, phase: str, batch: int, context: int) -> dict:
        """The op taking the most time in a phase, its share, and the phase's bound: the bound (compute, memory,
        communication or launch latency) of the ops that take most of the phase's time, so a step whose
        largest op is ALU-bound reads "compute" even when its other ops move more bytes than they compute."""
        graph = self.decode if phase == "decode" else self.prefill
        rows = self.roofline.evaluate(graph, {B: batch, L: context, P: context})
        total = sum(r["count"] * r["time_s"] for r in rows) or 1.0
        top = max(rows, key=lambda r: r["count"] * r["time_s"])
        compute = sum(r["count"] * r["compute_s"] for r in rows)
        memory = sum(r["count"] * r["memory_s"] for r in rows)
        comm = sum(r["count"] * r["comm_s"] for r in rows)
        by_bound: dict[str, float] = {}
        for r in rows:
            by_bound[r["bound"]] = by_bound.get(r["bound"], 0.0) + r["count"] * r["time_s"]
        bound = max(by_bound, key=by_bound.get)
        return {"bound": bound, "dominant_op": top["name"], "dominant_share": top["count"] * top["time_s"] / total,
                "dominant_bound": top["bound"], "compute_s": compute, "memory_s": memory, "comm_s": comm}
