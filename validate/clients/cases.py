"""The clients' measurement grid and the run of one model through it.

Each (model, client form) is timed at every decode shape (B, L) and prefill prompt P (batch 1); forms:
  compiled   torch.compile of the decoder layer (dynamic shapes), the step captured in a CUDA graph
  eager      the same layer, each aten op its own kernel, the step captured in a CUDA graph
Rows: {"family": "client", "name", "params": {model, layers, client, phase, batch, context|prompt},
       "ms", "ms_p10", "ms_p90", "weight_bytes", "kv_bytes"} (+ "kernels", "top_kernels" once per form).
"""

from __future__ import annotations

import gc
import time

import torch

from validate.clients.decoder import Decoder, Dims, cache_bytes, make_caches, model_weights, weight_bytes
from validate.clients.grid import FORMS, case_name, shapes_for
from validate.clients.timing import capture, kernel_census, replay_ms


def _step_case(decoder: Decoder, dims: Dims, phase: str, batch: int, length: int, census: bool) -> dict:
    caches = make_caches(dims, batch, length, "cuda")
    if phase == "decode":
        tokens = torch.randint(0, dims.vocab, (batch, 1), device="cuda")
        pos = torch.tensor([length - 1], device="cuda")
    else:
        tokens = torch.randint(0, dims.vocab, (batch, length), device="cuda")
        pos = torch.arange(length, device="cuda")
    out: dict = {}

    def step():
        out["logits"] = decoder.step(tokens, caches, pos, phase == "decode")

    graph = capture(step)
    row = replay_ms(graph)
    if census:
        row.update(kernel_census(step))
    if not torch.isfinite(out["logits"].float()).all():
        row["warning"] = "non-finite logits"
    row["kv_bytes"] = cache_bytes(dims, batch, length)
    return row


def run_model(name: str, model_dump: dict, layers: int | None, deadline: float, log=print) -> list[dict]:
    """Every form and shape of one catalogue model; cases past `deadline` (time.time()) are skipped."""
    dims = Dims.of(model_dump, layers)
    torch.manual_seed(0)
    weights = model_weights(dims, "cuda")
    wbytes = weight_bytes(weights)
    decode, prefill = shapes_for(dims.experts, model_dump["max_position_embeddings"])
    rows = []
    for form in FORMS:
        decoder = Decoder(dims, weights, compiled=form == "compiled")
        grid = [("decode", b, n) for b, n in decode] + [("prefill", 1, p) for p in prefill]
        for i, (phase, b, n) in enumerate(grid):
            key = "context" if phase == "decode" else "prompt"
            params = {"model": name, "layers": dims.layers, "client": form, "phase": phase, "batch": b, key: n}
            row = {"family": "client", "name": case_name(params), "params": params}
            if time.time() > deadline:
                rows.append({**row, "skipped": "deadline"})
                continue
            t0 = time.time()
            try:
                # the kernel census once per form and phase, at the first shape
                census = i == 0 or (phase == "prefill" and grid[i - 1][0] == "decode")
                row.update(_step_case(decoder, dims, phase, b, n, census), weight_bytes=wbytes)
            except torch.cuda.OutOfMemoryError as err:
                row["skipped"] = f"out of memory: {str(err).splitlines()[0][:160]}"
            except Exception as err:  # one failed case must not lose the others
                row["error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
            gc.collect()
            torch.cuda.empty_cache()
            rows.append(row)
            log(f"  {row['name']}: {row.get('ms', row.get('skipped') or row.get('error'))} ({time.time() - t0:.1f} s)")
    del weights
    gc.collect()
    torch.cuda.empty_cache()
    return rows
