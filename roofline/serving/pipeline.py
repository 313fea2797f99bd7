"""A pipeline-parallel step (pp > 1) as the fast paths time it: PhaseModel.pipeline's law on a step's work.

PhaseModel.pipeline (roofline/planner/phases.py) times a step of `seqs` sequences on pp stages with
m = min(micro_batches, seqs) micro-batches of b = seqs / m sequences as

    slots x (T(b) / pp + handoff(b)),   slots = max(m, pp), or m + pp - 1 (engines.timing 26.)

the steady state of an engine that keeps its batches in flight from step to step (vLLM's batch queue, SGLang's
event_loop_pp: each stage works on one micro-batch while the next works on another), or for an engine that drains
its pipeline every step a GPipe-style fill and drain (the bubble is pp - 1 of the m + pp - 1 stage slots, as in
Huang et al., "GPipe", arXiv:1811.06965): each micro-batch spends T(b) / pp on each of the pp equal stages (T: the
whole model's time of a micro-batch) and hands its b activation rows (hidden_size x activation_bytes each) to the
next stage over the scale-up link within its domain, else the scale-out, plus that link's latency
(PhaseModel._handoff, handoff_link).
StepModel.step_time forms a micro-batch from the step's aggregated work: its non-weight work scaled by b / seqs
(each sequence's work in one micro-batch), the weights read at rint(tokens x b / seqs) tokens (the micro-batch's
share of the step's tokens, pad included) and the decode attention's imbalance at ceil(decodes x b / seqs)
sequences.

The law holds no state from one step to the next: its micro-batch count depends on the step's own sequences only.
In a decode-only block of n sequences (n sequences and n + pad tokens at every step) the scale, the weight row, the
imbalance and the outer affine map are therefore constants of the block: the micro-batch's work stays affine in the
step between the decode table's irregular contexts, and the step time, an increasing affine map of a convex
nondecreasing law, stays convex and nondecreasing. ClosedForm's block evaluation (serving.closedform) and the
compiled loop (serving.kernel_pipeline) apply unchanged; tests compare them
with StepModel.step_time's numpy reference (tests/serving/test_serving_kernel_pp.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.engines.timing import pipeline_slots


@dataclass(frozen=True)
class Micro:
    """One pipelined step's micro-batch: the non-weight work's scale b / seqs, the micro-batch's tokens (the weight
    row read) and decode sequences (the imbalance's batch), the stage slots (engines.timing.pipeline_slots), pp, the
    handoff's seconds."""

    scale: float
    tokens: int
    decodes: int
    slots: int
    pp: int
    handoff_s: float

    def outer(self, whole_s):
        """The step's seconds from the micro-batch's whole-model seconds (a float or an array of steps)."""
        return self.slots * (whole_s / self.pp + self.handoff_s)


def micro(phases, seqs: int, tokens: int, decodes: int, max_step_tokens: int) -> Micro:
    """The micro-batch of a step of `seqs` sequences (`decodes` of them decoding) over `tokens` tokens, by
    PhaseModel.pipeline's rule and StepModel.step_time's split (module docstring); weight rows past
    `max_step_tokens` are capped as StepModel._op_times caps them."""
    workload = phases.workload
    m = phases.micro_count(seqs, tokens)
    b = seqs / m
    return Micro(b / seqs, min(int(np.rint(tokens * b / seqs)), max_step_tokens), math.ceil(decodes * b / seqs),
                 int(pipeline_slots(workload.engine, m, workload.pp)), workload.pp, phases._handoff(b))


def handoff_terms(phases) -> tuple[float, float, float]:
    """PhaseModel._handoff(b) = b x bytes / bytes_per_s + latency_s: (bytes per sequence, bytes_per_s, latency_s) of
    the link a stage hands its activations over (zeros and 1 B/s when pp = 1 or the device has no link), for the
    compiled loop (serving.kernel_pipeline)."""
    link = phases.handoff_link()
    if link is None:
        return 0.0, 1.0, 0.0
    return (float(phases.model.hidden_size * phases.workload.activation_bytes), float(link.bytes_per_s),
            float(link.latency_s))
