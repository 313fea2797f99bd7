"""ZACK (seed 003, §4-5): per-head SVD dimensionality compression of K (Q-K pair) and V (V-W_L pair).

Kept dims per KV head come from a uniform removal rate p, an explicit list, or a singular-value profile
with one removal rate r shared by all heads (Eq. 6: keep indices 0..j, j the smallest index whose tail
sum of singular values is <= r of the total). The attention kernel rounds d_qk and d_v up to multiples of 16
and fills the padding with zeros (§6.1, the tensor-core interface): attention FLOPs and the load balance
use the padded dims. The paper states the round-up for the kernel's tiles only, so the cache stores the kept
dims exactly by default (`store_padded` stores them padded, as a kernel reading tiles straight from HBM
would). V's rotation is folded into W_V and W_L (no
runtime cost, smaller projections); for RoPE models Q and K are compressed online after RoPE: a
d_h x d_qk GEMV per query head and per KV head per token (§5.1). GQA: one rotation per KV head serves its
query heads (the paper is silent on GQA; docs/papers/zack.md §2).

Load balance (§5.3): decode runs one task per (sequence, head) of cost s_kv x (d_qk + d_v + 1) (with GQA the
query heads of one KV head run together: one task per KV head);
`assign` list-schedules the tasks onto the SMs in launch order (ZACK/KE) or longest first (LPT); `makespan`
is its longest load.
"""

from __future__ import annotations

import heapq
from functools import lru_cache
from typing import ClassVar, Literal

from pydantic import Field, PositiveInt, model_validator

from roofline.accounting import dtype_bytes
from roofline.kv.builder import CacheShape, Extras, standard_cache
from roofline.kv.layout import CacheModel, ExtraOp
from roofline.lazy import sp
from roofline.methods.base import MethodConfig, preset
from roofline.specs import Model
from roofline.units import round_up


