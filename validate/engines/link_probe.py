"""The two mechanisms a two-GPU run adds, each by its own microbenchmark (run 12): the GPU-to-GPU copy a
disaggregated pair's KV crosses (torch's peer copy cuda:0 -> cuda:1, the NVLink path UCX's cuda_ipc transport takes),
and the all-reduce of a tensor-parallel step (NCCL through torch.distributed, one process per GPU, NVLink multicast
off as the machine requires) at the message sizes of a decode step's activations (B x hidden x 2 bytes).

Usage: python3 link_probe.py OUT_JSON   (two GPUs; torch only)
"""

import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

COPY_BYTES = [64 << 10, 1 << 20, 16 << 20, 128 << 20, 512 << 20]
AR_BYTES = [8 << 10, 128 << 10, 1 << 20, 4 << 20, 16 << 20]


def timed(fn, reps: int = 20) -> float:
    """Median seconds of `fn` over `reps` runs after three warm-ups (CUDA events on the current device)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return statistics.median(ts)


def copies() -> list[dict]:
    """cuda:0 -> cuda:1 peer copies of each size: seconds and bytes per second."""
    out = []
    for n in COPY_BYTES:
        src = torch.empty(n, dtype=torch.uint8, device="cuda:0")
        dst = torch.empty(n, dtype=torch.uint8, device="cuda:1")
        with torch.cuda.device(0):
            s = timed(lambda d=dst, s_=src: d.copy_(s_, non_blocking=True))
        out.append({"bytes": n, "s": s, "bytes_per_s": n / s})
    return out


def _ranks(rank: int, port: int, q) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2)
    res = []
    for n in AR_BYTES:
        x = torch.ones(n // 2, dtype=torch.bfloat16, device=f"cuda:{rank}")
        dist.barrier()
        s = timed(lambda t=x: dist.all_reduce(t), reps=50)
        res.append({"bytes": n, "s": s})
    if rank == 0:
        q.put(res)
    dist.destroy_process_group()


def all_reduces() -> list[dict]:
    """NCCL all-reduce of bf16 tensors of each size over the two GPUs (rank 0's median)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_ranks, args=(r, 29517, q)) for r in range(2)]
    for p in procs:
        p.start()
    res = q.get(timeout=120)
    for p in procs:
        p.join(30)
    return res


def main() -> None:
    t = time.time()
    doc = {"torch": torch.__version__, "devices": [torch.cuda.get_device_name(i) for i in range(2)],
           "peer_access": torch.cuda.can_device_access_peer(0, 1), "copy": copies(), "all_reduce": all_reduces()}
    doc["wall_s"] = time.time() - t
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
