"""Fixed per-kernel costs of a measured case: how many kernels its launcher issues in the timed call, and what
each kernel node of the CUDA graph costs besides its work.

Kernels per case (`kernels`): counted from the launch code (validate/ops/*), one entry of LAUNCHERS per launcher:
the kernels it launches and when (a test reads the launch code and checks the names against this table):
    fp16_attention   flash_decode.decode_attention   split_kernel + reduce_kernel                        = 2
    quant_attention  tiled_launch.fast_decode        fast_decode_kernel (middle, when nq_mid > 0)
                                                     + fast_decode_kernel (TAIL, when L - nq_mid > 0) + reduce_kernel
    xquant           launch.decode (fused, mha_fused) fused_kernel (middle, nq > 0) + fused_kernel (TAIL, window)
                                                     + reduce_kernel
                     launch.materialized_decode      remat_kernel (middle) + remat_kernel (TAIL) + split_kernel
                                                     + reduce_kernel
                     launch.cublas_decode            dequant_kernel (middle) + dequant_kernel (TAIL) + one torch.bmm
                                                     (taken as one cuBLAS kernel) + rope_kernel + split_kernel
                                                     + reduce_kernel
                     launch.acc_update               acc_update_kernel                                   = 1
    zack             zack.kernel.decode              zack_decode_kernel + merge_kernel                   = 2
    aquakv           aquakv.kernel.reconstruct       predict_kernel for K^, then for V^                  = 2
No launcher issues a memset, a torch copy or an allocation kernel inside the timed call (buffers are torch.empty,
allocated by the graph, not launched).

Per-kernel cost (`extra_kernel_time`): the roofline op already pays one fixed cost per op it times (the intercept
alpha of the ceilings family's streaming-read curve t(N) = alpha + N / BW, roofline.costmodel.device's
single-kernel law); a case whose launcher issues more kernels than the ops its prediction sums pays alpha for
each kernel beyond them: extra = (kernels - ops) x alpha. alpha is a streaming kernel's fixed cost in a CUDA
graph (launch, first DRAM access, drain) measured by the ceilings family, never fitted to a family's timings.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

# launcher (module path, function) -> the Triton kernels it launches, in order (the test checks the names)
LAUNCHERS: dict[tuple[str, str], tuple[str, ...]] = {
    ("validate/common/flash_decode.py", "decode_attention"): ("split_kernel", "reduce_kernel"),
    ("validate/ops/quant_attention/tiled_launch.py", "fast_decode"): ("fast_decode_kernel", "fast_decode_kernel",
                                                                      "reduce_kernel"),
    ("validate/ops/xquant/launch.py", "decode"): ("fused_kernel", "fused_kernel", "reduce_kernel"),
    ("validate/ops/xquant/launch.py", "materialize"): ("remat_kernel",),
    ("validate/ops/xquant/launch.py", "dequantize"): ("dequant_kernel",),
    ("validate/ops/xquant/launch.py", "rope_"): ("rope_kernel",),
    ("validate/ops/xquant/launch.py", "acc_update"): ("acc_update_kernel",),
    ("validate/ops/zack/kernel.py", "decode"): ("zack_decode_kernel", "merge_kernel"),
    ("validate/ops/aquakv/kernel.py", "reconstruct"): ("predict_kernel",),
}
STEP_TOKENS = 128  # quant_attention's middle step (tiled_launch.step_tokens: NSUB x R, 128 for every layout)


def _quant_kernels(p: dict) -> int:
    """fast_decode's launches (`_quant_launches`: middle, tail) + the reduce."""
    return sum(_quant_launches(p)) + 1


def _quant_launches(p: dict) -> tuple[bool, bool]:
    """(middle, tail) launches of fast_decode: the middle when nq_mid > 0, the tail when L - nq_mid > 0."""
    nq_mid = quant_middle_tokens(p)
    return nq_mid > 0, p["context"] - nq_mid > 0


