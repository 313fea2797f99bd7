"""`roofline plan`: for each method on (model, hardware, workload) — max context at the batch, max batch at
the context, the memory breakdown, TTFT, TPOT (at the context and averaged over the generation), tokens/s
at the batch and at max batch, bounds, and the method's own limits.

A MethodPlanner compiles one (model, hardware, method, tp/pp/dtypes/page size) once (phases and capacity:
numeric functions cached by content, roofline.numbers.codegen) and then plans any batch, context, prompt and
generation length from those functions alone: `point` for one workload, `grid` for arrays of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from roofline.catalogue.ceiling_sources import ceilings_label, with_ceilings
from roofline.engines import as_run
from roofline.engines.timing import IDEAL
from roofline.lazy import np
from roofline.methods import MethodConfig
from roofline.numbers import codegen
from roofline.planner.capacity import (
    MAX_SEARCH_CONTEXT,
    CapacityKernel,
    capacity,
    capacity_kernel,
    engine_sequences,
    largest_true,
)
from roofline.planner.memory import MemoryBudget, activation_width, memory_budget, weights_per_gpu
from roofline.planner.phases import PhaseModel, dominant_of
from roofline.planner.probe import Probe
from roofline.specs import Hardware, Model, Workload
from roofline.units import GIB

__all__ = ["MAX_SEARCH_CONTEXT", "largest_true"]

DEFAULT_SCENARIO = {"model": "Llama-3.1-8B", "hardware": "H100-SXM", "batch": 16, "context_tokens": 32_768,
                    "generated_tokens": 1024}
ATTENTION_OPS = ("attention", "attn_qk", "attn_pv")
PLANNERS = 256  # MethodPlanners kept per process (content-keyed LRU)
PROBE_MEMO = 1024  # limits-hook answers kept per planner


@dataclass
class MethodPlan:
    """One method's plan: its label, its family, the figures `roofline plan` reports for it (`data`: SI
    units, fields named by unit) and the warnings raised while computing them."""
    method: str
    family: str
    data: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The plan flat for JSON output: method, family, every `data` field, then warnings."""
        return {"method": self.method, "family": self.family, **self.data, "warnings": self.warnings}


# llama.cpp's one KV stream (timing 22.): the planner's batch prefill is the benchmark's stream a sequence
SPAN_NOTE = ("llamacpp: TTFT (batch) prices each prompt over its own cells, as llama-batched-bench's stream a "
             "sequence; llama-server's slots share one KV stream by default (-kvu), and each prompt ubatch then "
             "computes every cell the stream holds (timing 22., docs/engines.md): `roofline simulate --engine "
             "llamacpp` runs the server's")


