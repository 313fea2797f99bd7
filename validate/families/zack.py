"""Family "zack": decode attention over KV heads with unequal kept dims (ZACK §5.3), a persistent kernel.

KV head h keeps d_qk^h key dims and d_v^h value dims (multiples of 16; ZACK's SVD projections are folded
into W_Q/W_K and W_V/W_O, so queries arrive and outputs leave in the reduced dims). One task is one
(sequence b, KV head h): the GROUP query heads of h attend over all `context` tokens, flash-style
(online softmax in the log2 domain, rows padded to >= 16 for tl.dot), and write their normalized output.
The score scale stays 1/sqrt(head_dim): a projection onto kept singular directions preserves q . k.

A fixed grid of P programs (PROGRAMS_PER_SM per SM) walks a task list in CSR form: program p runs
tasks[offsets[p]:offsets[p+1]] in order. The host builds the lists (`assign`), list-scheduling the
tasks one at a time onto the least-loaded program, with the cost roofline gives a decode task,
    cost(b, h) = GROUP x s_kv x (d_qk^h + d_v^h + 1)      (roofline.methods.zack.Zack.head_costs, per query head),
taken in launch order (task b * H_kv + h; "naive") or longest first ("lpt"): the program loads are those
of roofline.methods.zack.makespan for the same costs.

Prediction (`predict`): roofline's decode "attention" op of a one-layer model under Zack(qk_dims, v_dims)
(bytes = K, V at the kept dims + q + fp32 split partials, the last < 0.3% here: roofline models split-K
flash-decoding, this kernel whole heads), timed by Roofline(hardware), then
    time_s = max(max(compute_s, memory_s) x Zack.imbalance(model, batch, n_sm, policy), launch floor),
n_sm = the program count. Zack.imbalance = makespan / max(total / n_sm, longest task) over per-query-head
tasks; "kernel_imbalance" (reported, not used) is makespan / (total / n_sm) over this kernel's tasks.

Layouts (flat bf16, per-head widths): q [B, sum_h GROUP d_qk^h] (head h's GROUP rows of d_qk^h at
GROUP * qk_off[h]), k [B, L * sum_h d_qk^h] (head h's [L, d_qk^h] slab at L * qk_off[h]), v likewise with
d_v, out [B, sum_h GROUP d_v^h]. A tile of a head is padded to the next power of two >= 16 (its "class");
the kernel holds one compiled body per class pair present and masks the padded channels.
"""

from __future__ import annotations

import heapq
import os

import triton
import triton.language as tl

from validate.families.attention_fp16 import relative_rms
from validate.families.quant_attention import LOG2E, _online, _operand
from validate.registry import Case, register

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama-3.1-8B
DIMS = [32, 128] * 4  # kept d_qk = d_v per KV head, alternating: 640 of 1024 channels each
BATCHES = (1, 8, 32)
CONTEXTS = (4096, 32768, 131072)
POLICIES = ("naive", "lpt")
QUICK = ((1, 4096, "lpt"), (8, 32768, "naive"), (32, 131072, "lpt"), (32, 131072, "naive"))
# One program per SM. On an H200 two per SM stream 4.1 TB/s at batch 32 (one: 2.6 TB/s), but then each of
# the bench's <= 256 tasks has a program of its own and the policies cannot differ.
PROGRAMS_PER_SM = 1
CLASSES = (16, 32, 64, 128, 256)
BLOCK_N = 128  # tokens per loop step (H200, 132 programs: 4.19 ms vs 5.43 ms at 64, batch 32, 131K tokens)
CHECK_TOKENS = 4096


