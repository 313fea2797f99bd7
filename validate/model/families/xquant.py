"""Family "xquant" (XQuant decode, fused and materialized, and XQuant-CL's accumulator update): work,
prediction and the crossover context where the step turns compute-bound (seed 000 §3).

Variants (params["variant"]): fused (the roofline op "attention" of xquant:bits=2, the remat ExtraOp merged
into it), materialized ("remat" + "attention" of xquant:bits=2,fused=false), materialized_cublas (that "remat"
split into the three kernels that run it, `cublas_ops`, + "attention"), mha_fused (MHA heads), and acc_update (the
accumulator update's share of XQuant-CL's "remat", `acc_op`). The GPU kernels and the case grid are validate/ops/xquant.

Kernel structure (validate.model.kernel_structure, structure/xquant.json from validate/ops/xquant/structure.py):
where the measured kernel's sm_90 compile is known (fused, mha_fused: fused_kernel; materialized: remat_kernel),
the op that does its work ("attention" of fused, "remat" of materialized) carries what its warps execute:
wgmma FLOPs at the measured GEMM rate, HMMA FLOPs at the mma.sync rate, FP32 and integer instructions at the
measured FMA and integer rates, shared-memory wavefronts; over the launch's program-steps (`launches`), each launch
scaled by its last wave (`kernel_structure.wave_factor`). That op's on-chip time is then the contention between
the SM's warps (`on_chip`: validate.model.contention, exact MVA with the lone-warp chains of
structure/chains.json as the delay), DRAM kept as a ceiling; without a chain the latency ceiling (`latency_s`)
joins the op's max instead. Nothing is fitted to these kernels' timings.
"""

from __future__ import annotations

import numpy as np

from roofline.validation.results_file import Case, measured
from validate.model.predict import decode_model, find_op, find_ops, op_work, predict_op

NAME = "xquant"


def _model(p: dict):
    """The case's one-layer Model (two layers for acc_update: layer 0 the base, layer 1 the delta layer)."""
    name = f"xquant-h{p['num_heads']}-kv{p['num_kv_heads']}-d{p['head_dim']}"
    model = decode_model(name, p["num_heads"], p["num_kv_heads"], p["head_dim"])
    # XQuant-CL: layer 0 is the base, layer 1 the delta layer whose accumulator update is measured
    return model.model_copy(update={"num_layers": 2}) if p["variant"] == "acc_update" else model


def _ops(p: dict) -> list[str]:
    """The roofline ops the case's kernels do (predict_op adds each op's companions, the split-K reduce)."""
    return ["remat", "attention"] if p["variant"] == "materialized" else ["attention"]


def acc_op(p: dict):
    """The accumulator update's share of XQuant-CL's "remat" ExtraOp (roofline.methods.xquant), for the
    batch: delta read (the dX TensorLayout) + accumulator read (e_b/8 L d (rw - 1)) and write (e_b/8 L d),
    dequant FLOPs and integer unpack ops + the 2 L d accumulate, and for GQA the up-projection
    2 L (2d/g) d with U_kv^T's bytes."""
    from roofline.costmodel.ops import Op, traffic
    from roofline.methods import build_cache, parse_method
    from roofline.units import B, L

    model = _model(p)
    (layer,) = [g for g in build_cache(parse_method(p["method"]), model).layers if g.tensors[0].name == "dX"]
    (dx,), (remat,) = layer.tensors, layer.decode_ops
    d = model.hidden_size
    up_bytes = remat.weight_bytes - d * 2 * model.kv_dim * 2  # U_kv^T beside W_kv (0 for MHA)
    up_flops = 2 * L * dx.channels * d if p["up_projection"] else 0
    reads = B * (dx.read_bytes + remat.kv_read_bytes)
    return Op("acc_update", "attention", 1, matmul_flops=B * up_flops, vector_flops=B * (dx.dequant_flops + 2 * L * d),
              int_ops=B * dx.dequant_int_ops,
              traffic=traffic(weights=up_bytes, kv_read=reads, kv_write=B * remat.kv_write_bytes))


# cuBLAS's output tile (rows x columns of K or V per CTA) assumed for its sm_90 bf16 GEMM, one CTA per SM at a time:
# the 128 x 256 tile of CUTLASS's sm_90 warp-specialized kernels with two consumer warpgroups (two m64n256 wgmma
# rows). Only small B L depend on it (fewer tiles than SMs); the bench records the kernel cuBLAS ran ("gemm_kernels")
GEMM_TILE = (128, 256)
WB = 2  # bytes per bf16 element