class MethodPlanner:
    """One method on one (model, hardware) with the workload's parallelism, dtypes and page size, compiled."""

    def __init__(self, model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
                 flavour: str = "scalar") -> None:
        run = as_run(workload.engine, model)  # the windows the engine runs (SGLang: only where its code takes one)
        self.engine_note = (f"{workload.engine} runs {model.name}'s windowed layers over the whole context (its "
                            f"{model.architecture} takes no window): steps and pool as it runs them"
                            if run is not model else None)
        model = run
        self.model, self.hardware, self.method, self.workload = model, hardware, method, workload
        self.phases = PhaseModel.build(model, hardware, workload, method, flavour=flavour)
        self.capacity: CapacityKernel = capacity_kernel(model, workload, method, flavour)
        self.weights = weights_per_gpu(model, workload)  # depends on tp, pp, ep and the weight dtypes only
        self.width = activation_width(model, workload.tp)
        self.label = method.label()
        self._probe_memo = codegen.LRU(PROBE_MEMO)  # the methods' limits hooks' answers (Probe.memo)

    def budget(self, workload: Workload) -> MemoryBudget:
        """The memory budget at `workload` (its batch, prompt, utilization and reserve)."""
        return memory_budget(self.model, self.hardware, workload, self.capacity, self.weights, self.width)

    def point(self, workload: Workload) -> MethodPlan:
        """Everything `roofline plan` reports for this method at `workload` (same structure as at build)."""
        model, hardware, method, phases = self.model, self.hardware, self.method, self.phases
        budget = self.budget(workload)
        result = MethodPlan(self.label, method.family)
        if budget.kv_pool <= 0:
            raise_no_room(model, hardware, workload, budget)
        b, ctx, prompt, gen = workload.batch, workload.context_tokens, workload.prompt, workload.generated_tokens
        fit = capacity(self.capacity, budget, b, ctx)
        engine = engine_sequences(model, workload, self.label, budget.kv_pool, ctx)
        if engine is not None:  # what the engine runs at once, not the window bytes alone (engine_sequences)
            fit = {**fit, "max_batch": engine["sequences_at_once"], "fits": engine["sequences_at_once"] >= b,
                   "engine_sequences": engine}
        slowdown = self._attention_slowdown(b, ctx)  # step_time's factor, once for both uses at the batch
        summary = phases.decode_summary(b, ctx)  # its total is decode_time(b, ctx) when there is no pipeline
        plain = self.workload.pp == 1 and phases.engine is IDEAL  # the summary's total is the step itself
        tpot = (summary["total_s"] if plain else phases.decode_time(b, ctx)) * slowdown
        tpot_avg = phases.average_decode_time(b, prompt, gen) * slowdown if gen else tpot
        prefill = phases.prefill_summary(b, prompt)
        ttft = prefill["total_s"] if plain else phases.prefill_time(b, prompt)
        mb = fit["max_batch"]
        tpot_max_batch = self.step_time(mb, ctx) if mb else math.inf
        decode = dominant_of(summary)
        effective_bits = float(self.capacity.effective_bits(ctx))
        probe = Probe(model, hardware, workload, ctx, self._probe_memo)
        limits = {"effective_bits": effective_bits, "asymptotic_bits": self.capacity.asymptotic_bits,
                  **method.limits(model, probe)}
        result.data = {
            **fit,
            "effective_bits": effective_bits,
            "memory": {**budget.as_dict(), "kv_parts_bytes": self.capacity.kv_parts(ctx, b, workload.page_tokens)},
            "prefill_s": ttft, "ttft_s": ttft,
            "decode_step_s": tpot, "tpot_s": tpot, "tpot_avg_s": tpot_avg,
            "tokens_per_s": b / tpot, "tokens_per_s_max_batch": mb / tpot_max_batch if mb else 0.0,
            "decode": decode, "prefill": dominant_of(prefill), "bound": decode["bound"],
            "limits": limits,
        }
        if phases.engine is not IDEAL:
            result.data["engine_step"] = engine_step(phases, b, ctx)
        result.data["notes"] = method.plan_notes(model, probe, result.data)  # why the row looks as it does
        result.warnings += _warnings(model, fit, b, ctx) + ([self.engine_note] if self.engine_note else [])
        if phases.engine.fa_span and b > 1:
            result.warnings.append(SPAN_NOTE)
        return result

    def step_time(self, batch: int, context: int) -> float:
        """TPOT: one decode step of `batch` sequences at `context` (pipeline included), with the method's attention
        imbalance (heterogeneous heads, ZACK §5.3) — the one step time the plan, the inversions and the notes use."""
        return self.phases.decode_time(batch, context) * self._attention_slowdown(batch, context)

    def _attention_slowdown(self, batch: int, context: int) -> float:
        """Whole-step factor from the method's attention imbalance: the attention ops' time x (makespan / ideal)."""
        imbalance = self.method.attention_imbalance(self.model, batch, self.hardware.sm_count)
        if imbalance <= 1:
            return 1.0
        kernel = self.phases.kernel("decode")
        times = [(op["name"], op["count"] * t) for op, t in zip(kernel.ops, kernel.op_times(batch, context),
                                                                strict=True)]
        total = sum(t for _, t in times)
        attn = sum(t for name, t in times if name in ATTENTION_OPS)
        return (total + attn * (imbalance - 1)) / total

    def grid(self, batch, context, workload: Workload | None = None) -> dict[str, np.ndarray]:
        """Plans over arrays of batch and context (broadcast together): KV bytes per sequence, max batch,
        whether the batch fits, decode step (TPOT) and tokens/s; needs the 'vector' flavour."""
        if self.phases.flavour != "vector":
            raise ValueError("flavour: grid() needs a MethodPlanner built with flavour='vector'")
        if self.workload.pp != 1:
            raise ValueError("pp: grid() covers pp = 1 (the pipeline schedule is per scalar batch)")
        batch, context = np.broadcast_arrays(np.asarray(batch, dtype=float), np.asarray(context, dtype=float))
        pool = self.budget(workload or self.workload).kv_pool
        need = np.broadcast_to(self.capacity.per_sequence(context), context.shape).astype(float)
        max_batch = np.floor(pool / need) if pool > 0 else np.zeros_like(need)
        step = np.broadcast_to(self.phases.kernel("decode").total(batch, context), batch.shape)
        return {"kv_bytes_per_sequence": need, "max_batch": max_batch, "fits": max_batch >= batch,
                "decode_step_s": step, "tokens_per_s": batch / step}