class Zack(MethodConfig):
    """ZACK (§4-§5): per-KV-head SVD compression of K and V to kept dims (uniform rate p, Eq. 6 rates, or explicit),
    padded to kernel tiles, with naive or longest-first scheduling of the decode tasks."""
    method: ClassVar[str] = "zack"
    family: ClassVar[str] = "reduction"
    summary: ClassVar[str] = "per-head SVD dimension compression of K and V, load-balanced attention"

    qk_rate: float = Field(0.5, ge=0, lt=1, description="Fraction p of Q-K head dims removed (uniform).")
    v_rate: float = Field(0.5, ge=0, lt=1, description="Fraction p of V-W_L head dims removed (uniform).")
    qk_dims: list[PositiveInt] | None = Field(None, description="Explicit kept Q-K dims per KV head.")
    v_dims: list[PositiveInt] | None = Field(None, description="Explicit kept V dims per KV head.")
    qk_singular_values: list[list[float]] | None = Field(
        None, description="Per KV head, singular values of the Q-K pair (descending), for Eq. 6.")
    v_singular_values: list[list[float]] | None = Field(None, description="Per KV head, V-W_L singular values.")
    removal_rate: float = Field(0.1, ge=0, lt=1, description="r of Eq. 6, shared by all heads and layers.")
    round_to: PositiveInt = Field(16, description="Kernel tiles: d_qk, d_v round up to a multiple of this, the "
                                  "padding zero-filled (§6.1: 16, the tensor-core interface).")
    store_padded: bool = Field(False, description="Store K, V padded to round_to too; §6.1 states the round-up "
                               "for the kernel's tiles, not the cache, so by default the kept dims are stored.")
    online_qk: bool = Field(True, description="RoPE model: Q and K compressed online (all catalogue models).")
    scheduling: Literal["lpt", "naive"] = Field("lpt", description="Decode task assignment to SMs (§5.3).")

    @model_validator(mode="after")
    def _one_source_per_pair(self) -> Zack:
        if self.qk_dims is not None and self.qk_singular_values is not None:
            raise ValueError("qk_dims: give kept dims or singular values, not both")
        if self.v_dims is not None and self.v_singular_values is not None:
            raise ValueError("v_dims: give kept dims or singular values, not both")
        return self

    def kept_dims(self, model: Model) -> tuple[list[int], list[int]]:
        """(Q-K dims, V dims) per KV head as the attention kernel runs them: rounded up to `round_to` (at most
        head_dim, §6.1)."""
        qk, v = self.exact_dims(model)
        d_h = model.head_dim
        return ([min(d_h, int(round_up(d, self.round_to))) for d in qk],
                [min(d_h, int(round_up(d, self.round_to))) for d in v])

    def stored_dims(self, model: Model) -> tuple[list[int], list[int]]:
        """(Q-K dims, V dims) per KV head as the cache stores them: exact, or padded if `store_padded`."""
        return self.kept_dims(model) if self.store_padded else self.exact_dims(model)

    def exact_dims(self, model: Model) -> tuple[list[int], list[int]]:
        """(Q-K dims, V dims) per KV head before padding: explicit, from Eq. 6, or round(d_h (1 - p))."""
        if model.mla is not None:
            raise ValueError("method: zack compresses per-head K/V; MLA latents are not modelled")
        d_h, heads = model.head_dim, model.num_kv_heads

        def resolve(field: str, dims, profile, rate) -> list[int]:
            if dims is not None:
                raw = dims
            elif profile is not None:
                raw = [eq6_kept(values, self.removal_rate) for values in profile]
            else:
                raw = [max(1, round(d_h * (1 - rate)))] * heads
            if len(raw) != heads:
                raise ValueError(f"{field}: {len(raw)} entries for the model's {heads} KV heads")
            if max(raw) > d_h:
                raise ValueError(f"{field}: a kept dim {max(raw)} exceeds head_dim {d_h}")
            return list(raw)

        return (resolve("qk_dims", self.qk_dims, self.qk_singular_values, self.qk_rate),
                resolve("v_dims", self.v_dims, self.v_singular_values, self.v_rate))

    def shape(self, model: Model) -> CacheShape:
        """Stored channels (exact or padded) and the kernel's mean head dims (padded)."""
        qk, v = self.kept_dims(model)
        stored_qk, stored_v = self.stored_dims(model)
        return CacheShape(k_channels=sum(stored_qk), v_channels=sum(stored_v),
                          qk_head_dim=sp.Rational(sum(qk), len(qk)), v_head_dim=sp.Rational(sum(v), len(v)))

    def extras(self, model: Model) -> Extras:
        """Online Q/K compression (RoPE models): 2 d_h d_qk FLOPs per query head and per KV head per token,
        with the per-KV-head rotations R (d_h x d_qk, bf16) read once per step; V folded into W_V, W_L.
        d_qk, d_v here are the stored dims (the zero padding costs the projections nothing)."""
        qk, v = self.stored_dims(model)
        g, d_h = model.gqa_group, model.head_dim
        ops: tuple[ExtraOp, ...] = ()
        if self.online_qk:
            flops = 2 * d_h * sum(qk) * (g + 1)
            rot = d_h * sum(qk) * dtype_bytes("bf16")
            io = (g + 1) * (model.num_kv_heads * d_h + sum(qk)) * 2
            ops = (ExtraOp("qk_compress", matmul_flops=flops, weight_bytes=rot, act_read_bytes=io // 2,
                           act_write_bytes=io - io // 2),)
        return Extras(decode_ops=ops, prefill_ops=ops, v_out_width=sum(v), o_in_width=g * sum(v))

    def cache(self, model: Model, bits: sp.Expr | None = None) -> CacheModel:
        """K and V cached at the kept dims (CacheShape), with the rotation ops and fixed factors of `extras`."""
        return standard_cache(self.method, model, None, bits, shape=self.shape(model), extras=self.extras(model))

    def head_costs(self, model: Model) -> list[int]:
        """d_qk + d_v + 1 of each query head (its KV group's dims): a decode task costs s_kv times this."""
        qk, v = self.kept_dims(model)
        return [qk[h // model.gqa_group] + v[h // model.gqa_group] + 1 for h in range(model.num_heads)]

    def kv_task_costs(self, model: Model) -> list[int]:
        """A decode kernel runs the g query heads of one KV head together (flash-decoding's GQA tiling): one
        task per (sequence, KV head), costing g x (d_qk + d_v + 1) per token (validate/'s zack kernel splits
        each into context chunks, of cost this x the chunk's tokens)."""
        return list(self._task_costs(model))

    def _task_costs(self, model: Model) -> tuple[int, ...]:
        """kv_task_costs as a tuple, kept per (config, model) object pair (both held, so their ids are not
        reused; a plain dict: pydantic's private attributes cost microseconds per access)."""
        key = (id(self), id(model))
        hit = _TASK_COSTS.get(key)
        if hit is not None and hit[0] is self and hit[1] is model:
            return hit[2]
        per_query = self.head_costs(model)
        g = model.gqa_group
        costs = tuple(sum(per_query[h * g:(h + 1) * g]) for h in range(model.num_kv_heads))
        if len(_TASK_COSTS) >= 16:
            _TASK_COSTS.clear()
        _TASK_COSTS[key] = (self, model, costs)
        return costs

    def imbalance(self, model: Model, batch: int, n_sm: int, policy: str | None = None) -> float:
        """Decode makespan over the ideal (total work / SMs, or the longest task) for `batch` equal-length
        sequences, with (sequence, KV head) tasks."""
        return _imbalance(self._task_costs(model), batch, n_sm, policy or self.scheduling)

    def limits(self, model: Model, probe) -> dict:
        """The decode kernel's load imbalance over the SMs (§5.3) at the plan's batch."""
        return {"zack_decode_imbalance": self.imbalance(model, probe.batch, probe.sm_count)}

    def attention_imbalance(self, model: Model, batch: int, sm_count: int) -> float:
        """Heterogeneous heads: the makespan of (sequence, KV head) tasks over the ideal (§5.3)."""
        return self.imbalance(model, batch, sm_count)

    def plan_notes(self, model: Model, probe, data: dict) -> list[str]:
        """Why tokens/s can fall at the max batch: ZACK's decode runs one task per (sequence, KV head) with no
        split of the context (§5.3), so batch x KV heads tasks fill the SMs in whole rounds."""
        sm, heads = probe.sm_count, model.num_kv_heads
        parts = []
        for label, n in (("batch", probe.batch), ("max batch", data["max_batch"])):
            if n:
                rounds = -(-n * heads // sm)
                parts.append(f"at {label} {n:,}, {n * heads:,} tasks take {rounds} round{'s' * (rounds > 1)} "
                             f"(ideal {n * heads / sm:.2f}): attention x{self.imbalance(model, n, sm):.2f}")
        note = (f"decode runs one task per (sequence, KV head) over {sm} SMs, the context unsplit (§5.3); "
                + "; ".join(parts))
        if data["tokens_per_s_max_batch"] < data["tokens_per_s"]:
            note += ", so tok/s at the max batch falls below tok/s at the batch"
        return [note]


def eq6_kept(singular_values: list[float], r: float) -> int:
    """Eq. 6: the smallest j with sum(s[j+1:]) <= r * sum(s); keep j + 1 dims."""
    total = sum(singular_values)
    tail = total
    for j, value in enumerate(singular_values):
        tail -= value
        if tail <= r * total:
            return j + 1
    return len(singular_values)


POLICIES = ("naive", "lpt")
_TASK_COSTS: dict = {}  # (id(config), id(model)) -> (config, model, decode task costs): ZACK._task_costs


def assign(costs: list[float], n_sm: int, policy: str) -> list[list[int]]:
    """Task indices per SM when tasks go one at a time to the least-loaded SM (ties: the lowest index), in
    launch order ('naive', list scheduling) or longest first ('lpt', ZACK §5.3; ties in launch order)."""
    return _list_schedule(costs, n_sm, policy)[0]


def makespan(costs: list[float], n_sm: int, policy: str) -> float:
    """Longest SM load of `assign(costs, n_sm, policy)`."""
    return max(_list_schedule(costs, n_sm, policy)[1])


def _list_schedule(costs: list[float], n_sm: int, policy: str) -> tuple[list[list[int]], list[float]]:
    """(task lists, loads) per SM of `assign`."""
    if policy not in POLICIES:
        raise ValueError(f"policy: {policy!r} is not one of {POLICIES}")
    order = sorted(range(len(costs)), key=lambda i: -costs[i]) if policy == "lpt" else range(len(costs))
    heap = [(0.0, sm) for sm in range(n_sm)]  # (load, SM): sorted, so already a heap
    lists: list[list[int]] = [[] for _ in range(n_sm)]
    for task in order:
        load, sm = heapq.heappop(heap)
        lists[sm].append(task)
        heapq.heappush(heap, (load + costs[task], sm))
    loads = [0.0] * n_sm
    for load, sm in heap:
        loads[sm] = load
    return lists, loads


@lru_cache(maxsize=4096)
def _imbalance(costs: tuple[int, ...], batch: int, n_sm: int, policy: str) -> float:
    """task_imbalance of `batch` copies of the per-sequence task costs (memoized: the planner asks per point)."""
    return task_imbalance(list(costs) * batch, n_sm, policy)


def task_imbalance(costs: list[float], n_sm: int, policy: str) -> float:
    """makespan(costs, n_sm, policy) / max(sum(costs) / n_sm, max(costs)): the longest load over the ideal
    (perfect balance, or the longest task when it exceeds that)."""
    return makespan(costs, n_sm, policy) / max(sum(costs) / n_sm, max(costs))


def prefill_row_blocks(head_costs: list[int], block_rows: int = 64, multiple: int = 16) -> list[int]:
    """§5.3 prefill: head i's row block B_r^i = (d_sum^max / d_sum^i) B_r, rounded up to a multiple of 16,
    so every task carries about the same work."""
    top = max(head_costs)
    return [int(round_up(-(-top * block_rows // c), multiple)) for c in head_costs]


def prefill_makespan(head_costs: list[int], prompt: int, batch: int, n_sm: int, rebalance: bool) -> float:
    """Prefill makespan in units of (rows x d_sum): without rebalancing, 64-row tasks per head in launch
    order; with it, ZACK's equalized row blocks (the last round split evenly, §5.3)."""
    if not rebalance:
        tasks = [64 * c for c in head_costs for _ in range(-(-prompt // 64))] * batch
        return makespan(tasks, n_sm, "naive")
    rows = prefill_row_blocks(head_costs)
    tasks = [r * c for r, c in zip(rows, head_costs, strict=True) for _ in range(-(-prompt // r))] * batch
    full_rounds, last = divmod(len(tasks), n_sm)
    per_task = max(tasks)
    return full_rounds * per_task + (sum(sorted(tasks)[:last]) / n_sm if last else 0)


PRESETS = (
    preset("zack-50", "zack", "ZACK, half of every head's Q-K and V dims removed (uniform p = 0.5)"),
)