def quant_middle_tokens(p: dict) -> int:
    """fast_decode's nq_mid: min(nq_K, nq_V) // STEP_TOKENS x STEP_TOKENS, nq = L - sinks - recent (roofline.kv.quant's
    split)."""
    from roofline.kv.quant import full_precision_tokens
    from roofline.lazy import sp
    from roofline.methods import parse_method
    from validate.model.predict import case_model

    plan, context = parse_method(p["method"]).kv_quant(case_model("kernels", p)), p["context"]
    nq = []
    for q in (plan.k, plan.v):
        sinks, recent = (int(x) for x in full_precision_tokens(q, sp.Integer(context)))
        nq.append(context - sinks - recent)
    return min(nq) // STEP_TOKENS * STEP_TOKENS


def _xquant_kernels(p: dict) -> int:
    """launch.decode / materialized_decode / cublas_decode / acc_update: the structured launches of
    families.xquant.launches (middle when there are quantized tokens, TAIL when there is an fp16 window; cublas:
    dequant_kernel's, the same split), then the reduce (fused), the flash-decode split + reduce (materialized), or
    the GEMM, rope_kernel, split + reduce (materialized_cublas); acc_update is one kernel."""
    if p["variant"] == "acc_update":
        return 1
    return len(_xquant_launches(p)) + {"materialized": 2, "materialized_cublas": 4}.get(p["variant"], 1)


def _xquant_launches(p: dict) -> list[str]:
    """Structure names of the middle and TAIL launches (families.xquant.launches' names, a test checks): the middle
    when there are quantized tokens nq = L (mha_fused: per-token groups) or L - L mod G, TAIL when L - nq > 0."""
    context = p["context"]
    nq = context if p["variant"] == "mha_fused" else context // p["group_size"] * p["group_size"]
    return [p["variant"]] * (nq > 0) + [f"{p['variant']}_tail"] * (context - nq > 0)


def kernels(family: str, params: dict) -> int | None:
    """Kernels the family's launcher issues for one timed call of the case (module docstring); None for a
    family without a launcher table (ceilings: one kernel, predicted from the datasheet)."""
    if family == "quant_attention":
        return _quant_kernels(params)
    if family == "xquant":
        return _xquant_kernels(params)
    return {"fp16_attention": 2, "zack": 2, "aquakv": 2}.get(family)


def extra_kernel_time(family: str, params: dict, ops: int, hardware) -> float:
    """Seconds the case's kernels beyond the `ops` its prediction times cost: (kernels - ops) x alpha, alpha the
    streaming intercept of the hardware's measured section (0 without one: the datasheet roofline)."""
    from roofline.costmodel import roofline_for

    count = kernels(family, params)
    if count is None or count <= ops:
        return 0.0
    return (count - ops) * roofline_for(hardware).kernel_time()


def with_fixed_costs(out: dict, family: str, params: dict, hardware, ops: int | None = None) -> dict:
    """A family's prediction `out` with `extra_kernel_time` added to time_s (ops: the kernels the prediction
    already times, out["kernels"] by default, predict.predict_op's count) and the case's `kernels` recorded; then
    the chain terms (`chain_terms`, block comment below): time = max(time - lone kernels' intercepts, floor) + lone
    + exposed."""
    ops = out.get("kernels", 1) if ops is None else ops
    count = kernels(family, params)
    if count is None or out.get("time_s") is None:
        return out
    extra = extra_kernel_time(family, params, ops, hardware)
    out = {**out, "time_s": out["time_s"] + extra, "kernels": count, "extra_kernel_s": extra}
    terms = chain_terms(family, params, hardware)
    if terms is not None:
        from roofline.costmodel import roofline_for

        # the lone kernels' share of the roofline is their per-kernel intercept: charged as their own floor instead
        through = out["time_s"] - terms["lone_kernels"] * roofline_for(hardware).kernel_time()
        if terms["floor"] >= through:
            out["bound"] = "latency"
        out.update(chain_floor_s=terms["floor"] + terms["lone"] + terms["exposed"], exposed_s=terms["exposed"],
                   lone_s=terms["lone"], time_s=max(through, terms["floor"]) + terms["lone"] + terms["exposed"])
    return out