def cublas_ops(p: dict) -> tuple:
    """materialized_cublas's remat as its three kernels, per batch (sympy in B, L): the "remat" op of
    xquant:bits=2,fused=false split by what each kernel reads and writes, with the traffic between them:
      remat_dequant  latents' codes, scales and fp16 window read (remat's kv_read), bf16 x^K, x^V written
                     (B L 2 r 2 bytes); the layouts' dequant FLOPs and integer ops
      remat_gemm     x^K, x^V read, W_k, W_v read (remat's weights), K, V written (remat's kv_write); remat's matmul
      remat_rope     K read and written in place (B L H_kv d_h 2 bytes each way); remat's vector FLOPs less the
                     dequant's (RoPE's 3 per element)."""
    from dataclasses import replace

    from roofline.costmodel.ops import traffic
    from roofline.lazy import sp
    from roofline.methods import build_cache, parse_method
    from roofline.units import B

    model, method = _model(p), parse_method(p["method"])
    _, remat = find_op(model, method, "remat")
    (layer,) = build_cache(method, model).layers
    latents = B * layer.tokens * sum(t.channels for t in layer.tensors) * WB
    dequant_flops = B * sp.Add(*(t.dequant_flops for t in layer.tensors))
    k_bytes = B * layer.tokens * model.kv_dim * WB
    zero = sp.Integer(0)
    return (replace(remat, name="remat_dequant", matmul_flops=zero, vector_flops=dequant_flops,
                    traffic=traffic(kv_read=remat.traffic["kv_read"], act_write=latents)),
            replace(remat, name="remat_gemm", vector_flops=zero, int_ops=zero,
                    traffic=traffic(weights=remat.traffic["weights"], act_read=latents,
                                    kv_write=remat.traffic["kv_write"])),
            replace(remat, name="remat_rope", matmul_flops=zero, vector_flops=remat.vector_flops - dequant_flops,
                    int_ops=zero, traffic=traffic(kv_read=k_bytes, kv_write=k_bytes)))


def gemm_tiles(p: dict) -> int:
    """CTAs of the batched GEMM: 2 (K and V) x ceil(B L / 128) x ceil(H_kv d_h / 256) (GEMM_TILE)."""
    rows, cols = GEMM_TILE
    return 2 * _cdiv(p["batch"] * p["context"], rows) * _cdiv(p["num_kv_heads"] * p["head_dim"], cols)


def predict_cublas(p: dict, hardware) -> dict:
    """materialized_cublas: `cublas_ops` on the device's roofline (each kernel max(compute, DRAM) + its per-kernel
    time), the GEMM's FLOPs at the measured GEMM ceiling (gemm_flops_per_s) times the wave factor of its tiles
    (kernel_structure.wave_factor: the busiest SM runs ceil(tiles / SMs) tiles, each at one SM's share of the
    ceiling; 1 for whole waves), then "attention" as materialized's. "gemm_ceiling_fraction": the GEMM's FLOPs over
    its predicted time, per measured ceiling; "remat_ceiling_fraction" the same over the three remat kernels."""
    from dataclasses import replace

    from roofline.costmodel import roofline_for
    from roofline.methods import parse_method
    from roofline.units import B, L
    from validate.model import kernel_structure as ks

    model, method = _model(p), parse_method(p["method"])
    dequant, gemm, rope = cublas_ops(p)
    timed = replace(gemm, matmul_flops=gemm.matmul_flops * ks.wave_factor(gemm_tiles(p), hardware.sm_count))
    graph, _ = find_op(model, method, "remat")
    roof = roofline_for(hardware)
    rows = roof.evaluate(replace(graph, ops=(dequant, timed, rope)), {B: p["batch"], L: p["context"]})
    rows = [{**r, "kernels": 1} for r in rows]
    rows.append(predict_op(model, method, "attention", {"B": p["batch"], "L": p["context"]}, hardware))
    names = ("dequant", "gemm", "rope", "attention")
    works = [work_of(op, p) for op in (dequant, gemm, rope)] + [{k: rows[3][k] for k in ("bytes", "flops")}]
    out = {k: sum(r[k] for r in rows) for k in ("time_s", "bytes", "flops", "compute_s", "memory_s")}
    gemm_flops = works[1]["flops"]
    remat_s = sum(r["time_s"] for r in rows[:3])
    peak = roof.matmul_peak("bf16")
    out.update(kernels=sum(r["kernels"] for r in rows), bytes=int(round(out["bytes"])), flops=work(p)["flops"],
               bound=max(rows, key=lambda r: r["time_s"])["bound"], remat_s=remat_s,
               gemm_ceiling_fraction=gemm_flops / rows[1]["time_s"] / peak,
               remat_ceiling_fraction=gemm_flops / remat_s / peak,
               parts={n: {**{k: r[k] for k in ("time_s", "bound", "compute_s", "memory_s")}, **w}
                      for n, r, w in zip(names, rows, works, strict=True)})
    return out


