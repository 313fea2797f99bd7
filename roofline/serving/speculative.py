"""Speculative decoding: a draft proposes K tokens, the target verifies them in one step, and the accepted prefix
plus one token of the target's own is emitted.

Per decoding sequence and step (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding",
ICML, Sec. 3; the per-position form of vLLM's spec-decode metrics, acceptance rate per draft position):
- acceptance: draft k (1..K) is accepted with probability a_k given drafts 1..k-1 were (the input, per position;
  one value means the same at every position); the accepted count m is the number of leading successes, and the
  step emits m + 1 tokens: E[tokens per step] = 1 + sum_k prod_{j<=k} a_j.
- target cost: the verify step runs each sequence's last token and its K drafts, a chunk of K + 1 tokens after a
  cached prefix (the step model's chunk path, the planner's one step-time path) with one logits row per sequence.
- draft cost: K draft passes one after another. A draft model (`draft:MODEL`, its own PhaseModel) runs them as
  vLLM 0.24's SpecDecodeBaseProposer.propose does (vllm/v1/spec_decode/llm_base_proposer.py@v0.24.0, lines
  443-687): the first pass over every token the target ran in the step plus one slot per request for its sampled
  token (set_inputs_first_pass with needs_extra_input_slots: a draft model passes no hidden states, so
  net_num_new_slots_per_request = 1) -- K + 2 tokens after the cached context - 1 for a verifying sequence, a prompt
  chunk's tokens + 1 for a prefilling one (the draft fills its own KV with every prompt, and every request of the
  batch gets a draft, kept or discarded) -- with one logits row per request; then K - 1 passes of one token per
  request. Under vLLM each pass takes at least the drafter's host work (roofline/engines/timing.py 7: the drafter
  launches its attention from Python once per layer per pass; measured multiprocess, validate/engines run 6): a pass
  costs max(its GPU time, draft_pass_s + draft_layer_s x the draft's layers). EAGLE `eagle` and MTP `mtp` heads:
  one instance of each target op (one decoder layer, embedding and LM head) per pass over the decoding sequences.
- memory: the draft's weights leave the pool (a draft model's whole weights; EAGLE / MTP: one layer's share of the
  target's), and every sequence holds the draft's KV next to its own (a draft model's own per-sequence bytes; EAGLE /
  MTP: one layer's share of the target's); a verifying sequence reserves pages for its K drafts.
TPOT: (verify step + K draft passes) / E[tokens per step] (`tpot_s`), what the simulator's TPOT must match for a
lone request (tests/test_serving_speculative.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.errors import SpecError

METHODS = ("draft", "eagle", "mtp")
SPEC_SEED = 0  # the acceptance draws of speculative decoding: the same in every run (common random numbers)


@dataclass(frozen=True)
class Speculative:
    """K draft tokens per step, accepted with per-position probabilities; `draft_model`: the draft's catalogue
    name for method 'draft'."""

    method: str
    tokens: int
    acceptance: tuple[float, ...]
    draft_model: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"--speculative: method {self.method!r} is not one of {', '.join(METHODS)}")
        if not 1 <= self.tokens <= 16:
            raise ValueError(f"--speculative: {self.tokens} draft tokens; use 1 to 16")
        if len(self.acceptance) != self.tokens or not all(0 <= a <= 1 for a in self.acceptance):
            raise ValueError(f"--speculative: give one acceptance in [0, 1] or one per draft position "
                             f"({self.tokens})")
        if (self.method == "draft") != (self.draft_model is not None):
            raise ValueError("--speculative: a draft model is named as draft=MODEL, and only for that method")

    @classmethod
    def parse(cls, text: str) -> Speculative:
        """METHOD:K:A[,A...] with METHOD eagle, mtp or draft=MODEL; A the acceptance (one, or one per position)."""
        try:
            method, k, acc = text.split(":")
            kind, _, model = method.partition("=")
            values = tuple(float(a) for a in acc.split(","))
            k_int = int(k)
            if len(values) == 1:
                values = values * k_int
            return cls(kind, k_int, values, model or None)
        except ValueError as err:
            msg = str(err) if str(err).startswith("--speculative") else (
                f"--speculative: {text!r} is not METHOD:K:ACCEPTANCE (eagle:3:0.8 | mtp:1:0.9 | "
                "draft=Llama-3.2-1B:4:0.8,0.7,0.6,0.5)")
            raise SpecError(msg) from None

    def expected_tokens(self) -> float:
        """E[tokens per step] = 1 + sum over k of the probability that drafts 1..k are all accepted."""
        return 1.0 + float(np.cumprod(self.acceptance).sum())

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Accepted drafts of n sequences: leading successes of K Bernoulli draws at the per-position rates."""
        ok = rng.random((n, self.tokens)) < np.asarray(self.acceptance)
        return np.cumprod(ok, axis=1).sum(axis=1)

    def tpot_s(self, verify_s: float, draft_s: float) -> float:
        """Time per output token: one verify step and its K draft passes per E[tokens per step]."""
        return (verify_s + draft_s) / self.expected_tokens()