def engine_step(phases: PhaseModel, batch: int, context: int) -> dict[str, Any]:
    """How the engine's time profile shapes the step at (batch, context): the padded batch its CUDA graph runs,
    the GPU time there, the host work, and whether the host binds (engines.timing)."""
    engine = phases.engine
    padded = engine.padded(batch)
    gpu = phases.kernel("decode").total(padded, context)
    host = engine.host_s(batch)
    return {"engine": engine.engine, "version": engine.version, "padded_batch": padded, "gpu_s": float(gpu),
            "host_s": host, "overlap": engine.overlap, "host_bound": bool(engine.overlap and host > gpu)}


def _warnings(model: Model, fit: dict, batch: int, context: int) -> list[str]:
    out = []
    if not fit["fits"]:
        out.append(f"batch {batch} at context {context:,} does not fit: at most {fit['max_batch']} sequences")
    if context > model.max_position_embeddings:
        out.append(f"context {context:,} exceeds {model.name}'s max_position_embeddings "
                   f"{model.max_position_embeddings:,}")
    mc = fit["max_context"]
    if mc != math.inf and mc > model.max_position_embeddings:
        out.append(f"max context {mc:,} is beyond the model's {model.max_position_embeddings:,} positions")
    return out


_PLANNERS = codegen.LRU(PLANNERS)


def method_planner(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
                   flavour: str = "scalar") -> MethodPlanner:
    """A MethodPlanner for the workload's structure (tp, pp, dtypes, page size, engine and host speed: the engine's
    ceilings, profile and the model as it runs it are built in), shared within the process. The key
    holds the method's label too: equal configs parsed from different SPECs ('aquakv-2', 'aquakv:bits=2') compare
    equal by content, and the planner names its rows by the label it was built with."""
    w = workload
    key = codegen.content_key("planner", model, hardware, method, method.label(), flavour, w.tp, w.pp, w.weight_dtype,
                              w.compute_dtype, w.activation_bytes, w.page_tokens, w.prefill_chunk_tokens,
                              w.micro_batches, w.fusion, w.ep, w.expert_weight_dtype, w.engine, w.host_speed)
    return _PLANNERS.get_or(key, lambda: MethodPlanner(model, hardware, workload, method, flavour))


def plan_method(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig) -> MethodPlan:
    """Everything `roofline plan` reports for one method."""
    return method_planner(model, hardware, workload, method).point(workload)


def raise_no_room(model, hardware, workload, budget: MemoryBudget) -> None:
    """Raises RooflineError: weights + reserve + activations exceed the usable memory of one GPU at this
    tp and pp, so not even context 1 fits; the message gives each term in GiB."""
    from roofline.errors import RooflineError

    raise RooflineError(
        f"model: {model.name} does not fit on {hardware.name} with tp={workload.tp}, pp={workload.pp}: "
        f"weights {budget.weights / GIB:.1f} GiB + reserve {budget.reserve / GIB:.1f} GiB + activations "
        f"{budget.activations / GIB:.1f} GiB exceed the usable {budget.usable / GIB:.1f} GiB (not even context 1); "
        f"raise --tp / --pp, or `roofline plan --fewest-gpus` finds how many GPUs it needs"
    )


def plan(model: Model, hardware: Hardware, workload: Workload, methods: list[MethodConfig],
         ceilings: str | None = None) -> dict[str, Any]:
    """Plans for several methods on one scenario. `ceilings` 'measured' or 'datasheet' first applies
    roofline.catalogue.ceiling_sources.with_ceilings to `hardware` (None: `hardware` as given); the result's
    "ceilings" says which were used and "fusion" the workload's fusion level."""
    asked = ceilings or "measured"
    if ceilings is not None:
        hardware = with_ceilings(hardware, ceilings)
    results = [plan_method(model, hardware, workload, m).as_dict() for m in methods]
    return {**plan_header(model, hardware, workload, asked), "results": results}


def plan_header(model: Model, hardware: Hardware, workload: Workload, asked: str = "measured") -> dict[str, Any]:
    """The plan's fields beside its results (`roofline plan --json` and the dashboard's download share them):
    model, hardware, workload, GPUs, which ceilings and fusion level the step times used."""
    return {"model": model.name, "hardware": hardware.name, "workload": workload.model_dump(mode="json"),
            "gpus": workload.gpus, "ceilings": ceilings_label(hardware, asked), "fusion": workload.fusion}