def work_of(op, p: dict) -> dict:
    """Bytes and FLOPs of one op (sympy in B, L) at the case's batch and context."""
    from roofline.units import B, L, evaluate

    at = {B: p["batch"], L: p["context"]}
    return {"bytes": int(round(evaluate(op.bytes, at))), "flops": int(round(evaluate(op.flops, at)))}


def predict_params(p: dict, hardware, structure: bool = True) -> dict:
    """Roofline numbers of the case: the op(s) of a one-layer model (predict_op), summed for materialized;
    acc_update evaluates `acc_op` with the same Roofline. With `structure` (and a known compile), the kernel's
    executed work times its op (`structured`) while "flops" stays the case's algorithmic FLOPs (`work`); the
    executed counts' share is in issue_s and compute_s."""
    from roofline.methods import parse_method

    if p["variant"] == "materialized_cublas":
        return predict_cublas(p, hardware)
    values = {"B": p["batch"], "L": p["context"]}
    model, method = _model(p), parse_method(p["method"])
    if p["variant"] == "acc_update":
        from dataclasses import replace

        from roofline.costmodel import Roofline
        from roofline.units import B, L

        graph, _ = find_op(model, method, "attention")
        row = Roofline(hardware).evaluate(replace(graph, ops=(acc_op(p),)), {B: p["batch"], L: p["context"]})[0]
        rows = [{k: row[k] for k in ("time_s", "bytes", "flops", "bound", "compute_s", "memory_s")}]
    else:
        transforms = [structured(p, name, hardware) if structure else None for name in _ops(p)]
        rows = [predict_op(model, method, name, values, hardware, transform=t)
                for name, t in zip(_ops(p), transforms, strict=True)]
        rows = [on_chip(r, p, name, hardware) if t else r for r, name, t in zip(rows, _ops(p), transforms, strict=True)]
    out = {k: sum(r[k] for r in rows) for k in ("time_s", "bytes", "flops", "compute_s", "memory_s")}
    out["kernels"] = sum(r.get("kernels", 1) for r in rows)  # the kernels these ops time (predict_op)
    out.update(bytes=int(round(out["bytes"])), flops=int(round(out["flops"])),
               bound=max(rows, key=lambda r: r["time_s"])["bound"])
    if p["variant"] != "acc_update" and any(transforms):
        out.update(flops=work(p)["flops"], issue_s=sum(r.get("issue_s", 0.0) for r in rows),
                   latency_s=sum(r.get("latency_s", 0.0) for r in rows),
                   contention_s=sum(r.get("contention_s", 0.0) for r in rows))
    if len(rows) > 1:
        out["parts"] = {name: r for name, r in zip(_ops(p), rows, strict=True)}
    return out


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def launches(p: dict, block_n: int) -> list[tuple[str, int, int]]:
    """(structure name, programs, program-steps) of each launch of the case's structured kernel (launch.py):
    fused: B x H_kv x splits programs over the nq quantized tokens (splits = min(64, nq / BLOCK_N), every program
    whole BLOCK_N steps: B H_kv ceil(nq / BLOCK_N) steps), then one BLOCK_N-token program per block of the fp16
    window; materialized: one program (one step) per BLOCK_N tokens. nq = L (MHA: per-token groups) or the whole
    groups of G tokens, L - L mod G (GQA's K latent, per-channel groups along tokens)."""
    batch, kv, context, group = p["batch"], p["num_kv_heads"], p["context"], p["group_size"]
    mha = p["variant"] == "mha_fused"
    nq = context if mha else context // group * group
    blocks, tail = _cdiv(nq, block_n), _cdiv(context - nq, block_n)
    name = p["variant"]
    if name == "materialized":
        mid = (name, batch * kv * blocks, batch * kv * blocks)
    else:
        splits = max(1, min(64, blocks))
        chunk = _cdiv(_cdiv(max(nq, 1), splits), block_n) * block_n
        mid = (name, batch * kv * _cdiv(nq, chunk), batch * kv * blocks)
    out = [mid] if nq else []
    return out + ([(f"{name}_tail", batch * kv * tail, batch * kv * tail)] if tail else [])


