"""Family "quant_attention" (GQA decode attention over a quantized KV cache, dequantization fused): work
and prediction. The GPU kernel and the case grid are validate/ops/quant_attention.

Prediction: the roofline "attention" op (+ its "attention_reduce") of a one-layer model with the case's heads
under the case's method SPEC (params["method"], parsed by roofline.methods.parse_method), decode at B = batch,
L = context. When the kernel's structure is known (validate.model.kernel_structure: the static counts of
the measured kernel's middle loop), the op's on-chip work is the loop's, over B x H_kv x L / step_tokens
program-steps: shared-memory wavefronts and integer instructions instead of the layout's estimates, so the
hierarchical roofline names the shared-memory and integer-issue ceilings of this kernel; its on-chip time is the
contention between the SM's warps (validate.model.contention: exact MVA over issue, tensor core and shared
memory with the loop's chain "quant_attention/<method>" of structure/chains.json as the delay, the middle launch's
programs as its launcher sizes them: `middle_programs`), DRAM kept as a ceiling; without a chain the
latency ceiling (kernel_structure.latency_seconds) joins the op's max instead.
"""

from __future__ import annotations

from roofline.validation.results_file import Case
from validate.model import contention, kernel_structure
from validate.model.fixed_costs import with_fixed_costs
from validate.model.predict import case_model, decode_work, predict_op

NAME = "quant_attention"


def model_and_method(params: dict):
    """(one-layer Model with the case's heads, the method config of params["method"])."""
    from roofline.methods import parse_method

    return case_model("quant-attention", params), parse_method(params["method"])


def work(params: dict) -> dict:
    """Bytes and FLOPs of the case from the roofline "attention" op and its reduce."""
    return decode_work(*model_and_method(params), "attention", params)


def steps(params: dict, s: dict) -> float:
    """Program-steps of the middle loop over the launch: B x H_kv x L / step_tokens."""
    return params["batch"] * params["num_kv_heads"] * params["context"] / s["step_tokens"]


def middle_programs(p: dict, s: dict, hardware) -> int:
    """Programs of fast_decode's middle launch, as its launcher sizes them (validate/ops/quant_attention/tiled_launch:
    choose_splits with WAVES = 1, split_plan): splits = max(1, min(R x SMs // (B x H_kv), nq_mid // step, 64)) per
    (sequence, KV head), R the programs an SM holds (kernel_structure.resident_programs, the launcher's `resident`
    formula), then chunk = ceil(ceil(nq_mid / splits) / step) x step tokens and B x H_kv x ceil(nq_mid / chunk)
    programs: one whole wave of resident programs at most."""
    from roofline.units import ceildiv
    from validate.model.fixed_costs import quant_middle_tokens

    nq_mid, step, heads = quant_middle_tokens(p), s["step_tokens"], p["batch"] * p["num_kv_heads"]
    if nq_mid <= 0:
        return heads
    slots = kernel_structure.resident_programs(s, hardware) * hardware.sm_count
    splits = max(1, min(slots // heads, nq_mid // step, 64))
    chunk = ceildiv(ceildiv(nq_mid, splits), step) * step
    return heads * ceildiv(nq_mid, chunk)


def predict(case: Case, hardware) -> dict:
    """The roofline "attention" op of a one-layer model with these heads and the case's method, decode at
    B = batch, L = context (predict.predict_op), with the measured kernel's loop structure where it is known,
    plus the fixed cost of the launcher's kernels beyond those ops (the tail launch: fixed_costs)."""
    p = case.params
    model, method = model_and_method(p)
    s = kernel_structure.structure(NAME, p["method"], p, hardware)
    transform = (lambda op: kernel_structure.with_loop(op, s, steps(p, s), hardware)) if s else None
    out = predict_op(model, method, "attention", {"B": p["batch"], "L": p["context"]}, hardware, transform=transform)
    if s:
        programs = middle_programs(p, s, hardware)
        got = contention.contention_seconds(s, f"{NAME}/{p['method']}", steps(p, s), programs, hardware)
        if got is None:
            out = kernel_structure.with_latency(out, kernel_structure.latency_seconds(
                s, f"{NAME}/{p['method']}", steps(p, s), programs, hardware))
        else:
            out = contention.with_contention(out, got["seconds"], got["bound"])
        out["resident_programs"] = kernel_structure.resident_programs(s, hardware)
    return with_fixed_costs(out, NAME, p, hardware)
