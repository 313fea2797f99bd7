"""The step model's time as one compiled scalar function, and decode blocks in closed form between their kinks.

StepModel (serving/stepmodel.py) times a step from its aggregated work q (QUANTITIES x ops) with one numpy call per
kind of op; a day of traffic is millions of steps, so the per-call overhead of numpy on 17-element arrays dominates.
This module compiles the SAME op-time laws (StepModel.laws: Roofline.op_times of each kind's template, the
expressions StepModel lambdifies) into one plain-Python function of the flattened q, summed with each op's count,
launch test (an op with no work does not launch) and the decode-attention imbalance, as StepModel.time_of does.

A decode-only block of k steps of n sequences at contexts c_i (step s attends c_i + s) needs the cumulative step
times, cut at the next arrival. Its work is q(s) = sum_i rows[c_i + s] (+ constants): the decode table is affine in
the context except at a few contexts (the attention kernel's split boundaries, a compressed format's page edges),
so q is affine in s, q(s) = q(0) + s n slope, until a sequence crosses one of those; the block is re-gathered there.
Between crossings every op time is a convex, nondecreasing piecewise-linear function of s when its law is built of
sums, non-negative multiples and max() of the quantities (checked on the expression at build; the host's
max(gpu, cpu) or gpu + cpu keeps it so). A convex function that is linear over [a, a + 1] and whose value at b lies on
that line is linear on [a, b], so a segment needs three evaluations when it has no kink and is bisected where it has
one; the cumulative times of a linear stretch are its arithmetic series. The result equals the step-by-step
evaluation to float rounding (the tolerance below); tests compare them on every engine and scheduling variant.
Laws outside that form (an all-reduce's protocol choice is a min) leave `blocks` False and the caller evaluates
every step.

With pp > 1 stages a step is PhaseModel.pipeline's micro-batch through the same law, then its stage slots
(serving.pipeline: `pipelined` for one step). The law keeps no state between steps, and along a decode-only block
the micro-batch's scale, weight row and imbalance are constants, so `decode_ends` runs the micro-batch's work through
the same linear stretches and maps each step's time through the pipeline's increasing affine outer law, which keeps
it convex and nondecreasing.
"""

from __future__ import annotations

import math

import numpy as np

from roofline.lazy import sp
from roofline.serving.pipeline import Micro, micro
from roofline.serving.stepmodel import (
    _BYTES,
    _COMM,
    _FM,
    _FV,
    _INT,
    _PROGRAMS,
    _ROWS,
    _SHARED,
    QUANTITIES,
    StepModel,
)

LINEAR_RTOL = 1e-12  # a segment whose end lies this close (relative) to its first step's line is linear
_SYMBOLS = (_FM, _FV, _INT, _BYTES, _COMM, _SHARED, _ROWS, _PROGRAMS)  # QUANTITIES' order


def _convex(expr) -> bool:
    """Whether `expr` is built of non-negative numbers, the quantity symbols, sums, non-negative multiples and max():
    then it is convex and nondecreasing in every quantity."""
    if expr.is_Number:
        return bool(expr >= 0)
    if expr.is_Symbol:
        return True
    if expr.is_Add or isinstance(expr, sp.Max):
        return all(_convex(a) for a in expr.args)
    if expr.is_Mul:
        numbers = [a for a in expr.args if a.is_Number]
        others = [a for a in expr.args if not a.is_Number]
        return all(a >= 0 for a in numbers) and len(others) <= 1 and all(_convex(a) for a in others)
    return False


def _live(model: StepModel) -> np.ndarray:
    """Flat (QUANTITIES x ops) entries that some step can make nonzero: constants, slopes, tabulated columns and, in
    the bytes row, the weights; the rest are zero in every step and drop out of the compiled laws."""
    nops = len(model.keys)
    live = (model._dec_const != 0) | (model._pre_slope != 0) | (model._pre_intercept != 0)
    for cols in (model._dec_cols, model._prefix_cols, model._pre_cols):
        live[cols] = True
    live[3 * nops:4 * nops] |= np.any(model.weights != 0, axis=1)
    return live


