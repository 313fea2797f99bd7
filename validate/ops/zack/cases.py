"""ZACK's grid (Llama-3.1-8B heads at alternating kept dims), how a case runs on the GPU, the sm_90 compile
specs and the prediction (roofline.validation)."""

from __future__ import annotations

from roofline.methods.zack import POLICIES, assign
from roofline.validation.results_file import Case
from validate.common.testing import relative_rms
from validate.model.families import zack as predicted
from validate.model.families.zack import BLOCK_N, MAX_SPLITS, chunk_tokens, task_costs
from validate.ops.zack import kernel
from validate.ops.zack.kernel import NUM_STAGES, decode, head_table, schedule
from validate.ops.zack.reference import reference

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama-3.1-8B
DIMS = [32, 128] * 4  # kept d_qk = d_v per KV head, alternating: 640 of 1024 channels each
BATCHES = (1, 8, 32)
CONTEXTS = (4096, 32768, 131072)
QUICK = ((1, 4096, "lpt"), (8, 32768, "naive"), (32, 131072, "lpt"), (32, 131072, "naive"))
# H200, LPT, batch 32 at 131K tokens: 2.87 ms at two programs per SM (74 KB of shared memory each at 2 stages),
# 3.30 ms at one (3 stages), 3.23 ms at three; 8 tasks per program 2.79 ms but naive 3.49 ms (4: 3.05 ms);
# 1024-token chunks: 35 vs 43 us at batch 1, 32K tokens, but 21 vs 15 us at 4K, 128 vs 114 us at batch 32, 4K.
PROGRAMS_PER_SM = 2
CHECK_TOKENS = 4096


def layout_bytes(batch: int, context: int, qk_dims: list[int], v_dims: list[int], group: int,
                 chunks: int) -> dict[str, int]:
    """Bytes of the kernel's tensors: the bf16 cache K, V, query and output rows, and the fp32 partials
    of S = `chunks` chunks, 4 B S GROUP (sum_h d_v^h + 2 H_kv) (written by one kernel, read by the merge)."""
    return {"k": 2 * batch * context * sum(qk_dims), "v": 2 * batch * context * sum(v_dims),
            "q": 2 * batch * group * sum(qk_dims), "out": 2 * batch * group * sum(v_dims),
            "partials": 4 * batch * chunks * group * (sum(v_dims) + 2 * len(v_dims))}


def sm90_specs(qk_dims=DIMS, v_dims=DIMS, heads: int = HEADS, num_warps: int = 4,
               num_stages: int = NUM_STAGES) -> list[dict]:
    """validate.common.sm90 compile specs of both kernels at the bench configuration (Llama-3.1-8B heads)."""
    table, group = head_table(qk_dims, v_dims), heads // len(qk_dims)
    ints = ("context", "chunk_tokens", "chunks", "qk_total", "v_total")
    sig = {**{a: "*bf16" for a in ("q_ptr", "k_ptr", "v_ptr")}, **{a: "*fp32" for a in ("m_ptr", "l_ptr", "acc_ptr")},
           **{a: "*i32" for a in ("heads_ptr", "offsets_ptr", "tasks_ptr")}, **{a: "i32" for a in ints},
           "qk_scale": "fp32"}
    merge = {**{a: "*fp32" for a in ("m_ptr", "l_ptr", "acc_ptr")}, "o_ptr": "*bf16", "heads_ptr": "*i32",
             "chunks": "i32", "v_total": "i32"}
    merge_ce = {"KV_HEADS": len(qk_dims), "GROUP": group, "BV": max(table[5]), "CHUNKS_PAD": MAX_SPLITS}
    # the ints but `chunks` are multiples of 16 on a GPU at the bench contexts
    return [{"module": kernel.__name__, "kernel": "zack_decode_kernel", "signature": sig, "num_warps": num_warps,
             "num_stages": num_stages, "constexprs": kernel._constexprs(table, group, BLOCK_N, False),
             "divisible": [a for a in ints if a != "chunks"]},
            {"module": kernel.__name__, "kernel": "merge_kernel", "signature": merge, "num_warps": 4, "num_stages": 2,
             "constexprs": merge_ce}]


def _inputs(p: dict, batch: int, context: int):
    import torch

    group = p["num_heads"] // p["num_kv_heads"]
    qk, v = sum(p["qk_dims"]), sum(p["v_dims"])
    return (torch.randn(batch, group * qk, device="cuda").to(torch.bfloat16),
            torch.randn(batch, context * qk, device="cuda").to(torch.bfloat16),
            torch.randn(batch, context * v, device="cuda").to(torch.bfloat16),
            torch.empty(batch, group * v, dtype=torch.bfloat16, device="cuda"))


def _run(case: Case) -> dict:
    import torch

    from validate.common.harness import eager_ms, graph_ms, input_sets

    p = case.params
    group, scale = p["num_heads"] // p["num_kv_heads"], p["head_dim"] ** -0.5
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    programs = sms * p["programs_per_sm"]
    qk_dims, v_dims = p["qk_dims"], p["v_dims"]
    check_len = min(p["context"], CHECK_TOKENS)
    chunk = chunk_tokens(2, p["num_kv_heads"], check_len, programs)
    q, k, v, out = _inputs(p, 2, check_len)
    sched = schedule(qk_dims, v_dims, group, 2, check_len, chunk, programs, p["policy"], "cuda")
    error = relative_rms(decode(q, k, v, qk_dims, v_dims, check_len, chunk, *sched, scale, out),
                         reference(q, k, v, qk_dims, v_dims, check_len, scale))
    if error > 2e-2:
        raise AssertionError(f"kernel differs from the torch reference: relative RMS {error:.3g}")
    chunk = chunk_tokens(p["batch"], p["num_kv_heads"], p["context"], programs)
    offsets, tasks = schedule(qk_dims, v_dims, group, p["batch"], p["context"], chunk, programs, p["policy"], "cuda")
    heads = torch.tensor(head_table(qk_dims, v_dims), dtype=torch.int32, device="cuda")

    def kernel(q, k, v, out):
        return decode(q, k, v, qk_dims, v_dims, p["context"], chunk, offsets, tasks, scale, out, heads)

    sizes = layout_bytes(p["batch"], p["context"], qk_dims, v_dims, group, 1)
    sets = input_sets(lambda: _inputs(p, p["batch"], p["context"]), sizes["q"] + sizes["k"] + sizes["v"] + sizes["out"])
    costs = task_costs(qk_dims, v_dims, group, p["batch"], p["context"], chunk)
    loads = [sum(costs[t] for t in tasks) for tasks in assign(costs, programs, p["policy"])]
    return {"ms": graph_ms(kernel, sets), **predicted.work(case.params), "eager_ms": eager_ms(kernel, sets),
            "programs": programs, "chunk_tokens": chunk, "tasks": len(costs), "max_load": max(loads),
            "mean_load": sum(loads) / programs, "rotation": len(sets), "check_rel_rms": error}


class ZackAttention:
    name = "zack"

    def cases(self, quick: bool) -> list[Case]:
        grid = QUICK if quick else [(b, n, s) for b in BATCHES for n in CONTEXTS for s in POLICIES]
        return [Case(self.name, f"{s}_b{b}_l{n}", {"batch": b, "context": n, "policy": s, "num_heads": HEADS,
                                                   "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "qk_dims": DIMS,
                                                   "v_dims": DIMS, "programs_per_sm": PROGRAMS_PER_SM})
                for b, n, s in grid]

    def run(self, case: Case) -> dict:
        return _run(case)

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)