# ---- the lone-warp chain floor and the exposed prologue ---------------------------------------------------------
# Each kernel of a small case runs few programs per SM, so nothing hides a program's latencies: the kernel takes at
# least the graph's launch (the ceilings family's launch_empty) plus one warp's dependency chain through one
# program (structure/chains.json: validate.common.chain over the sm_90 compile, with the ceilings family's measured
# latencies), the prologue-to-epilogue pass plus (steps - 1) trips of its loop, plus the DRAIN: a kernel completes
# when its last stores are acknowledged, one L2 round trip after its last warp's last store (chains.json
# local_cycles.l2: validate.ops.ceilings.stalls' dependent load that pays L2, 288 cycles on the H100 and H200), which
# the chain (stores fire and forget) leaves out. Steps per program use the launchers' split caps (MAX_SPLITS = 64
# splits per sequence and KV head), a lower bound on the steps each program walks, and one round of programs.
# The split-K launchers (quant_attention, xquant) size their splits to one wave of resident programs, so every
# program runs its prologue (the first dependent loads at the global latency) and its epilogue (the partials' stores)
# at the same time as every other: while they run, no loop streams bytes or issues work, so the kernel's
# non-loop chain, pass - step (`exposed`), adds to its loop's time instead of overlapping it:
#     t = sum_k exposed_k / f + max(roofline time, sum_k (launch + drain / f + steps_k x step_k / f))
# with a kernel without a loop (reduce, remat, predict) keeping its whole pass inside the max. The roofline's per-op
# intercept (kernel_time: a measured chain of small kernels in a graph) already holds their launch and drain.
# Checked on the lone-program microbenchmark (validate/ops/ceilings/lone.py, nvidia-h100-lone.json), not on any
# case: one read program of 16 KB takes 1594 cycles past the empty kernel, the chain 1265 and the chain with its
# drain 1553; 132 programs take 2.77 us: launch + chain + drain + bytes / bandwidth gives 2.60 us, the max of that
# floor (1.91 us) and the streaming roofline (1.72 us) 1.91 us.
# LONE kernels: dependent launches on one stream run one after another, so the case's time is the sum of each
# kernel's own bound, not the max of the summed roofline and the summed floors. The split-K launchers' tail launches
# (quant_attention ".../tail", xquant "*_tail": a few sinks, leftover and fp16-window tokens, beside a middle launch
# that holds the rest) and the reduce carry almost none of the op's bytes or issue: their bound is their floor
# (launch + pass + drain), added to the other kernels' max(roofline less the lone kernels' per-kernel intercepts,
# their floors):
#     t = max(roofline - n_lone x kernel_time, floor of the others) + sum_lone floor_k + sum exposed_k
# (Nsight Compute times the quant tail alone at 13.6-15.2 us against its 10.8 us floor:
# validate/notes/2026-11-23-session6-device-runs.md).
# fp16_attention's decode law (decode_attention_latency_s) carries its own measured intercept for its split and
# reduce: neither an exposed nor a lone part there.
EXPOSED_FAMILIES = ("quant_attention", "xquant")
MAX_SPLITS = 64
CHAINS = Path(__file__).resolve().parent / "structure" / "chains.json"


@cache
def chains() -> dict:
    """structure/chains.json ({} when absent)."""
    return json.loads(CHAINS.read_text()) if CHAINS.exists() else {}


def _steps(tokens: int, block: int) -> int:
    """Loop steps per program at most MAX_SPLITS programs per (sequence, KV head): ceil(ceil(tokens / block) / 64)."""
    from roofline.units import ceildiv

    return max(1, ceildiv(ceildiv(tokens, block), MAX_SPLITS))