def _source(model: StepModel, live: np.ndarray, once: bool = False) -> tuple[str, bool]:
    """Python source of `total(q, slow)`: sum over ops of count x time for the live entries q of the flattened work
    (row-major QUANTITIES x ops, weight bytes included) of the ops that launch, the imbalanced ones x slow; and
    whether every law is convex (see _convex). `once`: every op counted once instead of `count` times
    (StepModel.once_time: one decoder layer of each kind plus the embedding and the LM head, an EAGLE / MTP head's
    pass). The sympy work (each op's law with its zero quantities substituted) is kept on the model, so a second
    source of the same model costs only its text."""
    nops = len(model.keys)
    names = [f"q{k}_{j}" for k in range(len(QUANTITIES)) for j in range(nops)]
    imbalanced = set(model._imbalanced.tolist())
    args = [name for name, keep in zip(names, live.tolist(), strict=True) if keep]
    lines = ["def total(q, slow):", f"    ({', '.join(args)},) = q", "    t = 0.0"]
    key = live.tobytes()
    cached = getattr(model, "_law_text", None)
    if cached is None or cached[0] != key:
        cached = model._law_text = (key, *_op_laws(model, live))
    _key, per_op, convex = cached
    for j, work, law in per_op:
        count = 1.0 if once else float(model.counts[j])
        scale = f"{count!r} * slow" if j in imbalanced else f"{count!r}"
        lines += [f"    if {work} > 0:", f"        t += {scale} * ({law})"]
    lines.append("    return t")
    return "\n".join(lines), convex


def _op_laws(model: StepModel, live: np.ndarray) -> tuple[list[tuple[int, str, str]], bool]:
    """Per op that some step makes work for: (op, its live work's sum as text, its law's Python text with the
    zero quantities substituted), and whether every law is convex (_convex)."""
    from sympy.printing.pycode import pycode
    nops = len(model.keys)
    convex = True
    laws = {}
    for idx, _comm, law in model.laws:
        convex = convex and _convex(law)
        for j in idx.tolist():
            laws[j] = law
    out = []
    for j in range(nops):
        mine = [k for k in range(len(QUANTITIES)) if live[k * nops + j]]
        if not mine:
            continue  # no step gives this op work: it never launches
        values = {s: sp.Symbol(f"q{k}_{j}", nonnegative=True) if k in mine else sp.Integer(0)
                  for k, s in enumerate(_SYMBOLS)}
        out.append((j, " + ".join(f"q{k}_{j}" for k in mine), pycode(laws[j].xreplace(values))))
    return out, convex


