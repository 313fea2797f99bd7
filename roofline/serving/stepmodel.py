"""The time of one engine step with an arbitrary mix of decode tokens and prefill chunks, from the cost model.

A continuous-batching step runs one forward pass over the flattened tokens of every scheduled sequence, so
a mixed step is not the sum of a prefill phase and a decode phase. Per op k of the decode and prefill graphs
(matched by name and layer group) the step adds up, over its parts,

    FLOPs_k, int ops_k, non-weight bytes_k, all-reduce bytes_k
      = sum over decode sequences i      D_k(L_i)                                 (decode graph at B = 1)
      + sum over prefill chunks (s, c)   F_k(s + c) - F_k(s)                      (prefill graph at B = 1)
                                         + D_k(s) - D_k(0)                        (the cached prefix is read)
                                         + F_k(0) if the chunk ends the prompt   (its logits row)
    weight bytes_k = W_k(T), T = all tokens of the step       (decode graph at B = T: read once per step)

and then times each op once with the device's roofline (Roofline.op_times on the aggregated numbers:
max(compute, alpha + bytes / bandwidth), the launch floor, the ring all-reduce), summing count x time.
So weights are read once per step, GEMM FLOPs and activations scale with all the step's tokens, and attention
runs per sequence at its own context: F(s + c) - F(s) holds the causal pairs c s + c (c + 1) / 2 of the chunk,
D(s) - D(0) the reads, dequantization and rematerialization of its s cached tokens, as a decode step over s
tokens does them (its one extra query's FLOPs are a 1/c over-count). A lone prompt is exactly the prefill
graph at B = 1, a lone decode exactly the decode graph at B = 1.

Everything is compiled once per (model, method, hardware, workload): the per-part quantities are affine in
the batch (checked at build), so each op's per-sequence work is tabulated over the context 0..max_tokens
(or kept as slope and intercept where it is affine in the context) and a step is a few numpy gathers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from roofline.costmodel import Op
from roofline.costmodel.device import LAW_NAMES
from roofline.costmodel.ops import EXPERTS
from roofline.engines.llamacpp import kv_view
from roofline.lazy import sp
from roofline.planner.phases import PhaseModel
from roofline.planner.plan import ATTENTION_OPS
from roofline.units import lambdify

QUANTITIES = ("matmul_flops", "vector_flops", "int_ops", "bytes", "comm_bytes", "shared_bytes", "query_rows",
              "programs")
# the aggregated quantities of one op in one step, timed by the roofline's own op-time formula
_FM, _FV, _INT, _BYTES, _COMM, _SHARED, _ROWS, _PROGRAMS = sp.symbols(
    "step_matmul_flops step_vector_flops step_int_ops step_bytes step_comm step_shared step_rows step_programs",
    nonnegative=True)


def _quantities(op: Op | None) -> list[sp.Expr]:
    """Non-weight work of an op: FLOPs by unit, int ops, activation + KV bytes, all-reduce bytes, and the bytes
    its fused kernel moves through shared memory (kv.quant's metadata and operand loads: the on-chip ceiling), the
    rows it runs over and its programs (decode attention's (sequence, KV head, split) tiles: an engine's per-tile
    cost, Roofline attn_decode_program, and the latency ceiling's active SMs)."""
    if op is None:
        return [sp.Integer(0)] * len(QUANTITIES)
    nonweight = sp.Add(*(v for k, v in op.traffic.items() if k != "weights"))
    return [sp.sympify(op.matmul_flops), sp.sympify(op.vector_flops), sp.sympify(op.int_ops), nonweight,
            sp.sympify(op.comm_bytes), sp.sympify(op.shared_bytes), sp.sympify(op.query_rows),
            sp.sympify(op.programs)]


def _grouped(op: Op, prefill: dict) -> tuple:
    """The routed experts' (tokens, routed rows, experts touched) of a step in its aggregated matmul FLOPs (_FM): the
    prefill graph's at B tokens of one token each, B = _FM over the FLOPs of one token (linear in the tokens), so
    the engine's padding of each expert's rows (Roofline._padding) sees the step's own tokens."""
    from roofline.units import B, P
    own = prefill.get(_key(op, "prefill"), op)
    if not own.grouped:
        return ()
    per_token = sp.sympify(own.matmul_flops).subs({B: 1, P: 1})
    return tuple(sp.sympify(e).subs(P, 1).subs(B, _FM / per_token) for e in own.grouped)


def _key(op: Op, phase: str) -> tuple[str, str, str]:
    """An op's key across the two graphs: (name, group), attention kernels apart per phase (decode attention and
    prefill attention are different kernels with their own measured ceilings)."""
    return op.name, op.group, phase if op.kind == "attention" or op.name in ATTENTION_OPS else ""


def _table(exprs: list[list[sp.Expr]], symbol: sp.Symbol, n: int) -> np.ndarray:
    """exprs[q][j] evaluated at symbol = 0..n-1: array (len(exprs), len(exprs[0]), n)."""
    if not exprs or not exprs[0]:
        return np.zeros((len(QUANTITIES), 0, n))
    xs = np.arange(n, dtype=np.float64)
    values = lambdify([symbol], exprs, cse=True)(xs)
    return np.array([[np.broadcast_to(np.asarray(v, dtype=np.float64), xs.shape) for v in row] for row in values])


@dataclass
class StepModel:
    """Compiled step time of one (model, method, hardware, workload); see the module docstring."""

    phases: PhaseModel
    max_tokens: int
    max_step_tokens: int

    def __post_init__(self) -> None:
        from roofline.units import CHUNKS, B, L, P
        decode = {_key(op, "decode"): op for op in self.phases.decode.ops}
        # a step is one pass over the weights: the prefill graph's chunk count (CHUNKS) is 1 here (an op only the
        # prefill graph has, such as MLA's kv_b_proj up-projection, carries it in its weight reads)
        prefill = {_key(op, "prefill"): replace(op, traffic={k: sp.sympify(v).subs(CHUNKS, 1)
                                                             for k, v in op.traffic.items()}, passes=sp.S.One)
                   for op in self.phases.prefill.ops}
        keys = list(decode) + [k for k in prefill if k not in decode]
        self.keys = keys
        ops = [decode.get(k) or prefill[k] for k in keys]
        # a chunk's cached prefix is read by its own (prefill) attention kernel, at that kernel's ceilings
        self.prefix_target = np.array([keys.index(_key(decode[k], "prefill")) if _key(decode[k], "prefill") in prefill
                                       else j for j, k in enumerate(keys) if k in decode], dtype=np.int64)
        self.counts = np.array([op.count for op in ops], dtype=np.float64)
        n = self.max_tokens + 1
        dec = [[e.subs(B, 1) for e in _quantities(decode.get(k))] for k in keys]  # [op][q]
        pre = [[e.subs(B, 1) for e in _quantities(prefill.get(k))] for k in keys]
        self._check_affine_in_batch(decode, prefill, keys)
        # decode: ops whose work depends on the context are tabulated over L, the rest are constants
        dec_tab = [j for j, row in enumerate(dec) if any(L in e.free_symbols for e in row)]
        self.dec_tab = np.array(dec_tab, dtype=np.int64)
        self.dec_const = np.array([[float(dec[j][q]) if j not in dec_tab else 0.0 for j in range(len(keys))]
                                   for q in range(len(QUANTITIES))])
        self.dec_table = _table([[dec[j][q] for j in dec_tab] for q in range(len(QUANTITIES))], L, n)
        # prefill: affine in P -> slope and intercept; otherwise tabulated over P
        affine = [all(e.is_polynomial(P) and sp.degree(e, P) <= 1 for e in row) for row in pre]
        pre_tab = [j for j in range(len(keys)) if not affine[j]]
        self.pre_tab = np.array(pre_tab, dtype=np.int64)
        self.pre_slope = np.array([[float(sp.diff(pre[j][q], P)) if affine[j] else 0.0 for j in range(len(keys))]
                                   for q in range(len(QUANTITIES))])
        self.pre_intercept = np.array([[float(pre[j][q].subs(P, 0)) if affine[j] else 0.0
                                        for j in range(len(keys))] for q in range(len(QUANTITIES))])
        self.pre_table = _table([[pre[j][q] for j in pre_tab] for q in range(len(QUANTITIES))], P, n)
        weights = [(decode[k].traffic.get("weights", 0) if k in decode
                    else sp.sympify(prefill[k].traffic.get("weights", 0)).subs({B: 1, P: B})) for k in keys]
        self.weights = _table([weights], B, self.max_step_tokens + 1)[0]  # (ops, T)
        # a phase's own op (decode or prefill attention; MLA's absorbed q / o projections in decode, its kv_b_proj
        # up-projection in prefill) reads its weights only when that phase is in the step
        self.decode_only = np.array([k not in prefill for k in keys])
        self.prefill_only = np.array([k not in decode for k in keys])
        self._groups = self._compile_times(ops, prefill)
        self._flatten()

    def _check_affine_in_batch(self, decode, prefill, keys) -> None:
        """Per-part sums are exact only if each op's non-weight work is B x its work at B = 1."""
        from roofline.units import B
        for graph in (decode, prefill):
            for k in keys:
                for e in _quantities(graph.get(k)):
                    if sp.simplify(e.subs(B, 3) - 3 * e.subs(B, 1)) != 0:
                        raise ValueError(f"serving: op {k[0]} ({k[1]}) is not linear in the batch; "
                                         "the step model cannot split it per sequence")

    def _compile_times(self, ops: list[Op], prefill: dict) -> list[tuple[np.ndarray, bool, callable]]:
        """One numpy function per kind of op (what picks its ceilings: dtype, communication, kind, head dim, KV
        read or not, kernels per instance, eager aten or fused Triton or neither) giving op times from aggregated
        quantities."""
        roof = self.phases.roofline
        groups: dict[tuple, list[int]] = {}
        for j, op in enumerate(ops):
            cls = "kv_read" if "kv_read" in op.traffic else "act_read" if op.traffic else None
            comm = (op.collective, op.ranks) if op.is_comm else None  # all-reduce or expert all-to-all
            # the ops whose name picks their laws keep it (Roofline._ceilings_of: the routed experts' grouped-GEMM
            # law, an engine's KV write and RMSNorm kernel); the rest share one
            name = op.name if op.name in LAW_NAMES else "step"
            groups.setdefault((op.dtype, comm, op.kind, op.head_dim, cls, op.kernels, op.aten, op.fused, name,
                               op.weight_type), []).append(j)
        compiled = []
        self.laws: list[tuple[np.ndarray, bool, sp.Expr]] = []  # the same laws, symbolic (serving.closedform)
        for (dtype, comm, kind, head_dim, cls, kernels, aten, fused, name, weight_type), idx in groups.items():
            if comm:
                template = Op("step", "step", 1, comm_bytes=_COMM, dtype=dtype, kernels=kernels, collective=comm[0],
                              ranks=comm[1])
                law = roof.op_times(template).total
                fn = lambdify([_COMM], law, cse=False)
            else:
                template = Op(name, "step", 1, matmul_flops=_FM, vector_flops=_FV, int_ops=_INT,
                              traffic={cls: _BYTES} if cls else {}, dtype=dtype, kernels=kernels, kind=kind,
                              head_dim=head_dim, aten=aten, fused=fused, shared_bytes=_SHARED, query_rows=_ROWS,
                              programs=_PROGRAMS,
                              weight_type=weight_type,
                              grouped=_grouped(ops[idx[0]], prefill) if name == EXPERTS else ())
                law = roof.op_times(template).total
                fn = lambdify([_FM, _FV, _INT, _BYTES, _SHARED, _ROWS, _PROGRAMS], law, cse=False)
            compiled.append((np.array(idx, dtype=np.int64), comm, fn))
            self.laws.append((np.array(idx, dtype=np.int64), bool(comm), sp.sympify(law)))
        return compiled

    def _flatten(self) -> None:
        """Row-major copies for the per-step path: a row per context of the nonzero context-dependent
        (quantity, op) columns, flat (QUANTITIES x ops) constants, weights per token count and phase mix."""
        nops = len(self.keys)

        def rows(table: np.ndarray, ops: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, ...]:
            flat = table.transpose(2, 0, 1).reshape(table.shape[2], -1)  # (n, QUANTITIES x tabulated ops)
            cols = (np.arange(len(QUANTITIES))[:, None] * nops + target[None, :]).ravel()
            keep = np.flatnonzero(np.any(flat != 0, axis=0))
            return np.ascontiguousarray(flat[:, keep]), cols[keep], (np.arange(len(QUANTITIES))[:, None] * nops
                                                                     + ops[None, :]).ravel()[keep]

        self._dec_rows, self._dec_cols, _ = rows(self.dec_table, self.dec_tab, self.dec_tab)
        _, self._prefix_cols, _ = rows(self.dec_table, self.dec_tab, self.prefix_target[self.dec_tab])
        self._pre_rows, self._pre_cols, _ = rows(self.pre_table, self.pre_tab, self.pre_tab)
        # the decode rows' columns that count operations (they scale with the query rows), not bytes (timing 22.)
        self._dec_flops = (self._dec_cols // nops) < QUANTITIES.index("bytes")
        self._dec_const, self._pre_slope = self.dec_const.ravel(), self.pre_slope.ravel()
        self._pre_intercept = self.pre_intercept.ravel()
        w = np.ascontiguousarray(self.weights.T)  # (T, ops)
        # by (decodes?, chunks?): a phase's own kernel reads its weights only when that phase is in the step
        self._w = {(True, True): w, (True, False): np.where(self.prefill_only, 0.0, w),
                   (False, True): np.where(self.decode_only, 0.0, w)}
        self._w[(False, False)] = self._w[(False, True)]
        # ops reordered so each kind's ops are one slice: one gather in, one out, per step
        self._perm = np.concatenate([idx for idx, _, _ in self._groups])
        self._unperm = np.argsort(self._perm)
        bounds = np.cumsum([0] + [len(idx) for idx, _, _ in self._groups])
        self._slices = [(slice(a, b), comm, fn) for a, b, (_, comm, fn) in zip(bounds[:-1], bounds[1:], self._groups,
                                                                               strict=True)]
        # ZACK's attention imbalance (MethodConfig.attention_imbalance) on the decode attention kernels
        names = np.array([k[0] in ATTENTION_OPS and k[2] == "decode" for k in self.keys])
        self._imbalanced = np.flatnonzero(names)
        self._imbalance: dict[int, float] = {}

    def imbalance(self, batch: int) -> float:
        """The method's decode attention makespan over its balanced time at `batch` decode sequences (ZACK
        §5.3 for heterogeneous heads; 1 for every other method), as PlanResult's TPOT applies it."""
        if batch < 1 or not len(self._imbalanced):
            return 1.0
        value = self._imbalance.get(batch)
        if value is None:
            phases = self.phases
            value = float(phases.method.attention_imbalance(phases.model, batch, phases.hardware.sm_count))
            self._imbalance[batch] = value
        return value

    def work(self, decode_context: np.ndarray, chunk_start: np.ndarray, chunk_tokens: np.ndarray,
             chunk_done: np.ndarray) -> np.ndarray:
        """Aggregated non-weight quantities (QUANTITIES x ops) of a step: decode sequences at their contexts
        (tokens attended, the new one included) and prefill chunks (cached prefix s, c new tokens, ending
        the prompt or not). Every tabulated value is a whole number far below 2^53, so these sums are exact
        in any order."""
        q = self._dec_const * len(decode_context)
        if len(decode_context) and len(self._dec_cols):
            q[self._dec_cols] += self._dec_rows[decode_context].sum(axis=0)
        if len(chunk_tokens):
            done = float(np.count_nonzero(chunk_done))
            q += self._pre_slope * float(chunk_tokens.sum()) + self._pre_intercept * done
            if len(self._pre_cols):
                t = self._pre_rows
                end = chunk_start + chunk_tokens
                q[self._pre_cols] += t[end].sum(axis=0) - t[chunk_start].sum(axis=0) + t[0] * done
            if len(self._prefix_cols):
                d = self._dec_rows
                q[self._prefix_cols] += d[chunk_start].sum(axis=0) - d[0] * len(chunk_start)
        return q.reshape(len(QUANTITIES), -1)

    def time_of(self, q: np.ndarray, tokens, decodes: int = 1, chunks: bool = True) -> np.ndarray | float:
        """Whole-model time (no pipeline) of a step with aggregated work `q` (QUANTITIES x ops) over `tokens`
        tokens, with `decodes` decode sequences and prefill chunks or not; with q of shape (QUANTITIES, ops, k)
        and k token counts, the times of k steps."""
        t, active = self._op_times(q, tokens, decodes, chunks)
        total = self.counts @ np.where(active, t, 0.0)
        return float(total) if np.ndim(total) == 0 else total

    def once_time(self, q: np.ndarray, tokens: int, decodes: int = 1, chunks: bool = True) -> float:
        """A step's time with every op run once instead of `count` times: one decoder layer of each kind plus the
        embedding and the LM head (what an EAGLE head or an MTP module costs per draft token)."""
        t, active = self._op_times(q, tokens, decodes, chunks)
        return float(np.where(active, t, 0.0).sum())

    def _op_times(self, q: np.ndarray, tokens, decodes: int, chunks: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per-op times (one instance each) of aggregated work `q`, and which ops launch at all."""
        tokens = np.minimum(np.rint(np.asarray(tokens)).astype(np.int64), self.max_step_tokens)
        w = self._w[(decodes > 0, bool(chunks))][tokens].T
        if q.ndim == 3 and w.ndim == 1:
            w = w[:, None]
        qp, wp = q[:, self._perm], w[self._perm]
        t = np.empty(q.shape[1:])
        for idx, comm, fn in self._slices:
            if comm:
                t[idx] = fn(qp[4, idx])
            else:
                t[idx] = fn(qp[0, idx], qp[1, idx], qp[2, idx], qp[3, idx] + wp[idx], qp[5, idx], qp[6, idx],
                            qp[7, idx])
        t = t[self._unperm]
        slow = self.imbalance(decodes)
        if slow > 1:
            t[self._imbalanced] *= slow
        active = (q.sum(axis=0) + w) > 0  # an op with no work in this step does not launch
        return t, active

    def split_time(self, decode_context: np.ndarray, chunk_start: np.ndarray, chunk_tokens: np.ndarray,
                   chunk_done: np.ndarray, sizes: list[int]) -> float:
        """Seconds for one step the engine runs as ubatches of `sizes` tokens (llama-server's slots: engines.llamacpp
        ubatches), each a pass over the weights with its share of the step's work (its tokens over the step's); pp 1."""
        q = self.work(decode_context, chunk_start, chunk_tokens, chunk_done)
        return float(self._split(q, sizes, len(decode_context), len(chunk_tokens) > 0))

    def _split(self, q: np.ndarray, sizes: list[int], decodes: int, chunks: bool):
        """Sum over the ubatches of `sizes` tokens of the step time of each one's share of work `q`."""
        tokens = sum(sizes)
        return sum(self.time_of(q * (s / tokens), s, math.ceil(decodes * s / tokens), chunks) for s in sizes)

    def _span_decodes(self, n: int, view, tile: int, read: bool) -> np.ndarray:
        """The work (QUANTITIES x ops flat, or x k for k views) of `n` decode rows attending over a one-stream KV view
        of `view` cells (timing 22.): each query scores every cell of the view, and the view is read once per
        `tile` query rows (fattn's block), or not at all where a prompt piece in the same ubatch reads it (`read`
        False)."""
        view = np.atleast_1d(np.asarray(view, dtype=np.int64))
        q = np.repeat((self._dec_const * n)[:, None], len(view), axis=1)
        if len(self._dec_cols) and n:
            rows = self._dec_rows[view]  # (k, cols)
            reads = -(-n // tile) if read else 0
            q[self._dec_cols] += (rows * np.where(self._dec_flops, n, reads)).T
        return q

    def span_time(self, context: np.ndarray, chunk_start: np.ndarray, chunk_tokens: np.ndarray,
                  chunk_done: np.ndarray, used: int, size: int, tile: int, pass_tokens: int, closed=None) -> float:
        """Seconds for one step of a llama-server whose slots share one KV stream (timing 22.): its batch (the
        decoding sequences' tokens, then each chunk's in turn) runs as ubatches of at most `pass_tokens` tokens
        (19.), each a pass over the weights whose attention spans the stream's view as its tokens leave it
        (engines.llamacpp.kv_view of `used` cells before the step plus those placed so far, at most `size`): a
        prompt piece of c tokens scores c x view pairs (the chunk tables read at view - c cached tokens), a decode
        row view pairs, the view read once per `tile` decode rows of a decode-only ubatch. `closed`: the same laws
        compiled (serving.closedform.ClosedForm of this model), to float rounding."""
        n_ub = pass_tokens or (len(context) + int(chunk_tokens.sum()))
        limit = self.max_tokens
        total, d, ci, off, placed = 0.0, 0, 0, 0, int(used)
        while d < len(context) or ci < len(chunk_tokens):
            take_d = min(len(context) - d, n_ub)
            room = n_ub - take_d
            starts, counts, done = [], [], []
            while room and ci < len(chunk_tokens):
                c = min(room, int(chunk_tokens[ci]) - off)
                starts.append(int(chunk_start[ci]) + off)
                counts.append(c)
                off += c
                room -= c
                done.append(bool(chunk_done[ci]) and off == int(chunk_tokens[ci]))
                if off == int(chunk_tokens[ci]):
                    ci, off = ci + 1, 0
            tokens = take_d + sum(counts)
            if not tokens:  # a chunk of no tokens
                ci, off = ci + 1, 0
                continue
            placed += tokens
            view = min(kv_view(placed, size), limit)
            total += self._mask_s(view, context[d:d + take_d], starts, counts, size)
            q = self._span_decodes(take_d, view, tile, not counts)[:, 0]
            if counts:
                c = np.array(counts, dtype=np.int64)
                q = q + self.work(np.zeros(0, dtype=np.int64), np.maximum(np.array(starts), view - c), c,
                                  np.array(done)).ravel()
            total += self._time(q, tokens, take_d, bool(counts), closed)
            d += take_d
        return total

    def _mask_s(self, view: int, context: np.ndarray, starts: list[int], counts: list[int], size: int) -> float:
        """Host seconds of the KQ mask a one-stream ubatch builds past what a stream of its own would (timing 23.):
        each decode row, and each prompt piece's first row, walks the view's cells beyond its own sequence's view
        (mask_cell_s a cell); a piece's further rows copy them (mask_copy_s a cell)."""
        eng = self.phases.engine
        if not (eng.mask_cell_s or eng.mask_copy_s):
            return 0.0
        excess = float(np.maximum(view - kv_view(np.asarray(context), size), 0).sum()) * eng.mask_cell_s
        for start, count in zip(starts, counts, strict=True):
            extra = max(view - kv_view(start + count, size), 0)
            excess += extra * (eng.mask_cell_s + (count - 1) * eng.mask_copy_s)
        return excess

    def _time(self, q: np.ndarray, tokens: int, decodes: int, chunks: bool, closed) -> float:
        """time_of of flat work q (no weights), through `closed` (ClosedForm: its live entries plus the weight bytes at
        the step's tokens) when given."""
        if closed is None:
            return float(self.time_of(q.reshape(len(QUANTITIES), -1), tokens, decodes, chunks))
        w = closed._weights[(decodes > 0, chunks)][min(tokens, self.max_step_tokens)]
        return closed.time(q[closed.live] + w, decodes)

    def span_block(self, context: np.ndarray, steps: int, used: int, size: int, tile: int, closed=None) -> np.ndarray:
        """Times of `steps` consecutive decode-only steps (as decode_block) of a one-stream llama-server: step j's
        rows attend over kv_view(used + (j + 1) x n) cells, `used` the stream's cells before the first (span_time);
        one ubatch a step (n <= pass_tokens, which the caller checks)."""
        n = len(context)
        j = np.arange(steps)
        views = np.minimum(kv_view(used + (j + 1) * n, size), self.max_tokens)
        mask = np.zeros(steps)
        eng = self.phases.engine
        if eng.mask_cell_s:  # _mask_s of each step's decode rows, every step at once
            own = kv_view(np.asarray(context)[None, :] + j[:, None], size)
            mask = np.maximum(views[:, None] - own, 0).sum(axis=1) * eng.mask_cell_s
        if closed is not None:  # a view holds for up to 256 / n steps: each distinct one timed once
            times = {int(v): self._time(self._span_decodes(n, int(v), tile, True)[:, 0], n, n, False, closed)
                     for v in np.unique(views)}
            return np.array([times[int(v)] for v in views]) + mask
        q = self._span_decodes(n, views, tile, True).reshape(len(QUANTITIES), -1, steps)
        return self.time_of(q, n, n, chunks=False) + mask

    def decode_block(self, context: np.ndarray, steps: int, pad: int = 0, sizes: list[int] | None = None) -> np.ndarray:
        """Times of `steps` consecutive decode-only steps of the same sequences, starting at `context`
        (each step every sequence gains one token), each padded by `pad` dummy tokens; only for pp = 1. `sizes`: the
        ubatches the engine runs each step in (split_time; the same sequences, the same split at every step)."""
        q = np.repeat((self._dec_const * (len(context) + pad))[:, None], steps, axis=1)
        if len(self._dec_cols):
            q[self._dec_cols] += self._dec_rows[context[:, None] + np.arange(steps)].sum(axis=0).T
        q = q.reshape(len(QUANTITIES), -1, steps)
        n, tokens = len(context), len(context) + pad
        if sizes is not None:
            return self._split(q, sizes, n, False)
        m = self.phases.micro_count(n, tokens)  # an engine's passes over the step's tokens (PhaseModel.pipeline)
        if m == 1:
            return self.time_of(q, tokens, n, chunks=False)
        return m * self.time_of(q / m, tokens / m, math.ceil(n / m), chunks=False)

    def step_time(self, decode_context: np.ndarray, chunk_start: np.ndarray, chunk_tokens: np.ndarray,
                  chunk_done: np.ndarray, pad: int = 0) -> float:
        """Seconds for one step (the pipeline schedule of PhaseModel.pipeline when pp > 1). `pad` dummy tokens (a
        CUDA graph's padding to its captured size) cost what a decode token costs outside attention: they run
        through every GEMM and norm, and attend to nothing (the per-sequence constant part of the decode graph)."""
        q = self.work(decode_context, chunk_start, chunk_tokens, chunk_done)
        if pad:
            q = q + (self._dec_const * pad).reshape(q.shape)
        tokens = len(decode_context) + int(chunk_tokens.sum()) + pad
        seqs = len(decode_context) + len(chunk_tokens)
        if self.phases.workload.pp == 1 and self.phases.micro_count(seqs, tokens) == 1:
            return self.time_of(q, tokens, len(decode_context), len(chunk_tokens) > 0)
        n_dec = len(decode_context)
        return self.phases.pipeline(lambda b: self.time_of(q * (b / seqs), tokens * b / seqs,
                                                           math.ceil(n_dec * b / seqs), len(chunk_tokens) > 0), seqs,
                                    tokens)
