"""NCCL all-reduce by message size over every visible GPU (torch only): one process per GPU through
torch.multiprocessing (spawn), NVLink multicast off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, set
before NCCL starts), as validate/clients/tp.py allreduce_sweep measures it: bf16 messages of 16 KB .. 256 MB, each
size as CHAIN back-to-back all-reduces captured in one CUDA graph, median of the replays on rank 0 / CHAIN; the sum
is checked first. Rows: {"kind": "allreduce", "bytes", "gpus", "s", "sum_ok"}; the bus bandwidth of the largest,
2 (n - 1) / n x bytes / s, is the scale-up link's (roofline.calibrate.hardware_file).
"""

from __future__ import annotations

import os
import socket
import statistics

import torch

SIZES = [16 << 10 << k for k in range(15)]  # 16 KB .. 256 MB
CHAIN = 20
ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


def _worker(rank: int, world: int, port: int, queue) -> None:
    import torch.distributed as dist

    os.environ.update(ENV)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    rows = []
    try:
        for size in SIZES:
            x = torch.full((size // 2,), float(rank + 1), device="cuda", dtype=torch.bfloat16)
            dist.all_reduce(x)
            ok = bool((x == world * (world + 1) / 2).all())
            x.normal_()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                dist.all_reduce(x)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(CHAIN):
                    dist.all_reduce(x)
            dist.barrier()
            for _ in range(3):
                graph.replay()
            times = []
            for _ in range(20):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
            dist.barrier()
            rows.append({"kind": "allreduce", "name": f"allreduce_{size}", "bytes": size, "gpus": world,
                         "s": statistics.median(times) / CHAIN, "flops": 0, "sum_ok": ok, "dtype": "bf16"})
            del graph, x
        if rank == 0:
            queue.put(rows)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def allreduce_rows(world: int, log) -> list[dict]:
    """The rows of one sweep over `world` GPUs ([] with a logged reason when it fails)."""
    import torch.multiprocessing as mp

    os.environ.update(ENV)  # the spawned children inherit it before NCCL starts
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    try:
        mp.start_processes(_worker, args=(world, _free_port(), queue), nprocs=world, join=True,
                           start_method="spawn")
        rows = queue.get() if not queue.empty() else []
    except Exception as err:  # noqa: BLE001 - a failed sweep leaves the single-GPU figures standing
        log(f"  all-reduce failed: {type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}")
        return []
    for r in rows:
        log(f"  {r['name']:28s} {r['s'] * 1e6:12.3f} us  bus {2 * (world - 1) / world * r['bytes'] / r['s'] / 1e9:7.1f}"
            f" GB/s  sum_ok {r['sum_ok']}")
    return rows
