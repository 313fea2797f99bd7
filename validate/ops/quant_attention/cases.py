"""quant_attention's grid (five presets at Llama-3.1-8B heads), how a case runs on the GPU, and the prediction
(roofline.validation: the roofline "attention" op of the method)."""

from __future__ import annotations

from roofline.validation.results_file import Case
from validate.common.recipes import Recipe, layout_bytes, recipe
from validate.common.testing import relative_rms
from validate.model.families import quant_attention as predicted
from validate.ops.quant_attention import plain
from validate.ops.quant_attention.cache import random_cache
from validate.ops.quant_attention.kernel import HEAD_DIM, HEADS, KV_HEADS, attention, decode
from validate.ops.quant_attention.reference import reference

METHODS = ("kivi-2", "kivi-4", "innerq-base", "innerq-hybrid", "skvq-k2v2")
BATCHES = (1, 8, 32)
CONTEXTS = (4096, 16384, 65536, 131072)
QUICK = (("kivi-2", 1, 16384), ("kivi-4", 8, 65536), ("innerq-base", 32, 4096), ("innerq-hybrid", 1, 131072),
         ("skvq-k2v2", 8, 16384))
CHECK_TOKENS = 4096


def _params(method: str, batch: int, context: int) -> dict:
    return {"method": method, "batch": batch, "context": context, "num_heads": HEADS, "num_kv_heads": KV_HEADS,
            "head_dim": HEAD_DIM}


def _check(r: Recipe, p: dict) -> float:
    """Relative RMS of the kernel against the torch reference at one sequence of <= CHECK_TOKENS tokens."""
    import torch

    cache = random_cache(r, 1, p["num_kv_heads"], min(p["context"], CHECK_TOKENS), p["head_dim"], "cuda", True)
    q = torch.randn(1, p["num_heads"], p["head_dim"], dtype=torch.bfloat16, device="cuda")
    error = relative_rms(attention(q, cache), reference(q, cache))
    if error > 2e-2:
        raise AssertionError(f"kernel differs from the torch reference: relative RMS {error:.3g}")
    return error


def _run(case: Case) -> dict:
    import torch

    from validate.common.harness import eager_ms, graph_ms, input_sets

    p = case.params
    r = recipe(p["method"])
    batch, heads, kv_heads, context, dim = p["batch"], p["num_heads"], p["num_kv_heads"], p["context"], p["head_dim"]
    error = _check(r, p)

    def make():
        # the query in the stored channel order: SKVQ's reorder lives in W_q
        q = torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda")
        return q, random_cache(r, batch, kv_heads, context, dim, "cuda")

    sets = input_sets(make, sum(layout_bytes(p).values()))
    cache = sets[0][1]
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    # the fast kernel (tiled storage) picks its splits from its occupancy; the plain one here
    splits = None if cache.k.tiling else plain.choose_splits(batch * kv_heads, min(cache.k.nq, cache.v.nq), sms)
    out, work = torch.empty_like(sets[0][0]), {}

    def kernel(q, cache):
        return decode(q, cache, splits, out, work)

    ms = graph_ms(kernel, sets)
    return {"ms": ms, **predicted.work(case.params), "eager_ms": eager_ms(kernel, sets),
            "num_splits": splits or work.get("num_splits"), "kernel": "tiled" if cache.k.tiling else "plain",
            "rotation": len(sets), "check_rel_rms": error}


class QuantAttention:
    name = "quant_attention"

    def cases(self, quick: bool) -> list[Case]:
        grid = QUICK if quick else [(m, b, n) for m in METHODS for b in BATCHES for n in CONTEXTS]
        return [Case(self.name, f"{m}_b{b}_l{n}", _params(m, b, n)) for m, b, n in grid]

    def run(self, case: Case) -> dict:
        return _run(case)

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)
