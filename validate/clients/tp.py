"""torchrun --nproc_per_node=N -m validate.clients.tp --out FILE   (on a multi-GPU box; torch only)

1. NCCL all-reduce of bf16 messages from 16 KB to 256 MB (decode: B x d x 2 bytes; prefill: P x d x 2), each
   size as 20 back-to-back all-reduces captured in one CUDA graph (as a decode step captures them), median of
   the replays / 20; also the eager loop (host launch included). The sum is checked.
2. A tensor-parallel decode step of the gpt-fast-style decoder (validate/clients/decoder.py) at tp = N,
   Megatron sharding: fused QKV and gate/up column-parallel (heads, kv heads and intermediate split N ways),
   o-proj and down-proj row-parallel, each followed by an all-reduce of [B, d]; embedding replicated, LM head
   vocab-parallel with no logits gather (the roofline graph's shapes). The layer is split at the two
   all-reduces into two torch.compile'd halves (the collectives stay outside the compiled code); the whole
   step is captured in a CUDA graph and timed by its replays (median of 30, on rank 0; all ranks replay).
Multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1): the command sets them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from validate.clients.decoder import Dims, _rand, apply_rope, rms_norm, rope_tables
from validate.clients.timing import capture, replay_ms

LLAMA_31_8B = {"num_layers": 32, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
               "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False}
SIZES = [16 << 10 << k for k in range(15)]  # 16 KB .. 256 MB
SHAPES = [(1, 1024), (1, 8192), (16, 4096), (64, 2048), (64, 8192)]
CHAIN = 20


def allreduce_sweep(rank: int, world: int) -> list[dict]:
    """Per size: graph-replayed and eager all-reduce times (ms per all-reduce) and the sum check."""
    rows = []
    for size in SIZES:
        x = torch.full((size // 2,), float(rank + 1), device="cuda", dtype=torch.bfloat16)
        dist.all_reduce(x)
        ok = bool((x == world * (world + 1) / 2).all())
        x.normal_()
        graph = capture(lambda x=x: [dist.all_reduce(x) for _ in range(CHAIN)], warm_calls=1)
        dist.barrier()
        t = replay_ms(graph, timed=20, warmup=3)
        n = 20 if size <= (16 << 20) else 5
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        eager = (time.perf_counter() - start) / n * 1e3
        rows.append({"family": "allreduce", "name": f"allreduce-{size}", "params": {"bytes": size, "gpus": world},
                     "ms": t["ms"] / CHAIN, "ms_p10": t["ms_p10"] / CHAIN, "ms_p90": t["ms_p90"] / CHAIN,
                     "eager_ms": eager, "sum_ok": ok})
        del graph, x
    return rows


def shard_weights(dims: Dims, world: int) -> dict:
    """Per-rank shards of one model (random bf16): heads, kv heads, intermediate and vocab split `world` ways."""
    h, kv, inter = dims.heads // world, dims.kv_heads // world, dims.inter // world
    qkv = (h + 2 * kv) * dims.head_dim
    dev = "cuda"
    layers = [{"attn_norm": 1 + _rand(dims.d, device=dev, dtype=torch.bfloat16),
               "wqkv": _rand(qkv, dims.d, device=dev, dtype=torch.bfloat16),
               "wo": _rand(dims.d, h * dims.head_dim, device=dev, dtype=torch.bfloat16),
               "mlp_norm": 1 + _rand(dims.d, device=dev, dtype=torch.bfloat16),
               "w13": _rand(2 * inter, dims.d, device=dev, dtype=torch.bfloat16),
               "w2": _rand(dims.d, inter, device=dev, dtype=torch.bfloat16)} for _ in range(dims.layers)]
    return {"embedding": _rand(dims.vocab, dims.d, device=dev, dtype=torch.bfloat16), "layers": layers,
            "final_norm": 1 + _rand(dims.d, device=dev, dtype=torch.bfloat16),
            "lm_head": _rand(-(-dims.vocab // world), dims.d, device=dev, dtype=torch.bfloat16),
            "h": h, "kv": kv}


def attention_half(x, residual, w, k_cache, v_cache, pos, cos, sin, h: int, kv: int, head_dim: int):
    """residual += x; norm; QKV (column shard); RoPE; cache write; SDPA; o-proj (row shard: a partial sum)."""
    b, s, _ = x.shape
    residual = x + residual
    hn = rms_norm(residual, w["attn_norm"])
    q, k, v = F.linear(hn, w["wqkv"]).split([h * head_dim, kv * head_dim, kv * head_dim], dim=-1)
    q = q.view(b, s, h, head_dim).transpose(1, 2)
    k = k.view(b, s, kv, head_dim).transpose(1, 2)
    v = v.view(b, s, kv, head_dim).transpose(1, 2)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    k_cache[:, :, pos] = k
    v_cache[:, :, pos] = v
    o = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
    return F.linear(o.transpose(1, 2).reshape(b, s, h * head_dim), w["wo"]), residual


def mlp_half(o, residual, w):
    """residual += o; norm; gate/up (column shard); SiLU x up; down (row shard: a partial sum)."""
    residual = o + residual
    gate, up = F.linear(rms_norm(residual, w["mlp_norm"]), w["w13"]).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, w["w2"]), residual


def make_step(dims: Dims, w: dict, attn, mlp, tokens, caches, pos):
    """One tp decode step: embedding, layers (two all-reduces each), final norm, vocab-parallel LM head."""

    def step():
        x = F.embedding(tokens, w["embedding"])
        residual = torch.zeros_like(x)
        cos, sin = rope_tables(pos, dims.head_dim)
        for lw, (kc, vc) in zip(w["layers"], caches, strict=True):
            o, residual = attn(x, residual, lw, kc, vc, pos, cos, sin, w["h"], w["kv"], dims.head_dim)
            dist.all_reduce(o)
            x, residual = mlp(o, residual, lw)
            dist.all_reduce(x)
        hn = rms_norm((x + residual)[:, -1], w["final_norm"])
        return F.linear(hn, w["lm_head"])

    return step


def decode_cases(rank: int, world: int, compiled: bool, deadline: float, log) -> list[dict]:
    """The tp decode step at each SHAPES (batch, context), as long as time is left."""
    dims = Dims.of(LLAMA_31_8B)
    w = shard_weights(dims, world)
    attn = torch.compile(attention_half, dynamic=True) if compiled else attention_half
    mlp = torch.compile(mlp_half, dynamic=True) if compiled else mlp_half
    rows = []
    for batch, context in SHAPES:
        if time.time() > deadline:
            log(f"skip b{batch} L{context}: deadline")
            break
        shape = (batch, w["kv"], context, dims.head_dim)
        caches = [(_rand(*shape, device="cuda", dtype=torch.bfloat16, std=1.0),
                   _rand(*shape, device="cuda", dtype=torch.bfloat16, std=1.0)) for _ in range(dims.layers)]
        tokens = torch.randint(0, dims.vocab, (batch, 1), device="cuda")
        pos = torch.tensor([context - 1], device="cuda")

        step = make_step(dims, w, attn, mlp, tokens, caches, pos)
        t0 = time.time()
        graph = capture(step, warm_calls=3)
        dist.barrier()
        t = replay_ms(graph)
        form = "compiled" if compiled else "eager"
        rows.append({"family": "client_tp", "name": f"tp{world}-{form}-b{batch}-L{context}",
                     "params": {"model": "Llama-3.1-8B", "client": form, "phase": "decode", "batch": batch,
                                "context": context, "tp": world}, **t, "capture_s": time.time() - t0})
        log(f"{rows[-1]['name']}: {t['ms']:.3f} ms")
        del graph, caches, step
        torch.cuda.empty_cache()
    return rows


def environment(world: int) -> dict:
    """Device, driver, versions, date, NCCL settings."""
    import subprocess

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
    return {"device": torch.cuda.get_device_name(), "gpus": world, "driver": smi[0].split(", ")[-1] if smi else None,
            "nvidia_smi": smi, "topology": topo, "torch": torch.__version__, "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())), "date": dt.date.today().isoformat(),
            "git_sha": os.environ.get("GIT_SHA"),
            "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                   "NVSHMEM_DISABLE_NVLS")}}


def main() -> int:
    p = argparse.ArgumentParser(prog="validate.clients.tp")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--deadline-s", type=float, default=420.0)
    args = p.parse_args()
    assert os.environ.get("NCCL_NVLS_ENABLE") == "0", "NCCL_NVLS_ENABLE=0 must be set"
    start = time.time()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    torch.backends.cuda.matmul.allow_tf32 = False

    def log(msg):
        if rank == 0:
            print(f"[{time.time() - start:6.1f}s] {msg}", flush=True)

    results = {"env": environment(world), "cases": []}
    log(f"{results['env']['device']} x {world}, nccl {results['env']['nccl']}")
    results["cases"] += allreduce_sweep(rank, world)
    for r in results["cases"]:
        log(f"{r['name']}: graph {r['ms'] * 1e3:.1f} us, eager {r['eager_ms'] * 1e3:.1f} us, sum_ok {r['sum_ok']}")
    if rank == 0:
        args.out.write_text(json.dumps(results, indent=1))
    try:
        results["cases"] += decode_cases(rank, world, True, start + args.deadline_s, log)
    except Exception as err:  # compile or capture trouble: say so, then the eager form
        log(f"compiled tp decode failed: {type(err).__name__}: {str(err)[:300]}")
        results["compiled_error"] = f"{type(err).__name__}: {str(err)[:300]}"
        results["cases"] += decode_cases(rank, world, False, start + args.deadline_s + 60, log)
    if rank == 0:
        args.out.write_text(json.dumps(results, indent=1))
        log(f"done: {len(results['cases'])} rows -> {args.out}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