class DraftCost:
    """The draft's time per step and its KV bytes per sequence, for a Simulator's target."""

    def __init__(self, spec: Speculative, sim, max_tokens: int) -> None:
        from roofline.catalogue import load_model
        from roofline.planner.memory import memory_budget, weights_per_gpu
        from roofline.planner.phases import PhaseModel
        from roofline.serving.pool import KVPool
        from roofline.serving.stepmodel import StepModel

        self.spec, self.sim = spec, sim
        if spec.method == "draft":
            model = load_model(spec.draft_model)
            if model.vocab_size != sim.model.vocab_size:
                raise SpecError(f"--speculative: draft {model.name} has a vocabulary of {model.vocab_size}, the "
                                f"target {sim.model.vocab_size}: they must match")
            wl = sim.workload.model_copy(update={"context_tokens": max_tokens})
            phases = PhaseModel.build(model, sim.hardware, wl, sim.method)
            # the first pass runs the target's tokens and a slot per request; later passes reach context + K + 1
            self.steps = StepModel(phases, max_tokens + 2, sim.steps.max_step_tokens + sim.scheduler.max_num_seqs)
            draft_pool = KVPool.from_planner(model, sim.hardware, wl, phases.cache, max_tokens)
            self.seq_bytes = draft_pool.seq_bytes
            self.weights_bytes = float(memory_budget(model, sim.hardware, wl, phases.cache).weights)
            self.pass_host_s = draft_pass_host_s(sim.engine, model.num_layers)
        else:
            self.steps = None
            self.pass_host_s = 0.0  # an EAGLE / MTP head's passes: host work not measured (async scheduling stays on)
            layers = sim.model.num_layers
            self.seq_bytes = sim.pool.seq_bytes[:max_tokens + 1] / layers
            self.weights_bytes = float(weights_per_gpu(sim.model, sim.workload)) / layers
        self.closed = None  # the passes through serving.closedform when the target's steps go that way
        if sim.closed is not None:
            from roofline.serving.closedform import ClosedForm
            self.closed = ClosedForm(self.steps) if self.steps is not None else ClosedForm(sim.steps, once=True)

    def time_s(self, context: np.ndarray, chunk_start: np.ndarray | None = None,
               chunk_tokens: np.ndarray | None = None) -> float:
        """The K draft passes of a step whose decoding sequences are at `context` (tokens attended by the first
        pass) and whose prompt chunks start at `chunk_start` with `chunk_tokens` new tokens (the module docstring:
        a draft model's passes cover the chunks too; an EAGLE / MTP head's, the decoding sequences only)."""
        empty = np.zeros(0, dtype=np.int64)
        starts = empty if chunk_start is None else chunk_start
        counts = empty if chunk_tokens is None else chunk_tokens
        if self.closed is not None:
            return self._closed_s(context, starts, counts)
        if self.steps is not None:
            return self._draft_model_s(context, starts, counts)
        total, st = 0.0, self.sim.steps
        for k in range(self.spec.tokens):
            q = st.work(context + k, empty, empty, empty.astype(bool))
            total += st.once_time(q, len(context), len(context), False)
        return total

    def _draft_model_s(self, context: np.ndarray, chunk_start: np.ndarray, chunk_tokens: np.ndarray) -> float:
        """A draft model's passes (vLLM's propose): one over the step's tokens and a slot per request, each
        request's tokens a chunk after its cached prefix with one logits row, then K - 1 one-token passes."""
        k, empty = self.spec.tokens, np.zeros(0, dtype=np.int64)
        starts = np.concatenate([context - 1, chunk_start])
        counts = np.concatenate([np.full(len(context), k + 2), chunk_tokens + 1])
        floor = self.pass_host_s
        total = max(floor, self.steps.step_time(empty, starts, counts, np.ones(len(starts), dtype=bool)))
        after = np.concatenate([context + 1, chunk_start + chunk_tokens + 1])  # tokens held after the first pass
        for j in range(1, k):
            total += max(floor, self.steps.step_time(after + j, empty, empty, empty.astype(bool)))
        return total

    def _closed_s(self, context: np.ndarray, chunk_start: np.ndarray, chunk_tokens: np.ndarray) -> float:
        """time_s through serving.closedform (the same passes, the same times to float rounding): a draft model's
        first pass as chunks (ClosedForm.chunk_work), its later passes and an EAGLE / MTP head's as decode steps
        (a head's law counts each op once: ClosedForm(once=True), StepModel.once_time)."""
        cf, k = self.closed, self.spec.tokens
        if self.steps is None:
            n = len(context)
            return sum(cf.time(cf.work(context + j, 0, n, False), n) for j in range(k))
        starts = np.concatenate([context - 1, chunk_start])
        counts = np.concatenate([np.full(len(context), k + 2), chunk_tokens + 1])
        floor = self.pass_host_s
        total = max(floor, cf.time(cf.chunk_work(starts, counts, np.ones(len(starts), dtype=bool)), 0))
        after = np.concatenate([context + 1, chunk_start + chunk_tokens + 1])  # tokens held after the first pass
        n = len(after)
        for j in range(1, k):
            total += max(floor, cf.time(cf.work(after + j, 0, n, False), n))
        return total


def draft_pass_host_s(engine, draft_layers: int) -> float:
    """The host work of one pass of a draft of `draft_layers` layers under `engine` (an EngineScheduling or None):
    vLLM's measured law (roofline/engines/timing.py 7), 0 for the ideal engine or one not measured."""
    if engine is None or engine.engine != "vllm":
        return 0.0
    from roofline.engines.timing import timing_on

    return timing_on("vllm", engine.host_speed).draft_pass_host_s(draft_layers)


def speculative_pool(pool, draft: DraftCost, max_tokens: int):
    """The target's pool with the draft's weights taken out and its KV added to every sequence."""
    from dataclasses import replace

    seq = pool.seq_bytes[:max_tokens + 1] + draft.seq_bytes[:max_tokens + 1]
    capacity = pool.capacity_bytes - draft.weights_bytes
    if not capacity > 0 or not math.isfinite(capacity):
        raise SpecError("--speculative: the draft's weights leave no room for the KV pool")
    return replace(pool, capacity_bytes=capacity, seq_bytes=seq, source=pool.source + " + speculative draft")
