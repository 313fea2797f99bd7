"""Family "zack": decode attention over KV heads with unequal kept dims (ZACK §5.3), persistent split-K.

KV head h keeps d_qk^h key dims and d_v^h value dims (multiples of 16; ZACK's SVD projections are folded
into W_Q/W_K and W_V/W_O, so queries arrive and outputs leave in the reduced dims). The score scale stays
1/sqrt(head_dim): a projection onto kept singular directions preserves q . k.

Flash-decoding with per-head widths: the context of each (sequence b, KV head h) is cut into S chunks of
C tokens (the last shorter); task (b H_kv + h) S + c runs the GROUP query heads of h (rows padded to >= 16
for tl.dot) over chunk c and writes the chunk's fp32 partials, log2 domain:
    m_c = max_t s_t,  l_c = sum_t 2^(s_t - m_c),  acc_c = sum_t 2^(s_t - m_c) v_t,  s_t = q . k_t x scale x log2 e;
`merge_kernel` then gives o = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c, M = max_c m_c (the merge of
attention_fp16.reduce_kernel, whose uniform [B, H, S, D] partials cannot hold per-head widths).

Chunking (`chunk_tokens`): S = clamp(ceil(TASKS_PER_PROGRAM x P / (B x H_kv)), 1, min(MAX_SPLITS,
floor(L / MIN_CHUNK_TOKENS))), C = ceil(L / S) rounded up to BLOCK_N, then S = ceil(L / C): about
TASKS_PER_PROGRAM tasks per program for list scheduling to balance, no chunk under MIN_CHUNK_TOKENS (each
task refills the load pipeline and writes partials), at most MAX_SPLITS (the merge holds them in registers).

A fixed grid of P = PROGRAMS_PER_SM x SMs programs (co-resident: sm90_specs) walks a task list in CSR form:
program p runs tasks[offsets[p]:offsets[p+1]] in order. The host builds the lists (`assign`), list-scheduling
the tasks one at a time onto the least-loaded program, with roofline's decode cost scaled to the chunk,
    cost(b, h, c) = GROUP x n_c x (d_qk^h + d_v^h + 1)      (Zack.kv_task_costs x the chunk's tokens n_c),
taken in launch order ("naive") or longest first ("lpt"): the program loads are those of
roofline.methods.zack.makespan for the same costs.

Prediction (`predict`): roofline's decode "attention" op and its "attention_reduce" for a one-layer model
under Zack(qk_dims, v_dims), timed by Roofline(hardware), then
    time_s = max(max(compute_s, memory_s) x task_imbalance(costs, P, policy), launch floor)
with this kernel's task costs (makespan / max(total / P, longest task); roofline.methods.zack). Bytes: K, V
at the kept dims, q, out, and the partials written and read back, 4 B H S (mean d_v + 2) each way
(`layout_bytes`); roofline counts S = ceil(L / SPLIT_TOKENS), the kernel its own S: at most 1.2% of the bytes
apart over the bench grid.

Layouts (flat bf16, per-head widths): q [B, sum_h GROUP d_qk^h] (head h's GROUP rows of d_qk^h at
GROUP * qk_off[h]), k [B, L * sum_h d_qk^h] (head h's [L, d_qk^h] slab at L * qk_off[h]), v likewise with
d_v, out [B, sum_h GROUP d_v^h]; fp32 partials m, l [B, H_kv, S, GROUP] and acc [B, S * GROUP * sum_h d_v^h]
(head h's [S, GROUP, d_v^h] at S * GROUP * v_off[h]). A tile of a head is padded to the next power of two
>= 16 (its "class"); the kernel holds one compiled body per class pair present and masks the padded channels.
"""

from __future__ import annotations

import heapq
import os

import triton
import triton.language as tl