def structured(p: dict, op_name: str, hardware):
    """The transform (op -> op) that puts the measured kernel's executed work into `op_name` (module docstring),
    or None where the case's kernel or its structure at these heads is not known."""
    from dataclasses import replace

    from roofline.costmodel import roofline_for
    from validate.model import kernel_structure as ks

    if p["variant"] == "acc_update" or op_name != {"materialized": "remat"}.get(p["variant"], "attention"):
        return None
    parts = [(ks.structure(NAME, name, p, hardware), programs, steps)
             for name, programs, steps in launches(p, ks.kernels(NAME).get("block_n", 64))]
    if not parts or any(s is None for s, _, _ in parts):
        return None
    scale = roofline_for(hardware).matmul_peak("bf16") / ks.mma_sync_rate(hardware)
    fields = {}
    for s, programs, steps in parts:
        work = ks.executed_work(s, steps * ks.wave_factor(programs, hardware.sm_count), scale, hardware,
                                roofline_for(hardware).matmul_peak("bf16"))
        fields = {k: fields.get(k, 0) + v for k, v in work.items()}
    return lambda op: replace(op, **fields)


def on_chip(row: dict, p: dict, op_name: str, hardware) -> dict:
    """`row` of the structured op `op_name` with its on-chip time from the contention between the SM's warps
    (validate.model.contention: MVA over the launches of `launches`, chains "xquant/<name>"), DRAM kept as a
    ceiling; where a chain is missing, the latency ceiling joins the op's max instead (`latency_s`)."""
    from validate.model import contention
    from validate.model import kernel_structure as ks

    parts = [(name, ks.structure(NAME, name, p, hardware), programs, steps)
             for name, programs, steps in launches(p, ks.kernels(NAME).get("block_n", 64))]
    got = None if any(s is None for _, s, _, _ in parts) else contention.launches_seconds(NAME, parts, hardware)
    if got is None:
        return ks.with_latency(row, latency_s(p, op_name, hardware))
    return contention.with_contention(row, got["seconds"], got["bound"])


def latency_s(p: dict, op_name: str, hardware) -> float:
    """The latency ceiling of the launches `structured` puts into `op_name`: kernel_structure.latency_seconds of
    each (structure, programs, program-steps) of `launches`, chain "xquant/<name>" of structure/chains.json, summed
    (the launches run one after another); 0 where a structure is not known."""
    from validate.model import kernel_structure as ks

    total = 0.0
    for name, programs, steps in launches(p, ks.kernels(NAME).get("block_n", 64)):
        s = ks.structure(NAME, name, p, hardware)
        if s is None:
            return 0.0
        total += ks.latency_seconds(s, f"{NAME}/{name}", steps, programs, hardware)
    return total


def work(params: dict) -> dict:
    """Bytes and FLOPs of the case from the roofline op(s) (`acc_op` for acc_update)."""
    p = params
    if p["variant"] == "acc_update":
        return work_of(acc_op(p), p)
    from roofline.methods import parse_method

    model = _model(p)
    rows = [op_work(model, parse_method(p["method"]), name, {"B": p["batch"], "L": p["context"]}) for name in _ops(p)]
    if p["variant"] == "materialized_cublas":  # _ops: "attention" only; the remat is cublas_ops' three kernels
        rows += [work_of(op, p) for op in cublas_ops(p)]
    return {"bytes": sum(r["bytes"] for r in rows), "flops": sum(r["flops"] for r in rows)}


def predict(case: Case, hardware) -> dict:
    """`predict_params` of the case's params, plus the fixed cost of the launcher's kernels beyond the ops it times
    (the fp16-window TAIL launches: fixed_costs.with_fixed_costs)."""
    from validate.model.fixed_costs import with_fixed_costs

    out = predict_params(case.params, hardware)
    return with_fixed_costs(out, NAME, case.params, hardware, ops=out["kernels"])


def _first_from(ls: np.ndarray, ok: np.ndarray) -> int | None:
    """The smallest ls[i] with ok[j] for every j >= i; None when ok[-1] is False."""
    if not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    return int(ls[bad[-1] + 1]) if bad.size else int(ls[0])


