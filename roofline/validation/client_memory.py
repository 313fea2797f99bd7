"""The decoder client's memory boundary (validate/clients/memory.py) predicted from the specs alone, and compared.

The client holds the weights, a static KV cache of B x L tokens as one K and one V tensor per layer
([B, Hkv, L, Dh] bf16, no pages), and the activations of a prefill chunk of min(L, 8192) tokens; it bisects L in
granules of 256 tokens. Its prediction is the planner's (planner.memory.memory_budget, planner.capacity) at
utilization 1.0 with the client's layout (page_tokens 1, prefill chunk 8192), under three runtime reserves:

  bare      reserve 0: capacity as CUDA reports it, nothing beside weights, KV and activations (the figure
            before the CUDA context was measured)
  context   reserve = the measured CUDA context (Measured.cuda_context_bytes: total - free after CUDA init)
  default   the planner's default reserve on this hardware (the measured context + the 0.5 GiB estimate of
            workspaces, module code, graphs and allocator slack; planner.memory.default_reserve)

and, in each, torch's caching allocator: every K and V tensor over 10 MiB takes its own segment rounded up to
2 MiB (kRoundLarge in c10/cuda/CUDACachingAllocator.cpp), then the answer is floored to the client's granule.
Nothing of the boundary itself enters the prediction.
"""

from __future__ import annotations

from typing import Any

ALLOCATOR_ROUND_BYTES = 2 << 20  # torch CUDACachingAllocator kRoundLarge: large segments round up to 2 MiB
ALLOCATOR_LARGE_BYTES = 10 << 20  # kMinLargeAlloc: from here each allocation is its own rounded segment
RESERVES = ("bare", "context", "default")


def allocator_bytes(size: int) -> int:
    """Device bytes torch's caching allocator reserves for one large tensor of `size` bytes: rounded up to 2 MiB
    (sizes under 10 MiB share 20 MiB segments and are left unrounded here)."""
    if size < ALLOCATOR_LARGE_BYTES:
        return size
    return -(-size // ALLOCATOR_ROUND_BYTES) * ALLOCATOR_ROUND_BYTES


def _reserve(kind: str, hardware) -> int | None:
    if kind == "bare":
        return 0
    if kind == "context":
        if hardware.measured is None or hardware.measured.cuda_context_bytes is None:
            raise ValueError(f"hardware: {hardware.name} has no measured cuda_context_bytes (run python -m "
                             "validate.clients.calibrate)")
        return int(hardware.measured.cuda_context_bytes)
    if kind == "default":
        return None
    raise ValueError(f"reserve: {kind!r} is not one of {', '.join(RESERVES)}")


def predict_boundary(params: dict[str, Any], hardware, reserve: str = "context") -> dict:
    """{"max_context", "planner_context", "kv_pool_bytes", "reserve_bytes"}: the largest multiple of the granule
    whose per-layer K and V tensors, each rounded by the allocator, fit the planner's KV pool."""
    from roofline.catalogue import load_model
    from roofline.methods import parse_method
    from roofline.planner.capacity import capacity, capacity_kernel
    from roofline.planner.memory import memory_budget
    from roofline.specs import Workload

    model = load_model(params["model"])
    batch, chunk, granule = int(params["batch"]), int(params["prefill_chunk"]), int(params["granule"])
    workload = Workload(batch=batch, context_tokens=chunk + 1, prompt_tokens=chunk, prefill_chunk_tokens=chunk,
                        gpu_memory_utilization=1.0, runtime_reserve_bytes=_reserve(reserve, hardware), page_tokens=1)
    method = parse_method("bf16")
    kernel = capacity_kernel(model, workload, method)
    budget = memory_budget(model, hardware, workload, kernel)
    planner_context = capacity(kernel, budget, batch, chunk)["max_context"]
    per_token = batch * model.num_kv_heads * model.head_dim * 2  # one layer's K (or V) bytes per token, bf16

    def fits(n: int) -> bool:
        return 2 * model.num_layers * allocator_bytes(per_token * n) <= budget.kv_pool

    n = int(planner_context) // granule * granule
    while n > 0 and not fits(n):
        n -= granule
    return {"max_context": n, "planner_context": int(planner_context), "kv_pool_bytes": budget.kv_pool,
            "reserve_bytes": budget.reserve}


def compare_memory(results: dict, hardware) -> list[dict]:
    """Per client_memory case and reserve: measured and predicted largest context, signed error (%)."""
    rows = []
    for case in results["cases"]:
        if case.get("family") != "client_memory":
            continue
        for reserve in RESERVES:
            pred = predict_boundary(case["params"], hardware, reserve)
            measured = case["max_context"]
            rows.append({"name": case["name"], "reserve": reserve, "measured": measured, **pred,
                         "error_pct": 100 * (pred["max_context"] - measured) / measured,
                         "above": pred["max_context"] > measured})
    return rows


def render_memory(rows: list[dict]) -> str:
    """Text table of compare_memory's rows."""
    lines = [f"{'memory boundary':30} {'reserve':8} {'res GB':>7} {'meas':>7} {'planner':>8} {'pred':>7} {'err %':>7}"]
    for r in rows:
        lines.append(f"{r['name']:30} {r['reserve']:8} {r['reserve_bytes'] / 1e9:7.3f} {r['measured']:7d} "
                     f"{r['planner_context']:8d} {r['max_context']:7d} {r['error_pct']:+7.2f}"
                     f"{'  ABOVE the real limit' if r['above'] else ''}")
    return "\n".join(lines)
