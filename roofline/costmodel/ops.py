"""One op of the graph: FLOPs by unit, bytes by traffic class, for one instance; `count` instances per pass.

Traffic classes (STYLE 6): weights read, activations read / written, KV read / written. Communication
ops carry `comm_bytes` (the message each GPU all-reduces, or sends in an all-to-all) instead of memory traffic.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from roofline.lazy import sp

TRAFFIC = ("weights", "act_read", "act_write", "kv_read", "kv_write")
# a routed MLP (blocks.moe_mlp): the op of the experts' grouped GEMMs (kind "gemm", one kernel per grouped GEMM call,
# priced at the measured grouped-GEMM law where the device has one) and the kind of its routing op (topk, sort,
# scatter, gathers, index_add: small kernels whose count the fusion level sets, at the measured routing_kernel_s)
EXPERTS = "experts"
ROUTING = "routing"
# the kind of an engine's strided copy of an activation (attention.q_copy), at the engine's copy law
COPY = "copy"


def _zero():
    return sp.S.Zero  # sympy's 0 (made on first use: sympy loads lazily)



@dataclass(frozen=True)
class Op:
    """An op per layer instance (count = layers in its group), per GPU, for the whole batch."""

    name: str
    group: str
    count: int
    matmul_flops: sp.Expr = field(default_factory=_zero)
    vector_flops: sp.Expr = field(default_factory=_zero)
    traffic: dict[str, sp.Expr] = field(default_factory=dict)
    dtype: str = "bf16"
    source: str = "model"  # "model", or the method that adds the op
    comm_bytes: sp.Expr = field(default_factory=_zero)  # all-reduce message per GPU (TP), bytes
    int_ops: sp.Expr = field(default_factory=_zero)  # vector integer instructions (unpacking quantized codes)
    kernels: int = 1  # kernel launches per instance (the fusion level sets it; 0: fused into a neighbour)
    kind: str = ""  # "gemm" (weights x activations), "attention" (flash / flash-decoding), "routing", "" (other)
    head_dim: int = 0  # attention: the query/key head dim (its measured flash rate is per head dim)
    # hierarchical roofline: bytes through shared memory (staged operands, metadata loads) and the programs
    # (thread blocks) that run at once (0: enough to fill every SM)
    shared_bytes: sp.Expr = field(default_factory=_zero)
    programs: sp.Expr = field(default_factory=_zero)
    # bytes through L2 where programs re-read what others brought in (a GEMM's operand tiles); 0: its DRAM bytes
    l2_bytes: sp.Expr = field(default_factory=_zero)
    aten: bool = False  # eager aten kernels (fusion 'none', not GEMM/attention): per-kernel time aten_kernel_s
    fused: bool = False  # Inductor's fused Triton kernels (fusion 'full', not GEMM/attention): fused_kernel_s
    # a communication op's collective: "allreduce" (tensor parallelism, over tp) or "alltoall" (expert parallelism,
    # over `ranks` = ep replicas; costmodel.collectives)
    collective: str = "allreduce"
    ranks: int = 0
    # prefill attention: the (query token, query head) rows its tiles run over (an engine's per-row cost,
    # roofline.engines.timing 14.); an engine's copy (kind COPY): the rows (tokens) it copies, none at one; a dense
    # GEMM (blocks.linear): its rows, where an engine's mat-vec kernel takes a one-row call (timing 15.); 0 elsewhere
    query_rows: sp.Expr = field(default_factory=_zero)
    # a GEMM's weights as a ggml quantized type (a GGUF preset's tensors: q4_K, q8_0 ...; roofline.gguf_quant), whose
    # own kernels' laws an engine may have measured (roofline.engines.timing 16.); "" for every other weight
    weight_type: str = ""
    # the routed experts: (tokens M of the call, routed rows M x top-k, experts the rows spread over), what an
    # engine's padding of each expert's rows to its tile prices (timing 14.); () elsewhere
    grouped: tuple = ()
    # the forward passes the op's work is split over evenly (a chunked prefill's chunks, an engine's physical batches:
    # llama.cpp's ubatches): each pass reads its weights and launches its kernels over 1 / passes of the rest of the
    # work (Roofline.op_times: passes x the time of one pass); the op's own figures are the whole work's
    passes: sp.Expr = field(default_factory=lambda: sp.S.One)

    def __post_init__(self) -> None:
        unknown = set(self.traffic) - set(TRAFFIC)
        if unknown:
            raise ValueError(f"traffic: unknown classes {sorted(unknown)}; valid: {TRAFFIC}")

    @property
    def flops(self) -> sp.Expr:
        """FLOPs of one instance: matmul_flops + vector_flops."""
        return self.matmul_flops + self.vector_flops

    @property
    def bytes(self) -> sp.Expr:
        """Memory bytes of one instance: the sum over traffic classes (0 when it has none)."""
        return sp.Add(*self.traffic.values()) if self.traffic else sp.S.Zero

    @property
    def is_comm(self) -> bool:
        """True for a communication op (nonzero `comm_bytes`)."""
        return self.comm_bytes != 0

    def scaled(self, factor: sp.Expr) -> Op:
        """The same op doing `factor` times the work (e.g. weights read once per prefill chunk)."""
        return replace(self, matmul_flops=self.matmul_flops * factor, vector_flops=self.vector_flops * factor,
                       traffic={k: v * factor for k, v in self.traffic.items()}, comm_bytes=self.comm_bytes * factor,
                       int_ops=self.int_ops * factor, shared_bytes=self.shared_bytes * factor,
                       query_rows=self.query_rows * factor)

    def one_pass(self) -> Op:
        """One of the op's `passes` passes: every figure of the work over passes (the weights too, which the whole
        op counts once a pass), the rows, programs, L2 bytes and the routed experts' tokens and rows alike; the
        experts a pass touches stay the whole op's (an upper bound)."""
        share = 1 / sp.sympify(self.passes)
        grouped = tuple(e * share for e in self.grouped[:2]) + tuple(self.grouped[2:]) if self.grouped else ()
        return replace(self.scaled(share), programs=self.programs * share, l2_bytes=self.l2_bytes * share,
                       grouped=grouped, passes=sp.S.One)


def traffic(weights=0, act_read=0, act_write=0, kv_read=0, kv_write=0) -> dict[str, sp.Expr]:
    """Bytes by class, dropping zero classes."""
    values = dict(weights=weights, act_read=act_read, act_write=act_write, kv_read=kv_read, kv_write=kv_write)
    return {k: sp.sympify(v) for k, v in values.items() if sp.sympify(v) != 0}
