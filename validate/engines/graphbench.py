"""One timing routine for the engine's kernels alone (micro.py, micro2.py): the call captured once in a CUDA graph,
its replays timed by triton.testing.do_bench (median, L2 flushed between replays), in seconds."""
import torch
from triton.testing import do_bench


def bench(fn) -> float:
    """Median seconds of one CUDA-graph replay of `fn` (one eager call first: lazy initialisation)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return do_bench(lambda: g.replay(), warmup=25, rep=100, return_mode="median") * 1e-3