@triton.jit
def _attend(q, k, v, o, dqk, dv, context, qk_scale, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
            BQK: tl.constexpr, BV: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr):
    """One task: o[j, :dv] = softmax_t(q[j, :dqk] . k[t, :dqk] * scale) v[t, :dv] for the GROUP rows j."""
    rows = tl.arange(0, GROUP_PAD)
    row_ok = rows < GROUP
    cq = tl.arange(0, BQK)
    cv = tl.arange(0, BV)
    cq_ok = cq < dqk  # dims are multiples of 16: masks constant over runs of 16, loads stay vectorized
    cv_ok = cv < dv
    qt = tl.load(q + rows[:, None] * dqk + cq[None, :], mask=row_ok[:, None] & cq_ok[None, :], other=0.0)
    qt = _operand(qt, UPCAST)  # [GROUP_PAD, BQK]
    m_i = tl.full([GROUP_PAD], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, BV], dtype=tl.float32)
    for n0 in range(0, context, BLOCK_N):
        toks = n0 + tl.arange(0, BLOCK_N)
        t_ok = toks < context
        t64 = toks.to(tl.int64)
        kt = tl.load(k + t64[:, None] * dqk + cq[None, :], mask=t_ok[:, None] & cq_ok[None, :], other=0.0)
        s = tl.dot(qt, tl.trans(_operand(kt, UPCAST))) * qk_scale  # [GROUP_PAD, BLOCK_N]
        p, m_i, l_i, acc = _online(s, t_ok, m_i, l_i, acc)
        vt = tl.load(v + t64[:, None] * dv + cv[None, :], mask=t_ok[:, None] & cv_ok[None, :], other=0.0)
        acc += tl.dot(_operand(p, UPCAST), _operand(vt, UPCAST))  # [GROUP_PAD, BV]
    out = acc / l_i[:, None]
    tl.store(o + rows[:, None] * dv + cv[None, :], out.to(o.dtype.element_ty), mask=row_ok[:, None] & cv_ok[None, :])


@triton.jit
def _by_v_class(q, k, v, o, dqk, dv, v_cls, context, qk_scale, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                BQK: tl.constexpr, V_SET: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr):
    """_attend compiled for each V class in V_SET (a bitmask of classes: 16 | 32 | ... | 256)."""
    if V_SET & 16:
        if v_cls == 16:
            _attend(q, k, v, o, dqk, dv, context, qk_scale, GROUP, GROUP_PAD, BQK, 16, BLOCK_N, UPCAST)
    if V_SET & 32:
        if v_cls == 32:
            _attend(q, k, v, o, dqk, dv, context, qk_scale, GROUP, GROUP_PAD, BQK, 32, BLOCK_N, UPCAST)
    if V_SET & 64:
        if v_cls == 64:
            _attend(q, k, v, o, dqk, dv, context, qk_scale, GROUP, GROUP_PAD, BQK, 64, BLOCK_N, UPCAST)
    if V_SET & 128:
        if v_cls == 128:
            _attend(q, k, v, o, dqk, dv, context, qk_scale, GROUP, GROUP_PAD, BQK, 128, BLOCK_N, UPCAST)
    if V_SET & 256:
        if v_cls == 256:
            _attend(q, k, v, o, dqk, dv, context, qk_scale, GROUP, GROUP_PAD, BQK, 256, BLOCK_N, UPCAST)


