"""When one GPU is not enough: the fewest GPUs of a kind that hold (model, context, batch).

Candidates are tensor-parallel degrees that divide the attention heads (and the MLP), inside one
scale-up domain first, then pipeline stages (layers split); the first (fewest GPUs, then smaller pp)
whose fullest GPU fits the batch at the context wins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.costmodel.blocks import Shard
from roofline.costmodel.graph import method_cache
from roofline.errors import RooflineError
from roofline.methods import MethodConfig
from roofline.planner.memory import memory_budget, sequence_kv_expr
from roofline.specs import Hardware, Model, Workload

MAX_GPUS = 4096


def tp_degrees(model: Model) -> list[int]:
    """Tensor-parallel degrees 1..num_heads that `Shard.of` accepts: dividing the heads, MLP and expert widths, and
    the KV heads when tp does not exceed them (above, each GPU keeps a replica)."""
    out = []
    for tp in range(1, model.num_heads + 1):
        try:
            Shard.of(model, tp)
        except ValueError:
            continue
        out.append(tp)
    return out


def fits(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig) -> bool:
    """True if `batch` sequences at `context_tokens` fit the KV pool of the fullest GPU under the workload's
    tp and pp: batch x bytes per sequence <= kv_pool (False when the pool is empty or negative)."""
    from roofline.units import L
    cache = method_cache(method, model)
    budget = memory_budget(model, hardware, workload, cache)
    if budget.kv_pool <= 0:
        return False
    need = float(sequence_kv_expr(model, workload, cache).subs(L, workload.context_tokens))
    return workload.batch * need <= budget.kv_pool


def fewest_gpus(model: Model, hardware: Hardware, workload: Workload, method: MethodConfig,
                fits_fn: Callable[[Workload], bool] | None = None) -> dict[str, Any]:
    """Smallest tp x pp (tp within the scale-up domain preferred) holding the workload; `fits_fn(trial)` may
    replace `fits` with an equivalent test (the app's, on compiled capacity kernels)."""
    domain = hardware.scale_up.max_gpus if hardware.scale_up else 1
    candidates = []
    # llama.cpp has no tensor parallelism (engines.llamacpp): its GPUs split the layers only
    for tp in [1] if workload.engine == "llamacpp" else tp_degrees(model):
        for pp in range(1, model.num_layers + 1):
            if tp * pp > MAX_GPUS:
                break
            candidates.append((tp * pp, tp > domain, pp, tp))
    for gpus, _, pp, tp in sorted(candidates):
        trial = workload.model_copy(update={"tp": tp, "pp": pp, "micro_batches": min(pp, workload.batch)})
        if fits_fn(trial) if fits_fn else fits(model, hardware, trial, method):
            gpus = trial.gpus  # x ep: the expert-parallel replicas (Workload.ep) each take tp x pp
            return {"gpus": gpus, "tp": tp, "pp": pp, "nodes": -(-gpus // domain), "workload": trial}
    raise RooflineError(f"model: {model.name} with {method.label()} does not fit {workload.batch} x "
                        f"{workload.context_tokens:,} tokens on up to {MAX_GPUS} {hardware.name} GPUs")
