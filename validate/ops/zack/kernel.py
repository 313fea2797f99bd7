"""ZACK's persistent split-K decode kernel over heads of unequal kept dims, its merge, and their launcher
(layouts and the task lists: the family's docstring)."""

from __future__ import annotations

import triton
import triton.language as tl

from roofline.methods.zack import assign
from validate.common.triton_helpers import LOG2E, interpreting, online, operand
from validate.model.families.zack import BLOCK_N, MAX_SPLITS, task_costs

CLASSES = (16, 32, 64, 128, 256)
NUM_STAGES = 2


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
    qt = operand(qt, UPCAST)  # [GROUP_PAD, BQK]
    m_i = tl.full([GROUP_PAD], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, BV], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        toks = n0 + tl.arange(0, BLOCK_N)
        t_ok = toks < end
        t64 = toks.to(tl.int64)
        kt = tl.load(k + t64[:, None] * dqk + cq[None, :], mask=t_ok[:, None] & cq_ok[None, :], other=0.0)
        s = tl.dot(qt, tl.trans(operand(kt, UPCAST))) * qk_scale  # [GROUP_PAD, BLOCK_N]
        p, m_i, l_i, acc = online(s, t_ok, m_i, l_i, acc)
        vt = tl.load(v + t64[:, None] * dv + cv[None, :], mask=t_ok[:, None] & cv_ok[None, :], other=0.0)
        acc += tl.dot(operand(p, UPCAST), operand(vt, UPCAST))  # [GROUP_PAD, BV]
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
    upcast = interpreting()  # the interpreter has no bf16 tl.dot
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