@triton.jit
def zack_decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, heads_ptr, offsets_ptr, tasks_ptr, context, qk_total, v_total,
                       qk_scale, KV_HEADS: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                       QK_SET: tl.constexpr, V_SET: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr):
    """Program p runs tasks[offsets[p]:offsets[p+1]]; heads [6, KV_HEADS] int32 holds per KV head
    d_qk, d_v, qk_off, v_off (prefix sums of the dims) and the qk and v classes."""
    pid = tl.program_id(0)
    start = tl.load(offsets_ptr + pid)
    end = tl.load(offsets_ptr + pid + 1)
    for i in range(start, end):
        task = tl.load(tasks_ptr + i)
        b = (task // KV_HEADS).to(tl.int64)
        h = task % KV_HEADS
        # dims and offsets are multiples of 16: rows start 32-byte aligned, loads vectorize
        dqk = tl.multiple_of(tl.load(heads_ptr + h), 16)
        dv = tl.multiple_of(tl.load(heads_ptr + KV_HEADS + h), 16)
        qk_off = tl.multiple_of(tl.load(heads_ptr + 2 * KV_HEADS + h), 16).to(tl.int64)
        v_off = tl.multiple_of(tl.load(heads_ptr + 3 * KV_HEADS + h), 16).to(tl.int64)
        qk_cls = tl.load(heads_ptr + 4 * KV_HEADS + h)
        v_cls = tl.load(heads_ptr + 5 * KV_HEADS + h)
        q = q_ptr + (b * qk_total + qk_off) * GROUP
        k = k_ptr + (b * qk_total + qk_off) * context
        v = v_ptr + (b * v_total + v_off) * context
        o = o_ptr + (b * v_total + v_off) * GROUP
        if QK_SET & 16:
            if qk_cls == 16:
                _by_v_class(q, k, v, o, dqk, dv, v_cls, context, qk_scale, GROUP, GROUP_PAD, 16, V_SET, BLOCK_N, UPCAST)
        if QK_SET & 32:
            if qk_cls == 32:
                _by_v_class(q, k, v, o, dqk, dv, v_cls, context, qk_scale, GROUP, GROUP_PAD, 32, V_SET, BLOCK_N, UPCAST)
        if QK_SET & 64:
            if qk_cls == 64:
                _by_v_class(q, k, v, o, dqk, dv, v_cls, context, qk_scale, GROUP, GROUP_PAD, 64, V_SET, BLOCK_N, UPCAST)
        if QK_SET & 128:
            if qk_cls == 128:
                _by_v_class(q, k, v, o, dqk, dv, v_cls, context, qk_scale, GROUP, GROUP_PAD, 128, V_SET, BLOCK_N,
                            UPCAST)
        if QK_SET & 256:
            if qk_cls == 256:
                _by_v_class(q, k, v, o, dqk, dv, v_cls, context, qk_scale, GROUP, GROUP_PAD, 256, V_SET, BLOCK_N,
                            UPCAST)


def dim_class(d: int) -> int:
    """The padded tile width of a head: the next power of two >= 16 (at most 256)."""
    if d % 16 or not 16 <= d <= CLASSES[-1]:
        raise ValueError(f"dims: {d} is not a multiple of 16 in [16, {CLASSES[-1]}] (ZACK rounds to 16, §6.1)")
    return max(16, triton.next_power_of_2(d))


def head_table(qk_dims: list[int], v_dims: list[int]) -> list[list[int]]:
    """Rows of the kernel's int32 head table: d_qk, d_v, qk_off, v_off (exclusive prefix sums), classes."""
    if len(qk_dims) != len(v_dims):
        raise ValueError(f"v_dims: {len(v_dims)} entries for {len(qk_dims)} KV heads")

    def prefix(dims):
        return [sum(dims[:h]) for h in range(len(dims))]

    return [list(qk_dims), list(v_dims), prefix(qk_dims), prefix(v_dims), [dim_class(d) for d in qk_dims],
            [dim_class(d) for d in v_dims]]


def task_costs(qk_dims: list[int], v_dims: list[int], group: int, batch: int) -> list[int]:
    """Per task in launch order (b * H_kv + h): GROUP x (d_qk^h + d_v^h + 1), roofline's per-query-head
    decode cost (Zack.head_costs) summed over the KV head's query heads; s_kv is common to all tasks."""
    return [group * (q + v + 1) for q, v in zip(qk_dims, v_dims, strict=True)] * batch


def assign(costs: list[int], programs: int, policy: str) -> list[list[int]]:
    """Task lists per program: tasks one at a time (launch order, or longest first for 'lpt', ties in
    launch order) onto the least-loaded program (ties: lowest index). The largest load is
    roofline.methods.zack.makespan(costs, programs, policy)."""
    if policy not in POLICIES:
        raise ValueError(f"policy: {policy!r} is not one of {POLICIES}")
    order = sorted(range(len(costs)), key=lambda i: -costs[i]) if policy == "lpt" else range(len(costs))
    loads = [(0, p) for p in range(programs)]  # a heap of (load, program)
    lists: list[list[int]] = [[] for _ in range(programs)]
    for task in order:
        load, p = heapq.heappop(loads)
        lists[p].append(task)
        heapq.heappush(loads, (load + costs[task], p))
    return lists


def csr(lists: list[list[int]]) -> tuple[list[int], list[int]]:
    """(offsets [P + 1], tasks): program p runs tasks[offsets[p]:offsets[p + 1]]."""
    offsets = [0]
    for tasks in lists:
        offsets.append(offsets[-1] + len(tasks))
    return offsets, [t for tasks in lists for t in tasks]


def schedule(qk_dims, v_dims, group: int, batch: int, programs: int, policy: str, device="cpu"):
    """(offsets, tasks) int32 tensors of the policy's assignment."""
    import torch

    offsets, tasks = csr(assign(task_costs(qk_dims, v_dims, group, batch), programs, policy))
    return (torch.tensor(offsets, dtype=torch.int32, device=device),
            torch.tensor(tasks, dtype=torch.int32, device=device))


def decode(q, k, v, qk_dims: list[int], v_dims: list[int], context: int, offsets, tasks, sm_scale: float,
           out=None, heads=None, block_n: int = BLOCK_N, num_warps: int = 4, num_stages: int = 3):
    """softmax(q k^T * sm_scale) v per query head over its KV head's reduced dims (layouts above);
    q [B, GROUP * sum d_qk] bf16 -> out [B, GROUP * sum d_v]. `heads`: the head table on q's device
    (made here when None; pass it in to launch inside a CUDA graph)."""
    import torch

    batch = q.shape[0]
    kv_heads, qk_total, v_total = len(qk_dims), sum(qk_dims), sum(v_dims)
    group = q.shape[1] // qk_total
    assert q.shape[1] == group * qk_total and k.numel() == batch * context * qk_total
    assert v.numel() == batch * context * v_total and all(x.is_contiguous() for x in (q, k, v))
    table = head_table(qk_dims, v_dims)
    heads = torch.tensor(table, dtype=torch.int32, device=q.device) if heads is None else heads
    out = q.new_empty(batch, group * v_total) if out is None else out
    upcast = os.environ.get("TRITON_INTERPRET", "0") == "1"  # the interpreter has no bf16 tl.dot
    # one program: its CSR task list, each task all `group` query heads of one KV head of one sequence
    grid = (offsets.numel() - 1,)
    zack_decode_kernel[grid](q, k, v, out, heads, offsets, tasks, context, qk_total, v_total, sm_scale * LOG2E,
                             KV_HEADS=kv_heads, GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)),
                             QK_SET=sum(set(table[4])), V_SET=sum(set(table[5])), BLOCK_N=block_n, UPCAST=upcast,
                             num_warps=num_warps, num_stages=num_stages)
    return out