def chain_kernels(family: str, p: dict) -> list[tuple[str, int]] | None:
    """(chains.json kernel name, loop steps per program) of each kernel the case launches (LAUNCHERS' order);
    None where the family's kernels are not known by name."""
    reduce = ("fp16_attention/reduce_kernel", 1)
    if family == "fp16_attention":
        return [("fp16_attention/split_kernel", _steps(p["context"], 128)), reduce]
    if family == "quant_attention":
        mid, tail = _quant_launches(p)
        return [(f"quant_attention/{p['method']}", _steps(p["context"], STEP_TOKENS))] * mid + [
            (f"quant_attention/{p['method']}/tail", 1)] * tail + [reduce]
    if family == "xquant":
        if p["variant"] == "acc_update":
            compiled = {(4, False): 0, (16, True): 1}  # xquant.cases.sm90_specs' two accumulator compiles
            return [(f"xquant/acc_update/{compiled.get((p['accumulator_bits'], p['up_projection']), 'none')}", 1)]
        if p["variant"] == "materialized_cublas":
            return None  # a cuBLAS GEMM among its kernels: no sm_90 compile of it to walk
        out = [(f"xquant/{name}", _steps(p["context"], 64) if name in ("fused", "mha_fused") else 1)
               for name in _xquant_launches(p)]
        split = [("fp16_attention/split_kernel", _steps(p["context"], 128))] if p["variant"] == "materialized" else []
        return out + split + [reduce]
    if family == "zack":
        # not a path: zack_decode_kernel picks one of its five unrolled dim classes per task at run time, and the
        # straight-line walk of chains.json sums all five (20 us against the 14.7 us measured at b1, L 4096)
        return None
    if family == "aquakv":
        return [("aquakv/predict_kernel", 1)] * 2
    return None


def drain_cycles() -> float:
    """Cycles a kernel waits for its last stores after its last instruction: one L2 round trip (chains.json
    local_cycles.l2; 0 without it)."""
    return float(chains().get("local_cycles", {}).get("l2", 0.0))


def _lone(name: str, names: list[str]) -> bool:
    """A launch that carries almost none of the op's work (block comment): the split-K reduce, or a tail launch
    beside its middle launch (in `names`; without one, L below a step, the tail holds all the tokens)."""
    if name.endswith("/reduce_kernel"):
        return True
    middle = name.removesuffix("/tail").removesuffix("_tail")
    return middle != name and middle in names


def chain_terms(family: str, params: dict, hardware) -> dict | None:
    """{"floor", "lone", "exposed", "lone_kernels"} of the block comment above, seconds: each kernel's own floor is
    launch floor + (drain + loop chain) / SM clock, its loop chain steps x step when its prologue is exposed (a loop
    kernel of EXPOSED_FAMILIES, not lone: `exposed` += (pass - step) / SM clock), else pass + (steps - 1) x step;
    a lone kernel (`_lone`, EXPOSED_FAMILIES) adds its floor to "lone" (and counts in lone_kernels), every other to
    "floor". None where a kernel's chain is not in chains.json, the spec has no SM clock, or no measured section
    (the datasheet roofline stays the pure roofline, as extra_kernel_time's alpha is 0 there)."""
    from roofline.costmodel import roofline_for

    doc, kernels_ = chains(), chain_kernels(family, params)
    if getattr(hardware, "measured", None) is None or not doc or kernels_ is None or not hardware.sm_clock_hz \
            or doc.get("architecture") != hardware.architecture:
        return None
    known = doc["kernels"]
    if any(name not in known for name, _ in kernels_):
        return None
    launch, f = roofline_for(hardware).latency_floor(), hardware.sm_clock_hz
    out = {"floor": 0.0, "lone": 0.0, "exposed": 0.0, "lone_kernels": 0}
    names = [name for name, _ in kernels_]
    for name, steps in kernels_:
        k, ours = known[name], family in EXPOSED_FAMILIES
        lone = ours and _lone(name, names)
        if ours and k["step"] is not None and not lone:
            out["exposed"] += (k["pass"] - k["step"]) / f
            loop = steps * k["step"]
        else:
            loop = k["pass"] + (steps - 1) * (k["step"] or 0)
        out["lone" if lone else "floor"] += launch + (loop + drain_cycles()) / f
        out["lone_kernels"] += lone
    return out


def chain_floor(family: str, params: dict, hardware) -> float | None:
    """Seconds: the lone-program bound of the case, floor + lone + exposed of `chain_terms` (a kernel's launch floor
    + (pass + (steps - 1) x step + drain) cycles / SM clock, summed); None where chain_terms is None."""
    terms = chain_terms(family, params, hardware)
    return None if terms is None else terms["floor"] + terms["lone"] + terms["exposed"]
