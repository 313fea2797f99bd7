"""What holds the activation peak of the compiled client's prefill chunk (torch only).

    python -m validate.clients.memprofile --out OUT.json [--chunk 8192]

The memory boundary (validate.clients.memory) finds a peak of ~2.0 GB above weights + KV cache on H100 and H200
where the planner's activation formula (planner.memory.activation_peak) gives 0.84 GB for Llama-3.1-8B at an
8192-token chunk. This records the CUDA caching allocator's history over one prefill chunk (after a warm-up that
compiles), replays it to find the moment of the peak, and groups the blocks alive then by the source line that
allocated them (the decoder's, or Inductor's generated code), with their sizes in tokens x elements.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path


def _where(frames: list[dict]) -> str:
    """The first frame in the decoder or in generated code, else the first frame."""
    for f in frames:
        name = f.get("filename", "")
        if "validate/clients" in name or "torchinductor" in name or "/tmp/" in name:
            return f"{name.rsplit('/', 1)[-1]}:{f.get('line')} {f.get('name', '')}"
    return f"{frames[0].get('filename', '?').rsplit('/', 1)[-1]}:{frames[0].get('line')}" if frames else "?"


def peak_composition(trace: list[dict]) -> dict:
    """Replay alloc/free events: the peak of live bytes and the live blocks then, grouped by allocating line."""
    live: dict[int, tuple[int, str]] = {}
    total = peak = 0
    peak_live: dict[int, tuple[int, str]] = {}
    for e in trace:
        action, addr, size = e.get("action"), e.get("addr"), e.get("size", 0)
        if action == "alloc":
            live[addr] = (size, _where(e.get("frames", [])))
            total += size
            if total > peak:
                peak, peak_live = total, dict(live)
        elif action in ("free_requested", "free_completed") and addr in live:
            total -= live.pop(addr)[0]  # the first of the two events frees it
    groups: dict[str, list[int]] = defaultdict(list)
    for size, where in peak_live.values():
        groups[where].append(size)
    rows = sorted(({"where": w, "blocks": len(s), "bytes": sum(s)} for w, s in groups.items()),
                  key=lambda r: -r["bytes"])
    return {"peak_live_bytes": peak, "groups": rows[:40]}


def main(argv=None) -> int:
    """One compiled prefill chunk of Llama-3.1-8B under the allocator's history; write OUT.json."""
    parser = argparse.ArgumentParser(prog="validate.clients.memprofile")
    parser.add_argument("--out", required=True)
    parser.add_argument("--chunk", type=int, default=8192)
    parser.add_argument("--decode", default=None, help="B-L: profile one compiled decode step of B sequences at L "
                        "instead (the boundary's other half)")
    parser.add_argument("--caches", default=None, help="B-L: prefill against caches of B sequences at L (as the "
                        "boundary's _fits does: one prompt of --chunk tokens written into a batch-B cache)")
    args = parser.parse_args(argv)
    import torch

    from validate.clients.decoder import Decoder, make_caches, model_weights
    from validate.clients.profile_step import _dims

    dims = _dims("llama")
    torch.manual_seed(0)
    weights = model_weights(dims, "cuda")
    decoder = Decoder(dims, weights, compiled=True)
    if args.decode:
        batch, length = (int(x) for x in args.decode.split("-"))
        caches = make_caches(dims, batch, length, "cuda")
        tokens = torch.randint(0, dims.vocab, (batch, 1), device="cuda")
        pos, decode = torch.tensor([length - 1], device="cuda"), True
    else:
        cb, cl = (int(x) for x in args.caches.split("-")) if args.caches else (1, args.chunk)
        caches = make_caches(dims, cb, cl, "cuda")
        tokens = torch.randint(0, dims.vocab, (1, args.chunk), device="cuda")
        pos, decode = torch.arange(args.chunk, device="cuda"), False
    decoder.step(tokens, caches, pos, decode)  # compile
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=200_000)
    decoder.step(tokens, caches, pos, decode)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak = torch.cuda.max_memory_allocated()
    result = {"env": {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                      "date": time.strftime("%Y-%m-%d")},
              "chunk": args.chunk, "decode": args.decode, "caches": args.caches,
              "allocated_before_bytes": base, "peak_allocated_bytes": peak,
              "activation_peak_bytes": peak - base, **peak_composition(snapshot["device_traces"][0])}
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"activation peak {(peak - base) / 1e9:.3f} GB over {base / 1e9:.2f} GB; top groups:")
    for g in result["groups"][:12]:
        print(f"  {g['bytes'] / 1e6:9.1f} MB  {g['blocks']:4d}  {g['where']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
