"""Family "zack" (decode attention over KV heads with unequal kept dims, persistent split-K): work, the
kernel's chunking and task costs, and the prediction.

Chunking (`chunk_tokens`): S = clamp(ceil(TASKS_PER_PROGRAM x P / (B x H_kv)), 1, min(MAX_SPLITS,
floor(L / MIN_CHUNK_TOKENS))), C = ceil(L / S) rounded up to BLOCK_N, then S = ceil(L / C). The GPU kernel
(validate/ops/zack) chunks with these same functions, so its task list and the prediction's agree.

Prediction: roofline's decode "attention" op and its "attention_reduce" for a one-layer model under
Zack(qk_dims, v_dims), timed by Roofline(hardware), then
    time_s = max(max(compute_s, memory_s) x task_imbalance(costs, P, policy), launch floor)
with the kernel's task costs (roofline.methods.zack.task_imbalance: makespan / max(total / P, longest task)).
"""

from __future__ import annotations

from roofline.units import ceildiv
from roofline.validation.results_file import Case
from validate.model.fixed_costs import with_fixed_costs
from validate.model.predict import case_model, decode_work, predict_op

NAME = "zack"
# H200, LPT, batch 32 at 131K tokens: 2.87 ms at two programs per SM; 8 tasks per program 2.79 ms but naive 3.49 ms
# (4: 3.05 ms); 1024-token chunks: 35 vs 43 us at batch 1, 32K tokens, but 21 vs 15 us at 4K, 128 vs 114 us at
# batch 32, 4K (validate/ops/zack/cases.py keeps the launch side of these measurements).
TASKS_PER_PROGRAM = 4
MIN_CHUNK_TOKENS = 512
MAX_SPLITS = 64  # chunks per (sequence, KV head): the merge kernel holds them in registers
BLOCK_N = 128  # tokens per loop step (64 tokens at 3 stages: within 5% either way)


def chunk_tokens(batch: int, kv_heads: int, context: int, programs: int) -> int:
    """Tokens per chunk C: S = clamp(ceil(TASKS_PER_PROGRAM x P / (B x H_kv)), 1, min(MAX_SPLITS,
    floor(L / MIN_CHUNK_TOKENS))) chunks per (sequence, KV head), then C = ceil(L / S) rounded up to a
    multiple of BLOCK_N (whole tiles but the last); the kernel runs S = ceil(L / C) chunks."""
    most = max(1, min(MAX_SPLITS, context // MIN_CHUNK_TOKENS))
    splits = max(1, min(ceildiv(TASKS_PER_PROGRAM * programs, batch * kv_heads), most))
    return ceildiv(ceildiv(context, splits), BLOCK_N) * BLOCK_N


def task_costs(qk_dims: list[int], v_dims: list[int], group: int, batch: int, context: int,
               chunk: int) -> list[int]:
    """Per task (b H_kv + h) S + c: GROUP x n_c x (d_qk^h + d_v^h + 1), n_c = min(C, L - c C) the chunk's
    tokens: roofline's per-query-head decode cost (Zack.head_costs) summed over the KV head's query heads."""
    tokens = [min(chunk, context - start) for start in range(0, context, chunk)]
    return [group * n * (q + v + 1) for q, v in zip(qk_dims, v_dims, strict=True) for n in tokens] * batch


def model_and_method(params: dict):
    """(one-layer Model with the case's heads, Zack(qk_dims, v_dims, scheduling=policy))."""
    from roofline.methods.zack import Zack

    return (case_model("zack", params),
            Zack(qk_dims=params["qk_dims"], v_dims=params["v_dims"], scheduling=params["policy"]))


def work(params: dict) -> dict:
    """Bytes and FLOPs from the roofline "attention" op and its reduce."""
    return decode_work(*model_and_method(params), "attention", params)


def predict(case: Case, hardware) -> dict:
    """The roofline "attention" op (with its "attention_reduce") of a one-layer model with these heads
    under Zack(qk_dims, v_dims), decode at B = batch, L = context, times the imbalance of the kernel's
    own task list: task_imbalance(task_costs, P, policy) (roofline.methods.zack), P = hardware.sm_count x
    programs_per_sm programs, the chunks of `chunk_tokens` at P: the op's roofline time stretched by the
    makespan over the ideal, then floored as roofline floors every kernel."""
    from roofline.costmodel import Roofline
    from roofline.methods.zack import task_imbalance

    p = case.params
    m, method = model_and_method(p)
    programs = hardware.sm_count * p["programs_per_sm"]
    chunk = chunk_tokens(p["batch"], p["num_kv_heads"], p["context"], programs)
    costs = task_costs(p["qk_dims"], p["v_dims"], m.gqa_group, p["batch"], p["context"], chunk)
    imbalance = task_imbalance(costs, programs, p["policy"])
    pred = predict_op(m, method, "attention", {"B": p["batch"], "L": p["context"]}, hardware)
    time_s = max(max(pred["compute_s"], pred["memory_s"]) * imbalance, Roofline(hardware).latency_floor())
    out = {**pred, "time_s": time_s, "balanced_time_s": pred["time_s"], "imbalance": imbalance,
           "programs": programs, "chunk_tokens": chunk}
    return with_fixed_costs(out, NAME, p, hardware)