def predicted_crossover(p: dict, hardware, longest: int = 1 << 20) -> dict:
    """From the roofline alone, at the case's batch: `compute_eq_memory`, the smallest context L from which
    on (L = 1 .. `longest`) the op's compute time F_m/peak + F_v/peak_fp32 reaches its memory time
    bytes/bandwidth (Roofline.op_times of the ops `predict` sums: companions and materialized's remat; the layouts'
    roofline, without the kernel structure: predict_params(structure=False)); `knee`, the
    same against max(memory time, launch floor), which is what a measured curve shows when a calibrated
    spec's launch floor exceeds the memory time."""
    from roofline.costmodel import Roofline
    from roofline.methods import parse_method
    from roofline.units import B, L, lambdify

    roof = Roofline(hardware)
    model, method = _model(p), parse_method(p["method"])
    times = [roof.op_times(op) for name in _ops(p) for op in find_ops(model, method, name)[1]]
    fn = lambdify([B, L], [sum(t.compute for t in times), sum(t.memory for t in times)])
    ls = np.arange(1, longest + 1)
    compute, memory = (np.broadcast_to(np.asarray(x, dtype=float), ls.shape) for x in fn(p["batch"], ls))
    return {"compute_eq_memory": _first_from(ls, compute >= memory),
            "knee": _first_from(ls, compute >= np.maximum(memory, roof.latency_floor()))}


def _line(ls: np.ndarray, ts: np.ndarray) -> tuple[float, float, float]:
    """(a, b, sum of squared relative residuals) of t = a + b L, least squares in relative error."""
    design = np.stack([1 / ts, ls / ts], axis=1)
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(ts), rcond=None)
    resid = design @ np.array([a, b]) - 1
    return float(a), float(b), float(resid @ resid)


def measured_crossover(ls, ts) -> dict:
    """Two regimes fitted to measured (context, seconds): for each split k (>= 2 points each side),
    t = a_m + b_m L on the k shortest contexts and t = a_c + b_c L on the rest (`_line`); the split with
    the least total residual wins, and the crossover is where its lines meet, L_x = (a_m - a_c)/(b_c - b_m)
    (None if b_c <= b_m or L_x <= 0)."""
    order = np.argsort(ls)
    ls, ts = np.asarray(ls, dtype=float)[order], np.asarray(ts, dtype=float)[order]
    fits = [(k, _line(ls[:k], ts[:k]), _line(ls[k:], ts[k:])) for k in range(2, len(ls) - 1)]
    if not fits:
        return {"context": None, "points": len(ls)}
    k, (am, bm, em), (ac, bc, ec) = min(fits, key=lambda f: f[1][2] + f[2][2])
    lx = (am - ac) / (bc - bm) if bc > bm else None
    return {"context": lx if lx is not None and lx > 0 else None, "points": len(ls), "split_context": int(ls[k]),
            "memory_line": {"intercept_s": am, "s_per_token": bm},
            "compute_line": {"intercept_s": ac, "s_per_token": bc}, "relative_residual": (em + ec) ** 0.5}


def crossover(results: dict, hardware, variant: str = "fused") -> dict[int, dict]:
    """Per batch of `variant`'s measured cases in `results`: the measured crossover context
    (`measured_crossover`: where the time per step leaves the fitted memory-bound line along the fitted
    compute-bound one), the model's (`predicted_crossover`: where the op's compute time equals its memory
    time, and the knee with the launch floor) and measured / predicted, for a "within 20%" check. Only
    contexts that fill whole groups of G tokens are fitted: an fp16 K window adds its own tail programs."""
    rows = [r for r in measured(results, "xquant") if r["params"]["variant"] == variant
            and r["params"]["context"] % r["params"]["group_size"] == 0]
    out = {}
    for batch in sorted({r["params"]["batch"] for r in rows}):
        mine = [r for r in rows if r["params"]["batch"] == batch]
        fit = measured_crossover([r["params"]["context"] for r in mine], [r["ms"] * 1e-3 for r in mine])
        pred = predicted_crossover(mine[0]["params"], hardware)
        ratio = fit["context"] / pred["compute_eq_memory"] if fit["context"] and pred["compute_eq_memory"] else None
        out[batch] = {"measured": fit["context"], "predicted": pred["compute_eq_memory"],
                      "predicted_knee": pred["knee"], "ratio": ratio, "fit": fit}
    return out