class ClosedForm:
    """StepModel's step time as one compiled function; decode blocks by their linear stretches (module docstring)."""

    def __init__(self, model: StepModel, once: bool = False) -> None:
        self.model, self.once = model, once  # once: every op counted once (_source), an EAGLE / MTP head's pass
        self.live = _live(model)
        source, self.convex = _source(model, self.live, once)
        scope: dict = {}
        # math: a law's ceiling (an engine's padded rows, Roofline._padding) prints as math.ceil
        exec(compile(source, "<serving.closedform>", "exec"), {"max": max, "min": min, "math": math},  # noqa: S102
             scope)
        self.total = scope["total"]
        nops = len(model.keys)
        self.size = len(QUANTITIES) * nops
        rows = model._dec_rows
        if len(rows) > 2:
            diffs = np.diff(rows, axis=0)
            uniq, counts = np.unique(diffs, axis=0, return_counts=True)
            self.slope = uniq[np.argmax(counts)]
            irregular = np.flatnonzero(np.any(diffs != self.slope, axis=1))  # c -> c + 1 leaves the line
        else:
            self.slope, irregular = np.zeros(rows.shape[1]), np.arange(len(rows))
        self.irregular = np.append(irregular, len(rows) + 2**40)  # a sentinel past every context
        self.blocks = self.convex and bool(np.all(self.slope >= 0))
        self._slope_flat = np.zeros(self.size)
        self._slope_flat[model._dec_cols] = self.slope
        # ops that gain work along a block and have no per-sequence constant work: they may start launching in it
        grows = (self._slope_flat != 0).reshape(len(QUANTITIES), nops).any(axis=0)
        steady = (model._dec_const != 0).reshape(len(QUANTITIES), nops).any(axis=0)
        # ... unless its tabulated work is positive at every context >= 1 (a decoding sequence attends at least one)
        per_op = np.zeros((len(rows), self.size))
        per_op[:, model._dec_cols] = rows
        positive = (per_op[1:].reshape(len(rows) - 1, len(QUANTITIES), nops).sum(axis=1) > 0).all(axis=0)
        starts = np.flatnonzero(grows & ~steady & ~positive)
        self._live_space(model, starts)

    def _live_space(self, model: StepModel, starts: np.ndarray) -> None:
        """The step's work kept only over the live entries (_live): constants, slopes, the tabulated columns'
        positions and the weight bytes per token count, each as a vector over the live entries."""
        nops = len(model.keys)
        at = np.full(self.size, -1)
        at[self.live] = np.arange(int(self.live.sum()))
        self._const = model._dec_const[self.live]
        self._pre_slope, self._pre_intercept = model._pre_slope[self.live], model._pre_intercept[self.live]
        self._dec_at, self._pre_at, self._prefix_at = at[model._dec_cols], at[model._pre_cols], at[model._prefix_cols]
        self._slope_live = self._slope_flat[self.live]
        self._weights = {}
        for key, w in model._w.items():  # (tokens, ops) -> (tokens, live entries): the bytes row only
            full = np.zeros((len(w), self.size))
            full[:, 3 * nops:4 * nops] = w
            self._weights[key] = np.ascontiguousarray(full[:, self.live])
        flat = (np.arange(len(QUANTITIES))[:, None] * nops + starts[None, :]).T  # (ops that may start, QUANTITIES)
        self._may_start = [at[row][at[row] >= 0] for row in flat]

    def work(self, context: np.ndarray, pad: int, decodes: int, chunks: bool, start=None, tokens=None,
             done=None, weighted: bool = True) -> np.ndarray:
        """The live entries of a step's work with its weight bytes (StepModel.work, its pad and its weights): decode
        sequences at `context`, `pad` padding tokens, prefill chunks (cached prefix `start`, new `tokens`, ending
        the prompt or not: `done`). Tabulated values are whole numbers, so the sums are exact in any order.
        `weighted` False: without the weight bytes (a pipeline's micro-batch reads them at its own token count:
        serving.pipeline)."""
        m = self.model
        q = self._const * (len(context) + pad)
        if len(context) and len(self._dec_at):
            q[self._dec_at] += m._dec_rows[context].sum(axis=0)
        n_tokens = len(context) + pad
        if start is not None and len(tokens):
            n_new, n_done = int(tokens.sum()), int(np.count_nonzero(done))
            n_tokens += n_new
            q += self._pre_slope * n_new + self._pre_intercept * n_done
            pre, dec = m._pre_rows, m._dec_rows
            for s, c, d in zip(start.tolist(), tokens.tolist(), done.tolist(), strict=True):
                if len(self._pre_at):
                    q[self._pre_at] += pre[s + c] - pre[s] + pre[0] if d else pre[s + c] - pre[s]
                if len(self._prefix_at):
                    q[self._prefix_at] += dec[s] - dec[0]
        if weighted:
            q += self._weights[(decodes > 0, bool(chunks))][min(n_tokens, m.max_step_tokens)]
        return q

    def chunk_work(self, start: np.ndarray, tokens: np.ndarray, done: np.ndarray, pad: int = 0) -> np.ndarray:
        """`work` of a step of prefill chunks only (no decode sequences), vectorised over the chunks: a speculative
        verify step (serving.speculative: each decoding sequence's last token and its drafts are a chunk after its
        cached tokens) and a draft model's first pass. Whole-number tables: the same sums as `work`'s loop."""
        m = self.model
        n_new, n_done = int(tokens.sum()), int(np.count_nonzero(done))
        q = self._const * pad + (self._pre_slope * n_new + self._pre_intercept * n_done)
        if len(self._pre_at):
            pre = m._pre_rows
            q[self._pre_at] += pre[start + tokens].sum(axis=0) - pre[start].sum(axis=0) + pre[0] * n_done
        if len(self._prefix_at):
            q[self._prefix_at] += m._dec_rows[start].sum(axis=0) - m._dec_rows[0] * len(start)
        q += self._weights[(False, True)][min(n_new + pad, m.max_step_tokens)]
        return q

    def micro(self, seqs: int, tokens: int, decodes: int) -> Micro:
        """The micro-batch of a pipelined step (pp > 1: serving.pipeline.micro)."""
        return micro(self.model.phases, seqs, tokens, decodes, self.model.max_step_tokens)

    def pipelined(self, context: np.ndarray, pad: int, start=None, tokens=None, done=None) -> float:
        """GPU seconds of one step on pp > 1 stages (StepModel.step_time's pipeline branch): the micro-batch's work
        (the step's non-weight work x its scale, the weights at its tokens) through the law, then the pipeline's
        stage slots (serving.pipeline, engines.timing.pipeline_slots). Arguments as `work`'s."""
        n, chunks = len(context), tokens is not None and len(tokens) > 0
        q = self.work(context, pad, n, chunks, start, tokens, done, weighted=False)
        mb = self.micro(n + (len(tokens) if chunks else 0), n + pad + (int(tokens.sum()) if chunks else 0), n)
        whole = self.total((q * mb.scale + self._weights[(n > 0, chunks)][mb.tokens]).tolist(),
                           self.model.imbalance(mb.decodes))
        return float(mb.outer(whole))

    def time(self, q: np.ndarray, decodes: int) -> float:
        """Whole-model time of a step whose work's live entries are q, with `decodes` decode sequences."""
        return self.total(q.tolist(), self.model.imbalance(decodes))

    def decode_ends(self, context: np.ndarray, steps: int, pad: int, combine, until_s: float) -> np.ndarray:
        """End times, from the block's start, of `steps` decode-only steps of the sequences at `context` (each padded by
        `pad`), `combine` turning GPU seconds into the step's wall time; stops after the step that ends at or past
        `until_s`, as Simulator.block_ends does."""
        n = len(context)
        slow = self.model.imbalance(n)
        dq = self._slope_live * n
        phases = self.model.phases
        mb = self.micro(n, n + pad, n) if phases.workload.pp > 1 or phases.micro_count(n, n + pad) > 1 else None
        if mb is not None:  # pp > 1 or passes: the block's micro-batch is the same at every step (serving.pipeline)
            slow, dq, host_combine = self.model.imbalance(mb.decodes), dq * mb.scale, combine
            weights = self._weights[(True, False)][mb.tokens]

            def combine(gpu):  # the micro-batch's law -> the pipelined step's GPU time -> its wall time
                return host_combine(mb.outer(gpu))
        ends: list[float] = []
        s = 0
        while s < steps:
            at = context + s
            room = int((self.irregular[np.searchsorted(self.irregular, at)] - at).min())
            last = min(steps - 1, s + room)  # q is affine in the step on [s, last]
            q0 = self.work(at, pad, n, False, weighted=mb is None)
            if mb is not None:
                q0 = q0 * mb.scale + weights
            # an op that gains work but has none at the segment's start would start launching inside it: a jump
            convex = all(q0[pos].sum() > 0 for pos in self._may_start)
            self._segment(q0, dq, last - s, slow, combine, until_s, ends, convex)
            if ends[-1] >= until_s:
                break
            s = last + 1
        return np.array(ends)

    def _segment(self, q0, dq, span: int, slow: float, combine, until_s: float, ends: list[float],
                 convex: bool) -> None:
        """Append to `ends` the end times of steps 0..span of an affine-work segment (stops at until_s)."""
        memo: dict[int, float] = {}
        total = self.total

        def f(*points: int) -> list[float]:
            new = [i for i in points if i not in memo]
            if new:
                rows = (q0 + np.array(new, dtype=np.float64)[:, None] * dq).tolist()
                times = combine(np.array([total(row, slow) for row in rows]))  # an array in, an array out
                memo.update(zip(new, times.tolist(), strict=True))
            return [memo[i] for i in points]

        acc = ends[-1] if ends else 0.0
        todo = [(0, span)]
        while todo:
            a, b = todo.pop()
            if b - a >= 2 and convex:
                t0, t1, tb = f(a, a + 1, b)
                d = t1 - t0
                if abs(tb - (t0 + (b - a) * d)) > LINEAR_RTOL * tb:
                    mid = (a + b) // 2
                    todo += [(mid + 1, b), (a, mid)]
                    continue
                piece = [t0 + j * d for j in range(b - a + 1)]
            else:
                piece = f(*range(a, b + 1))
            for t in piece:
                acc += t
                ends.append(acc)
            if acc >= until_s:
                return
