"""Memory boundary: the largest context at batch B that the compiled client runs.

A context fits when, next to the model's weights, the static KV cache of B x L tokens can be allocated and
both a decode step at L (graph-captured) and a prefill chunk of min(L, CHUNK) tokens of one sequence run.
Bisection over L in steps of GRANULE tokens; the CUDA context's share of the device (total - free before
the first allocation) and torch's peak allocation at the limit are recorded.
"""

from __future__ import annotations

import gc

import torch

from validate.clients.decoder import Decoder, Dims, make_caches, model_weights, weight_bytes
from validate.clients.timing import capture

CHUNK = 8192
GRANULE = 256


def _fits(decoder: Decoder, dims: Dims, batch: int, length: int) -> bool:
    held: dict = {}
    try:
        held["caches"] = make_caches(dims, batch, length, "cuda")
        chunk = min(length, CHUNK)
        decoder.step(torch.randint(0, dims.vocab, (1, chunk), device="cuda"), held["caches"],
                     torch.arange(chunk, device="cuda"), False)
        tok = torch.randint(0, dims.vocab, (batch, 1), device="cuda")
        pos = torch.tensor([length - 1], device="cuda")
        # the eager warm-up call inside capture() meets an out-of-memory before the capture itself would
        held["graph"] = capture(lambda: decoder.step(tok, held["caches"], pos, True), warm_calls=1)
        held["graph"].replay()
        torch.cuda.synchronize()
        return True
    except torch.cuda.OutOfMemoryError:
        return False
    finally:
        held.clear()
        gc.collect()
        torch.cuda.empty_cache()


def boundary(name: str, model_dump: dict, batch: int, free_at_start: int, log=print, warm: bool = False) -> dict:
    """{largest context that runs, the bisection's probes, memory figures}; `warm`: compile both paths at a small
    size before the bisection (the steady state a server runs in)."""
    dims = Dims.of(model_dump)
    torch.manual_seed(0)
    weights = model_weights(dims, "cuda")
    decoder = Decoder(dims, weights, compiled=True)
    per_token = 2 * dims.layers * dims.kv_heads * dims.head_dim * 2 * batch
    total = torch.cuda.get_device_properties(0).total_memory
    hi = (total - weight_bytes(weights)) // per_token // GRANULE + 1
    lo = 1
    probes = []
    if warm:
        # compile both paths at a small size first: Inductor's first call at a shape compiles and benchmarks its
        # kernels (the autotuner clones the buffers a kernel mutates: here a layer's K and V caches, ~2 GB at the
        # boundary), a transient no serving step holds; without this the first probes can fail on it
        _fits(decoder, dims, batch, GRANULE)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        ok = _fits(decoder, dims, batch, mid * GRANULE)
        probes.append([mid * GRANULE, ok])
        log(f"  memory {name} b{batch} L={mid * GRANULE}: {'fits' if ok else 'out of memory'}")
        lo, hi = (mid, hi) if ok else (lo, mid - 1)
    torch.cuda.reset_peak_memory_stats()
    _fits(decoder, dims, batch, lo * GRANULE)
    row = {"family": "client_memory", "name": f"{name}/memory/b{batch}",
           "params": {"model": name, "batch": batch, "client": "compiled", "prefill_chunk": CHUNK,
                      "granule": GRANULE, "warm_compile": warm},
           "max_context": lo * GRANULE, "probes": probes, "total_memory_bytes": total,
           "free_at_start_bytes": free_at_start, "weight_bytes": weight_bytes(weights),
           "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
           "peak_reserved_bytes": torch.cuda.max_memory_reserved()}
    del decoder, weights
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main(argv=None) -> int:
    """Torch only (no pydantic): the boundary of Llama-3.1-8B at batch 16 with the compile warm-up; writes OUT."""
    import argparse
    import json
    import time
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="validate.clients.memory")
    parser.add_argument("--out", required=True)
    parser.add_argument("--cold", action="store_true", help="no compile warm-up (the earlier runs' procedure)")
    args = parser.parse_args(argv)
    # Llama-3.1-8B config.json (the catalogue's entry, as Dims.of reads it)
    dump = {"num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
            "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False}
    free, _ = torch.cuda.mem_get_info()
    row = boundary("Llama-3.1-8B", dump, 16, free, warm=not args.cold)
    row["env"] = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                  "date": time.strftime("%Y-%m-%d")}
    Path(args.out).write_text(json.dumps({"cases": [row]}, indent=1))
    print(json.dumps({k: row[k] for k in ("max_context", "peak_allocated_bytes", "weight_bytes",
                                          "free_at_start_bytes")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