from roofline.validation.families import zack as predicted
from roofline.validation.families.zack import BLOCK_N, MAX_SPLITS, chunk_tokens, task_costs
from validate.families.attention_fp16 import relative_rms
from validate.families.quant_attention import LOG2E, _online, _operand
from validate.registry import Case, register

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama-3.1-8B
DIMS = [32, 128] * 4  # kept d_qk = d_v per KV head, alternating: 640 of 1024 channels each
BATCHES = (1, 8, 32)
CONTEXTS = (4096, 32768, 131072)
POLICIES = ("naive", "lpt")
QUICK = ((1, 4096, "lpt"), (8, 32768, "naive"), (32, 131072, "lpt"), (32, 131072, "naive"))
# H200, LPT, batch 32 at 131K tokens: 2.87 ms at two programs per SM (74 KB of shared memory each at 2 stages),
# 3.30 ms at one (3 stages), 3.23 ms at three; 8 tasks per program 2.79 ms but naive 3.49 ms (4: 3.05 ms);
# 1024-token chunks: 35 vs 43 us at batch 1, 32K tokens, but 21 vs 15 us at 4K, 128 vs 114 us at batch 32, 4K.
PROGRAMS_PER_SM = 2
CLASSES = (16, 32, 64, 128, 256)
NUM_STAGES = 2
CHECK_TOKENS = 4096


@triton.jit
def _attend(q, k, v, m_out, l_out, acc_out, dqk, dv, start, end, qk_scale, GROUP: tl.constexpr,
            GROUP_PAD: tl.constexpr, BQK: tl.constexpr, BV: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr):
    """One task: the flash partials m, l, acc of the GROUP rows q[j, :dqk] over tokens [start, end)."""
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
    for n0 in range(start, end, BLOCK_N):
        toks = n0 + tl.arange(0, BLOCK_N)
        t_ok = toks < end
        t64 = toks.to(tl.int64)
        kt = tl.load(k + t64[:, None] * dqk + cq[None, :], mask=t_ok[:, None] & cq_ok[None, :], other=0.0)
        s = tl.dot(qt, tl.trans(_operand(kt, UPCAST))) * qk_scale  # [GROUP_PAD, BLOCK_N]
        p, m_i, l_i, acc = _online(s, t_ok, m_i, l_i, acc)
        vt = tl.load(v + t64[:, None] * dv + cv[None, :], mask=t_ok[:, None] & cv_ok[None, :], other=0.0)
        acc += tl.dot(_operand(p, UPCAST), _operand(vt, UPCAST))  # [GROUP_PAD, BV]
    tl.store(m_out + rows, m_i, mask=row_ok)
    tl.store(l_out + rows, l_i, mask=row_ok)
    tl.store(acc_out + rows[:, None] * dv + cv[None, :], acc, mask=row_ok[:, None] & cv_ok[None, :])


@triton.jit
def _by_v_class(q, k, v, m_out, l_out, acc_out, dqk, dv, v_cls, start, end, qk_scale, GROUP: tl.constexpr,
                GROUP_PAD: tl.constexpr, BQK: tl.constexpr, V_SET: tl.constexpr, BLOCK_N: tl.constexpr,
                UPCAST: tl.constexpr):
    """_attend compiled for each V class in V_SET (a bitmask of the classes 16 << i: 16 | 32 | ... | 256)."""
    for i in tl.static_range(5):
        if V_SET & (16 << i):
            if v_cls == (16 << i):
                _attend(q, k, v, m_out, l_out, acc_out, dqk, dv, start, end, qk_scale, GROUP, GROUP_PAD, BQK,
                        16 << i, BLOCK_N, UPCAST)


