"""AQUA-KV's grid (Llama-3.2-3B, d_kv = 1024), how a case runs on the GPU, the sm_90 compile specs and the
prediction (roofline.validation: the roofline op "aquakv_reconstruct")."""

from __future__ import annotations

from roofline.validation.results_file import Case
from validate.common.recipes import MODES, TensorRecipe
from validate.common.testing import relative_rms
from validate.model.families import aquakv as predicted
from validate.ops.aquakv import kernel
from validate.ops.aquakv.kernel import BIG_ROWS, kernel_io, reconstruct, tiles
from validate.ops.aquakv.reference import reference
from validate.ops.aquakv.storage import Predictors, random_layer, storage

KV_HEADS, HEAD_DIM, HEADS, HIDDEN = 8, 128, 24, 3072  # Llama-3.2-3B: d_kv = 8 x 128 = 1024
KV_DIM = KV_HEADS * HEAD_DIM
METHOD = "aquakv-2"
BATCHES = (1, 8)
CONTEXTS = (1024, 4096, 16384, 65536)
QUICK = ((1, 4096), (8, 65536))
CHECK_ROWS = 2048


def sm90_specs(kv_dim: int = KV_DIM, method: str = METHOD) -> list[dict]:
    """validate.common.sm90 compile specs of the K and V launches, small and big tiles, at the bench shape
    (Llama-3.2-3B, d_kv = 1024). "divisible": the arguments the JIT sees as multiples of 16 on a GPU."""
    t = storage(method, kv_dim)
    sig = {"x1_ptr": "*bf16", "x2_ptr": "*bf16", "w_ptr": "*bf16", "bias_ptr": "*bf16", "codes_ptr": "*u8",
           "scale_ptr": "*fp16", "zero_ptr": "*fp16", "out_ptr": "*bf16", "rows": "i32"}
    specs = []
    for rows in (BIG_ROWS - 1, BIG_ROWS):
        bm, bn, bk, warps, stages = tiles(t, kv_dim, rows, interpret=False)
        ce = {"D": kv_dim, "G": t.group, "BITS_A": t.planes[0], "BITS_B": t.planes[1], "MODE": MODES[t.mode],
              "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "UPCAST": False, "PREINIT": False}
        specs += [{"module": kernel.__name__, "kernel": "predict_kernel", "signature": sig, "num_warps": warps,
                   "num_stages": stages, "constexprs": {**ce, "TWO_INPUTS": two}, "divisible": list(sig),
                   "rows": rows, "big_rows": BIG_ROWS}
                  for two in (False, True)]
    return specs


def variant_specs(kv_dim: int = KV_DIM, method: str = METHOD) -> list[dict]:
    """sm90_specs of the kernel variants (validate.ops.aquakv.variant): "preinit", predict_kernel with PREINIT."""
    return [{**spec, "constexprs": {**spec["constexprs"], "PREINIT": True}, "variant": "preinit"}
            for spec in sm90_specs(kv_dim, method)]


def _check(t: TensorRecipe, kv_dim: int, rows: int) -> float:
    """Relative RMS of the kernel against the torch reference on random rows, with the tiles of `rows`."""
    check = BIG_ROWS if rows >= BIG_ROWS else CHECK_ROWS
    k, v, k_prev, v_prev = random_layer(t, 1, check + t.sinks + t.window, kv_dim, "cuda")
    pred = Predictors.random(kv_dim, "cuda")
    got = reconstruct(k, v, k_prev, v_prev, pred)
    want = reference(k, v, k_prev, v_prev, pred)
    error = max(relative_rms(g, w) for g, w in zip(got, want, strict=True))
    if error > 1e-2:
        raise AssertionError(f"kernel differs from the torch reference: relative RMS {error:.3g}")
    return error


def _run(case: Case) -> dict:
    import torch

    from validate.common.harness import eager_ms, graph_ms, rotation_count

    p = case.params
    kv_dim = p["num_kv_heads"] * p["head_dim"]
    t = storage(p["method"], kv_dim)
    rows = p["batch"] * t.split(p["context"])[1]
    error = _check(t, kv_dim, rows)

    def make():
        k, v, k_prev, v_prev = random_layer(t, p["batch"], p["context"], kv_dim, "cuda")
        return k, v, k_prev, v_prev, Predictors.random(kv_dim, "cuda"), torch.empty_like(k_prev), \
            torch.empty_like(v_prev)

    probe = make()
    set_bytes = sum(x.numel() * x.element_size() for xs in kernel_io(*probe).values() for x in xs)
    sets = [probe] + [make() for _ in range(rotation_count(set_bytes) - 1)]
    return {"ms": graph_ms(reconstruct, sets), **predicted.work(case.params), "eager_ms": eager_ms(reconstruct, sets),
            "rows": rows, "rotation": len(sets), "check_rel_rms": error, "tiles": list(tiles(t, kv_dim, rows, False))}


class AquaKVReconstruct:
    name = "aquakv"

    def cases(self, quick: bool) -> list[Case]:
        grid = QUICK if quick else [(b, n) for b in BATCHES for n in CONTEXTS]
        return [Case(self.name, f"{METHOD}_b{b}_l{n}", {"method": METHOD, "batch": b, "context": n, "num_heads": HEADS,
                                                        "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM})
                for b, n in grid]

    def run(self, case: Case) -> dict:
        return _run(case)

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)
