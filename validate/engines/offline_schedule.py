"""What lat.py's (and prof.py's) decode figure measures, as the engine schedules it: (t(out=N) - t(out=1)) / (N - 1)
of B prompts of P tokens submitted together to vLLM's offline LLM class, each step costed by the planner.

When B x P exceeds the step's token budget (max_num_batched_tokens, 16,384 on the H200 runs), vLLM's scheduler
(vllm/v1/core/sched/scheduler.py v0.24.0, schedule(): running requests first, in order, each its next token or
its next prompt chunk, then waiting requests in arrival order, within the token budget) lets the requests whose
prompts finished early decode inside the steps that still prefill the others (mixed steps), and the last requests
decode a few steps after the first ones stop: the differenced window is then not N - 1 pure decode steps at B
(validate/notes/2026-11-29-attribute.md: 3 mixed steps at B = 256, P = 256; 1 at B = 128, P = 512). This module
replays that schedule step by step for both runs (N outputs and 1) and differences them as lat.py does.

A decode-only step is the planner's decode step (PhaseModel.decode_time); a step with a prompt chunk is the serving
simulator's mixed-step model (roofline.serving.stepmodel.StepModel: every part's
work added up per op, weights read once per step), padded to the engine's capture size when its tokens fit one
(vLLM pads any step's tokens: roofline.engines.scheduling pad_scope 'tokens'), plus the engine's sampler over the
rows it samples (decodes and prompts that finish in the step); its wall time is EngineTiming.step with the step's
sequences and, past the largest capture size, the eager launch cost (PhaseModel.eager_host_s).
"""

from __future__ import annotations

import numpy as np


def step_wall_s(pm, steps, decode_ctx: list[int], chunks: list[tuple[int, int, bool]]) -> float:
    """Wall seconds of one step with decodes at `decode_ctx` and prompt chunks (start, tokens, ends the prompt): a
    decode-only step is the planner's own decode step (PhaseModel.decode_time at the mean context: the engine's
    per-tile attention cost, which StepModel's aggregated op times leave out, included), a step with a chunk the
    mixed-step model."""
    if not chunks:
        return pm.decode_time(len(decode_ctx), sum(decode_ctx) / len(decode_ctx))
    engine = pm.engine
    tokens = len(decode_ctx) + sum(c for _, c, _ in chunks)
    pad = engine.padded(tokens) - tokens
    gpu = steps.step_time(np.array(decode_ctx, dtype=np.int64), np.array([s for s, _, _ in chunks], dtype=np.int64),
                          np.array([c for _, c, _ in chunks], dtype=np.int64),
                          np.array([d for _, _, d in chunks], dtype=bool), pad)
    rows = len(decode_ctx) + sum(d for _, _, d in chunks)
    return engine.step(float(gpu) + pm.sampler_s(rows), len(decode_ctx) + len(chunks), pm.eager_host_s(tokens))


def makespan_s(pm, steps, batch: int, prompt: int, out_tokens: int, budget: int,
               max_seqs: int = 1024) -> tuple[float, int]:
    """(seconds, steps) until `batch` prompts of `prompt` tokens submitted together have `out_tokens` tokens each
    (module docstring: FIFO within the token budget and max_num_seqs, a prompt's last chunk samples its first
    token)."""
    done = [0] * batch
    generated = [0] * batch
    total, count = 0.0, 0
    while min(generated) < out_tokens:
        left, decode_ctx, chunks, plan = budget, [], [], []
        for i in range(batch):
            if left == 0 or len(plan) == max_seqs:
                break
            if generated[i] >= out_tokens:
                continue
            if done[i] == prompt:
                decode_ctx.append(prompt + generated[i])
                plan.append((i, 1))
                left -= 1
            else:
                c = min(prompt - done[i], left)
                chunks.append((done[i], c, done[i] + c == prompt))
                plan.append((i, c))
                left -= c
        total += step_wall_s(pm, steps, decode_ctx, chunks)
        count += 1
        for i, c in plan:
            if done[i] == prompt:
                generated[i] += 1
            else:
                done[i] += c
                generated[i] += done[i] == prompt
    return total, count


def offline_decode_step_s(pm, batch: int, prompt: int, out_tokens: int, budget: int, max_seqs: int = 1024) -> float:
    """lat.py's decode step, (t(out=N) - t(out=1)) / (N - 1), of the replayed schedule (module docstring);
    `budget` and `max_seqs`: the engine's max_num_batched_tokens and max_num_seqs. A model whose prefill graph has
    a weight op the decode graph lacks (MLA's kv_b_proj up-projection) is beyond StepModel's matching of the two
    graphs (its weights per chunk stay symbolic): there the mean pure decode step (PhaseModel.average_decode_time)."""
    from roofline.serving.stepmodel import StepModel

    decode_ops = {op.name for op in pm.decode.ops}
    if any(op.name not in decode_ops and "weights" in op.traffic for op in pm.prefill.ops):
        return pm.average_decode_time(batch, prompt + 1, out_tokens - 1)
    steps = StepModel(pm, prompt + out_tokens + 1, budget + 512)
    long_run, _ = makespan_s(pm, steps, batch, prompt, out_tokens, budget, max_seqs)
    short_run, _ = makespan_s(pm, steps, batch, prompt, 1, budget, max_seqs)
    return (long_run - short_run) / (out_tokens - 1)