@triton.jit
def zack_decode_kernel(q_ptr, k_ptr, v_ptr, m_ptr, l_ptr, acc_ptr, heads_ptr, offsets_ptr, tasks_ptr, context,
                       chunk_tokens, chunks, qk_total, v_total, qk_scale, KV_HEADS: tl.constexpr,
                       GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, QK_SET: tl.constexpr, V_SET: tl.constexpr,
                       BLOCK_N: tl.constexpr, UPCAST: tl.constexpr):
    """Program p runs tasks[offsets[p]:offsets[p+1]], task (b H_kv + h) S + c: chunk c of KV head h of
    sequence b; heads [6, KV_HEADS] int32 holds per KV head d_qk, d_v, qk_off, v_off (prefix sums of the
    dims) and the qk and v classes."""
    pid = tl.program_id(0)
    start = tl.load(offsets_ptr + pid)
    end = tl.load(offsets_ptr + pid + 1)
    for i in range(start, end):
        task = tl.load(tasks_ptr + i).to(tl.int64)
        c = task % chunks
        b = task // chunks // KV_HEADS
        h = (task // chunks % KV_HEADS).to(tl.int32)
        # dims and offsets are multiples of 16: rows start 32-byte aligned, loads vectorize
        dqk = tl.multiple_of(tl.load(heads_ptr + h), 16)
        dv = tl.multiple_of(tl.load(heads_ptr + KV_HEADS + h), 16)
        qk_off = tl.multiple_of(tl.load(heads_ptr + 2 * KV_HEADS + h), 16).to(tl.int64)
        v_off = tl.multiple_of(tl.load(heads_ptr + 3 * KV_HEADS + h), 16).to(tl.int64)
        qk_cls = tl.load(heads_ptr + 4 * KV_HEADS + h)
        v_cls = tl.load(heads_ptr + 5 * KV_HEADS + h)
        t0 = (c * chunk_tokens).to(tl.int32)
        t1 = tl.minimum(t0 + chunk_tokens, context)
        q = q_ptr + (b * qk_total + qk_off) * GROUP
        k = k_ptr + (b * qk_total + qk_off) * context
        v = v_ptr + (b * v_total + v_off) * context
        m_out = m_ptr + task * GROUP
        l_out = l_ptr + task * GROUP
        acc_out = acc_ptr + ((b * v_total + v_off) * chunks + c * dv) * GROUP
        for i in tl.static_range(5):
            if QK_SET & (16 << i):
                if qk_cls == (16 << i):
                    _by_v_class(q, k, v, m_out, l_out, acc_out, dqk, dv, v_cls, t0, t1, qk_scale, GROUP, GROUP_PAD,
                                16 << i, V_SET, BLOCK_N, UPCAST)


@triton.jit
def merge_kernel(m_ptr, l_ptr, acc_ptr, o_ptr, heads_ptr, chunks, v_total, KV_HEADS: tl.constexpr,
                 GROUP: tl.constexpr, BV: tl.constexpr, CHUNKS_PAD: tl.constexpr):
    """One (sequence b, query head j = h GROUP + g): o = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c,
    M = max_c m_c, over the S chunks of KV head h; BV = the widest d_v class (columns >= d_v^h masked)."""
    row = tl.program_id(0)
    b = (row // (KV_HEADS * GROUP)).to(tl.int64)
    h = row // GROUP % KV_HEADS
    g = row % GROUP
    dv = tl.multiple_of(tl.load(heads_ptr + KV_HEADS + h), 16)
    v_off = tl.multiple_of(tl.load(heads_ptr + 3 * KV_HEADS + h), 16).to(tl.int64)
    cs = tl.arange(0, CHUNKS_PAD)
    c_ok = cs < chunks
    cols = tl.arange(0, BV)
    col_ok = cols < dv
    task = (b * KV_HEADS + h) * chunks + cs  # [CHUNKS_PAD]
    m = tl.load(m_ptr + task * GROUP + g, mask=c_ok, other=float("-inf"))
    l_c = tl.load(l_ptr + task * GROUP + g, mask=c_ok, other=0.0)
    acc_rows = ((b * v_total + v_off) * chunks + cs * dv) * GROUP + g * dv  # [CHUNKS_PAD]
    acc = tl.load(acc_ptr + acc_rows[:, None] + cols[None, :], mask=c_ok[:, None] & col_ok[None, :], other=0.0)
    w = tl.exp2(m - tl.max(m, axis=0))  # [CHUNKS_PAD]; 0 for the padding
    out = tl.sum(acc * w[:, None], axis=0) / tl.sum(l_c * w, axis=0)  # [BV]
    tl.store(o_ptr + (b * v_total + v_off) * GROUP + g * dv + cols, out.to(o_ptr.dtype.element_ty), mask=col_ok)


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


def schedule(qk_dims, v_dims, group: int, batch: int, context: int, chunk: int, programs: int, policy: str,
             device="cpu"):
    """(offsets, tasks) int32 tensors of the policy's assignment of the chunked tasks."""
    import torch

    offsets, tasks = csr(assign(task_costs(qk_dims, v_dims, group, batch, context, chunk), programs, policy))
    return (torch.tensor(offsets, dtype=torch.int32, device=device),
            torch.tensor(tasks, dtype=torch.int32, device=device))


def partials(batch: int, group: int, v_dims: list[int], chunks: int, device) -> tuple:
    """The fp32 flash partials (layouts above): m, l [B * H_kv * S * GROUP], acc [B * S * GROUP * sum d_v]."""
    import torch

    m = torch.empty(batch * len(v_dims) * chunks * group, dtype=torch.float32, device=device)
    return m, torch.empty_like(m), torch.empty(batch * chunks * group * sum(v_dims), dtype=torch.float32, device=device)


def _constexprs(table: list[list[int]], group: int, block_n: int, upcast: bool) -> dict:
    """zack_decode_kernel's compile-time parameters (decode and sm90_specs share them)."""
    return {"KV_HEADS": len(table[0]), "GROUP": group, "GROUP_PAD": max(16, triton.next_power_of_2(group)),
            "QK_SET": sum(set(table[4])), "V_SET": sum(set(table[5])), "BLOCK_N": block_n, "UPCAST": upcast}


def decode(q, k, v, qk_dims: list[int], v_dims: list[int], context: int, chunk: int, offsets, tasks,
           sm_scale: float, out=None, heads=None, block_n: int = BLOCK_N, num_warps: int = 4,
           num_stages: int = NUM_STAGES):
    """softmax(q k^T * sm_scale) v per query head over its KV head's reduced dims (layouts above), the
    context in chunks of `chunk` tokens; q [B, GROUP * sum d_qk] bf16 -> out [B, GROUP * sum d_v].
    `heads`: the head table on q's device (made here when None; pass it in to launch inside a CUDA graph)."""
    import torch

    batch = q.shape[0]
    kv_heads, qk_total, v_total = len(qk_dims), sum(qk_dims), sum(v_dims)
    group = q.shape[1] // qk_total
    chunks = triton.cdiv(context, chunk)
    assert q.shape[1] == group * qk_total and k.numel() == batch * context * qk_total and chunks <= MAX_SPLITS
    assert v.numel() == batch * context * v_total and all(x.is_contiguous() for x in (q, k, v))
    table = head_table(qk_dims, v_dims)
    heads = torch.tensor(table, dtype=torch.int32, device=q.device) if heads is None else heads
    out = q.new_empty(batch, group * v_total) if out is None else out
    m, l_c, acc = partials(batch, group, v_dims, chunks, q.device)
    upcast = os.environ.get("TRITON_INTERPRET", "0") == "1"  # the interpreter has no bf16 tl.dot
    # one program: its CSR task list, each task all `group` query heads of one KV head over one chunk
    grid = (offsets.numel() - 1,)
    zack_decode_kernel[grid](q, k, v, m, l_c, acc, heads, offsets, tasks, context, chunk, chunks, qk_total, v_total,
                             sm_scale * LOG2E, **_constexprs(table, group, block_n, upcast), num_warps=num_warps,
                             num_stages=num_stages)
    # one program: one query head of one sequence, merging its chunks
    grid = (batch * kv_heads * group,)
    merge_kernel[grid](m, l_c, acc, out, heads, chunks, v_total, KV_HEADS=kv_heads, GROUP=group,
                       BV=max(table[5]), CHUNKS_PAD=max(2, triton.next_power_of_2(chunks)), num_warps=4)
    return out


def split_heads(flat, dims: list[int], rows: int) -> list:
    """Per KV head h, the [B, rows, d^h] view of a flat [B, rows * sum d] tensor (q: rows = GROUP, k: L)."""
    batch = flat.shape[0]
    flat = flat.reshape(batch, -1)
    offs = [rows * sum(dims[:h]) for h in range(len(dims) + 1)]
    return [flat[:, offs[h]:offs[h + 1]].view(batch, rows, d) for h, d in enumerate(dims)]


def reference(q, k, v, qk_dims: list[int], v_dims: list[int], context: int, sm_scale: float):
    """The same attention in fp32 torch, one KV head at a time."""
    import torch

    group = q.shape[1] // sum(qk_dims)
    parts = []
    for qh, kh, vh in zip(split_heads(q, qk_dims, group), split_heads(k, qk_dims, context),
                          split_heads(v, v_dims, context), strict=True):
        scores = torch.einsum("bgd,btd->bgt", qh.float(), kh.float()) * sm_scale
        parts.append(torch.einsum("bgt,btd->bgd", scores.softmax(-1), vh.float()).flatten(1))
    return torch.cat(parts, dim=1)  # [B, GROUP * sum d_v], head after head


def layout_bytes(batch: int, context: int, qk_dims: list[int], v_dims: list[int], group: int,
                 chunks: int) -> dict[str, int]:
    """Bytes of the kernel's tensors: the bf16 cache K, V, query and output rows, and the fp32 partials
    of S = `chunks` chunks, 4 B S GROUP (sum_h d_v^h + 2 H_kv) (written by one kernel, read by the merge)."""
    return {"k": 2 * batch * context * sum(qk_dims), "v": 2 * batch * context * sum(v_dims),
            "q": 2 * batch * group * sum(qk_dims), "out": 2 * batch * group * sum(v_dims),
            "partials": 4 * batch * chunks * group * (sum(v_dims) + 2 * len(v_dims))}


def sm90_specs(qk_dims=DIMS, v_dims=DIMS, heads: int = HEADS, num_warps: int = 4,
               num_stages: int = NUM_STAGES) -> list[dict]:
    """validate.sm90 compile specs of both kernels at the bench configuration (Llama-3.1-8B heads)."""
    table, group = head_table(qk_dims, v_dims), heads // len(qk_dims)
    ints = ("context", "chunk_tokens", "chunks", "qk_total", "v_total")
    sig = {**{a: "*bf16" for a in ("q_ptr", "k_ptr", "v_ptr")}, **{a: "*fp32" for a in ("m_ptr", "l_ptr", "acc_ptr")},
           **{a: "*i32" for a in ("heads_ptr", "offsets_ptr", "tasks_ptr")}, **{a: "i32" for a in ints},
           "qk_scale": "fp32"}
    merge = {**{a: "*fp32" for a in ("m_ptr", "l_ptr", "acc_ptr")}, "o_ptr": "*bf16", "heads_ptr": "*i32",
             "chunks": "i32", "v_total": "i32"}
    merge_ce = {"KV_HEADS": len(qk_dims), "GROUP": group, "BV": max(table[5]), "CHUNKS_PAD": MAX_SPLITS}
    # the ints but `chunks` are multiples of 16 on a GPU at the bench contexts
    return [{"module": __name__, "kernel": "zack_decode_kernel", "signature": sig, "num_warps": num_warps,
             "num_stages": num_stages, "constexprs": _constexprs(table, group, BLOCK_N, False),
             "divisible": [a for a in ints if a != "chunks"]},
            {"module": __name__, "kernel": "merge_kernel", "signature": merge, "num_warps": 4, "num_stages": 2,
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

    from validate.harness import eager_ms, graph_ms, input_sets

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
        return predicted.predict(case, hardware)