def split_heads(flat, dims: list[int], rows: int) -> list:
    """Per KV head h, the [B, rows, d^h] view of a flat [B, rows * sum d] tensor (q: rows = GROUP, k: L)."""
    batch = flat.shape[0]
    flat = flat.reshape(batch, -1)
    offs = [rows * sum(dims[:h]) for h in range(len(dims) + 1)]
    return [flat[:, offs[h]:offs[h + 1]].view(batch, rows, d) for h, d in enumerate(dims)]


def join_heads(parts: list):
    """Inverse of split_heads: [B, rows, d^h] per head -> [B, rows * sum d], head after head."""
    import torch

    return torch.cat([p.reshape(p.shape[0], -1) for p in parts], dim=1).contiguous()


def reference(q, k, v, qk_dims: list[int], v_dims: list[int], context: int, sm_scale: float):
    """The same attention in fp32 torch, one KV head at a time."""
    import torch

    group = q.shape[1] // sum(qk_dims)
    parts = []
    for qh, kh, vh in zip(split_heads(q, qk_dims, group), split_heads(k, qk_dims, context),
                          split_heads(v, v_dims, context), strict=True):
        scores = torch.einsum("bgd,btd->bgt", qh.float(), kh.float()) * sm_scale
        parts.append(torch.einsum("bgt,btd->bgd", scores.softmax(-1), vh.float()))
    return join_heads(parts)


def layout_bytes(batch: int, context: int, qk_dims: list[int], v_dims: list[int], group: int) -> dict[str, int]:
    """Bytes of the kernel's tensors (bf16): the cache K, V and the query and output rows."""
    return {"k": 2 * batch * context * sum(qk_dims), "v": 2 * batch * context * sum(v_dims),
            "q": 2 * batch * group * sum(qk_dims), "out": 2 * batch * group * sum(v_dims)}


def sm90_spec(qk_dims=DIMS, v_dims=DIMS, heads: int = HEADS, num_warps: int = 4, num_stages: int = 3) -> dict:
    """A validate.sm90 compile spec of the kernel at the bench configuration (Llama-3.1-8B heads)."""
    table = head_table(qk_dims, v_dims)
    group = heads // len(qk_dims)
    sig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "heads_ptr": "*i32",
           "offsets_ptr": "*i32", "tasks_ptr": "*i32", "context": "i32", "qk_total": "i32", "v_total": "i32",
           "qk_scale": "fp32"}
    ce = {"KV_HEADS": len(qk_dims), "GROUP": group, "GROUP_PAD": max(16, triton.next_power_of_2(group)),
          "QK_SET": sum(set(table[4])), "V_SET": sum(set(table[5])), "BLOCK_N": BLOCK_N, "UPCAST": False}
    divisible = [a for a in sig if a not in ("qk_scale",)]  # multiples of 16 on a GPU (the bench contexts)
    return {"module": __name__, "kernel": "zack_decode_kernel", "signature": sig, "num_warps": num_warps,
            "num_stages": num_stages, "constexprs": ce, "divisible": divisible}


