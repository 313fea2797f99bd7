"""The paged KV pool the scheduler allocates from.

An engine's pool is `capacity_bytes` of pages of `page_tokens` tokens. What one sequence of n tokens holds is
`seq_bytes[n]` (whole pages, so it is a step function of n). With a plain format (bf16, fp8) that is
ceil(n / page) x page_bytes; a compressing method stores its packed codes, metadata, full-precision windows
and sinks, so its bytes per page are not uniform in n, and the pool keeps the exact per-sequence table.

Who fills it: `KVPool.from_planner` takes roofline's own memory budget (planner/memory.py: usable memory less
reserve, weights, method parameters and activation workspace) and its per-sequence expression
(sequence_kv_expr: the method's peak reservation at n tokens rounded to pages, this GPU's share of heads and
layers). An engine profile (vLLM's gpu_memory_utilization and profiled activations, SGLang's
mem_fraction_static) fills the same fields with its own conventions through `KVPool.uniform` or the constructor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.methods import CacheModel
from roofline.planner.memory import memory_budget, sequence_kv_expr
from roofline.specs import Hardware, Model, Workload
from roofline.units import lambdify


@dataclass(frozen=True)
class KVPool:
    """KV capacity of one GPU (the fullest one) and the bytes a sequence holds at each length."""

    capacity_bytes: float
    page_tokens: int
    seq_bytes: np.ndarray  # index n = 0..max_tokens: bytes a sequence of n tokens holds (whole pages)
    source: str

    def __post_init__(self) -> None:
        if not self.capacity_bytes > 0:
            raise ValueError(f"kv pool: capacity {self.capacity_bytes:.0f} bytes leaves no room for KV pages")

    @property
    def max_tokens(self) -> int:
        """Longest sequence, in tokens, that `seq_bytes` covers (its length - 1)."""
        return len(self.seq_bytes) - 1

    @property
    def page_bytes(self) -> float:
        """Bytes one more page costs a long sequence (the method's asymptotic page size)."""
        n = self.max_tokens - self.max_tokens % self.page_tokens
        if n < self.page_tokens:
            return float(self.seq_bytes[-1])
        return float(self.seq_bytes[n] - self.seq_bytes[n - self.page_tokens]) or float(self.seq_bytes[n])

    @property
    def capacity_pages(self) -> int:
        """Pages of `page_bytes` the pool holds."""
        return int(self.capacity_bytes // self.page_bytes) if self.page_bytes > 0 else 0

    def tokens_that_fit(self, seq_len: int) -> int:
        """Tokens resident when the pool is filled with sequences of `seq_len` tokens."""
        per = float(self.seq_bytes[min(seq_len, self.max_tokens)])
        return int(self.capacity_bytes // per) * seq_len if per > 0 else 0

    @classmethod
    def uniform(cls, capacity_bytes: float, page_tokens: int, bytes_per_token: float, max_tokens: int,
                source: str) -> KVPool:
        """A pool of uniform pages (what an engine's plain KV dtype gives): ceil(n / page) pages per sequence."""
        n = np.arange(max_tokens + 1)
        pages = -(-n // page_tokens)
        return cls(capacity_bytes, page_tokens, pages * page_tokens * float(bytes_per_token), source)

    @classmethod
    def from_planner(cls, model: Model, hardware: Hardware, workload: Workload, cache: CacheModel,
                     max_tokens: int) -> KVPool:
        """roofline's own budget and per-sequence reservation (planner/memory.py), tabulated to max_tokens."""
        from roofline.units import L
        budget = memory_budget(model, hardware, workload, cache)
        per_seq = lambdify([L], sequence_kv_expr(model, workload, cache), cse=True)
        n = np.arange(max_tokens + 1, dtype=np.float64)
        seq = np.broadcast_to(np.asarray(per_seq(np.maximum(n, 1)), dtype=np.float64), n.shape).copy()
        seq[0] = 0.0
        return cls(float(budget.kv_pool), workload.page_tokens, seq, "roofline planner memory budget")
