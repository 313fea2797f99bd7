"""vLLM's tensor-parallel all-reduce by itself (run 13, mechanism T of run 12): the custom all-reduce kernel vLLM
0.24 dispatches first at tp 2 on NVLink (run 12's log: "Using ['CUSTOM', 'PYNCCL'] all-reduce backends (in dispatch
order)"; vllm/distributed/device_communicators/custom_all_reduce.py: CUDA-IPC buffers, used below max_size 8 MiB),
and NCCL's all-reduce, each timed inside a CUDA graph of REPS back-to-back calls as the engine replays its decode
step (no launch cost per call), at the message sizes of a decode step (tokens x hidden x 2 bytes).

Run 14 adds the eager calls (EAGER_SIZES, 1 .. 32 MiB): a prefill past the largest CUDA-graph capture size (512
tokens) runs eagerly, its all-reduces at tokens x hidden x 2 bytes (Llama-3.1-8B: 8 MiB at 1,024 tokens, exactly
vLLM's max_size, where `should_custom_ar` (inp_size < max_size) hands the call to PyNCCL). Each eager row is the
per-call time of REPS back-to-back calls from the host (launches included), event-timed.

Usage: python3 ar_probe.py OUT_JSON   (two GPUs; vLLM importable; NVLink multicast stays off)
"""

import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [8 << 10, 16 << 10, 32 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20]
REPS = 50
EAGER_SIZES = [1 << 20, 2 << 20, 4 << 20, (8 << 20) - 4096, 8 << 20, 16 << 20, 32 << 20]


def captured(fn, reps: int = REPS) -> "torch.cuda.CUDAGraph":
    """`fn` captured `reps` times in one CUDA graph (after one call on a side stream, as torch's capture wants)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    return g


def _median_s(warm, timed, tries: int, per: int) -> float:
    """Median over `tries` event-timed calls of `timed`, each divided by the `per` calls it holds, after `warm`."""
    warm()
    torch.cuda.synchronize()
    ts = []
    for _ in range(tries):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        timed()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3 / per)
    return statistics.median(ts)


def replay_s(g, reps: int = REPS) -> float:
    """Seconds per call of a graph of `reps` calls (median of 10 replays after 3)."""
    return _median_s(lambda: [g.replay() for _ in range(3)], g.replay, 10, reps)


def eager_s(fn, reps: int = REPS) -> float:
    """Seconds per call of `reps` eager calls launched back to back (median of 5 timed loops after 2)."""
    return _median_s(lambda: [fn() for _ in range(2)], lambda: [fn() for _ in range(reps)], 5, reps)


def _rank(rank: int, q) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29531", NCCL_NVLS_ENABLE="0",
                      TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device(f"cuda:{rank}"))
    cpu = dist.new_group(backend="gloo")
    rows = []
    for n in SIZES:
        x = torch.ones(n // 2, dtype=torch.bfloat16, device=f"cuda:{rank}")
        rows.append({"bytes": n, "nccl_graph_s": replay_s(captured(lambda t=x: dist.all_reduce(t)))})
    eager = []
    for n in EAGER_SIZES:
        x = torch.ones(n // 2, dtype=torch.bfloat16, device=f"cuda:{rank}")
        eager.append({"bytes": n, "nccl_eager_s": eager_s(lambda t=x: dist.all_reduce(t))})
    custom, err = [], None
    try:
        from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce

        ca = CustomAllreduce(group=cpu, device=rank)
        if ca.disabled:
            raise RuntimeError("CustomAllreduce disabled")
        for n in SIZES:
            x = torch.ones(n // 2, dtype=torch.bfloat16, device=f"cuda:{rank}")
            ca.custom_all_reduce(x)  # eager, through the pre-registered buffer
            with ca.capture():  # registered inputs inside the graph; their addresses exchanged on leaving
                g = captured(lambda t=x: ca.custom_all_reduce(t))
            custom.append({"bytes": n, "custom_graph_s": replay_s(g)})
        for row in eager:  # vLLM's dispatch: custom below max_size (should_custom_ar), else PyNCCL
            x = torch.ones(row["bytes"] // 2, dtype=torch.bfloat16, device=f"cuda:{rank}")
            row["custom_dispatch"] = bool(ca.should_custom_ar(x))
            if row["custom_dispatch"]:
                row["custom_eager_s"] = eager_s(lambda t=x: ca.custom_all_reduce(t))
    except Exception as e:  # the NCCL rows stand alone
        err = repr(e)[:300]
    if rank == 0:
        q.put({"rows": rows, "custom": custom, "eager": eager, "custom_error": err})
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, q)) for r in range(2)]
    for p in procs:
        p.start()
    doc = q.get(timeout=240)
    for p in procs:
        p.join(60)
    doc["torch"] = torch.__version__
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