def _model_and_method(p: dict):
    from roofline.methods.zack import Zack
    from validate.predict import decode_model

    name = f"zack-h{p['num_heads']}-kv{p['num_kv_heads']}-d{p['head_dim']}"
    return (decode_model(name, p["num_heads"], p["num_kv_heads"], p["head_dim"]),
            Zack(qk_dims=p["qk_dims"], v_dims=p["v_dims"], scheduling=p["policy"]))


def case_work(case: Case) -> dict:
    """Bytes and FLOPs from the roofline "attention" op; None without roofline (GPU box)."""
    try:
        from validate.predict import op_work

        m, method = _model_and_method(case.params)
    except ImportError as err:
        return {"bytes": None, "flops": None, "work": f"not computed here ({err})"}
    return op_work(m, method, "attention", {"B": case.params["batch"], "L": case.params["context"]})


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

    from validate.harness import eager_ms, graph_ms, input_sets

    p = case.params
    group, scale = p["num_heads"] // p["num_kv_heads"], p["head_dim"] ** -0.5
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    programs = sms * p["programs_per_sm"]
    qk_dims, v_dims = p["qk_dims"], p["v_dims"]
    check_len = min(p["context"], CHECK_TOKENS)
    q, k, v, out = _inputs(p, 2, check_len)
    sched = schedule(qk_dims, v_dims, group, 2, programs, p["policy"], "cuda")
    error = relative_rms(decode(q, k, v, qk_dims, v_dims, check_len, *sched, scale, out),
                         reference(q, k, v, qk_dims, v_dims, check_len, scale))
    if error > 2e-2:
        raise AssertionError(f"kernel differs from the torch reference: relative RMS {error:.3g}")
    offsets, tasks = schedule(qk_dims, v_dims, group, p["batch"], programs, p["policy"], "cuda")
    heads = torch.tensor(head_table(qk_dims, v_dims), dtype=torch.int32, device="cuda")

    def kernel(q, k, v, out):
        return decode(q, k, v, qk_dims, v_dims, p["context"], offsets, tasks, scale, out, heads)

    sizes = layout_bytes(p["batch"], p["context"], qk_dims, v_dims, group)
    sets = input_sets(lambda: _inputs(p, p["batch"], p["context"]), sum(sizes.values()))
    costs = task_costs(qk_dims, v_dims, group, p["batch"])
    loads = [sum(costs[t] for t in tasks) for tasks in assign(costs, programs, p["policy"])]
    return {"ms": graph_ms(kernel, sets), **case_work(case), "eager_ms": eager_ms(kernel, sets), "programs": programs,
            "max_load": max(loads), "mean_load": sum(loads) / programs, "rotation": len(sets), "check_rel_rms": error}


def predict_time(pred: dict, imbalance: float, floor_s: float) -> float:
    """time_s = max(max(compute_s, memory_s) x imbalance, launch floor): the op's roofline time, stretched
    by the makespan over the ideal, then floored as roofline floors every kernel."""
    return max(max(pred["compute_s"], pred["memory_s"]) * imbalance, floor_s)


@register
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
        """The roofline "attention" op of a one-layer model with these heads under Zack(qk_dims, v_dims),
        decode at B = batch, L = context, times Zack.imbalance(model, batch, n_sm, policy) with n_sm = the
        kernel's program count, hardware.sm_count x programs_per_sm (`predict_time`). Also, not used for
        time_s: "kernel_imbalance" = makespan / (total / n_sm) of the kernel's own tasks, one per
        (sequence, KV head) with the summed roofline cost of its query heads (makespan, head_costs)."""
        from roofline.costmodel import Roofline
        from roofline.methods.zack import makespan
        from validate.predict import predict_op

        p = case.params
        m, method = _model_and_method(p)
        n_sm = hardware.sm_count * p["programs_per_sm"]
        pred = predict_op(m, method, "attention", {"B": p["batch"], "L": p["context"]}, hardware)
        imbalance = method.imbalance(m, p["batch"], n_sm, p["policy"])
        floor = Roofline(hardware).latency_floor()
        per_query, g = method.head_costs(m), m.gqa_group
        costs = [sum(per_query[h * g:(h + 1) * g]) for h in range(m.num_kv_heads)] * p["batch"]
        kernel = makespan(costs, n_sm, p["policy"]) / (sum(costs) / n_sm)
        return {**pred, "time_s": predict_time(pred, imbalance, floor), "balanced_time_s": pred["time_s"],
                "imbalance": imbalance, "n_sm": n_sm, "kernel_imbalance": kernel,
                "kernel_makespan_time_s": predict_time(pred, kernel, floor)}
