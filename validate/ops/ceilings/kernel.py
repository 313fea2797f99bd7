"""The ceilings' Triton kernels: stream a buffer into per-program sums, copy it, launch nothing."""

from __future__ import annotations

import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def read_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # [BLOCK] int64
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(partial_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # [BLOCK] int64
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def empty_kernel(x_ptr):
    pass


def stream_sum(x, block: int = BLOCK, partial=None):
    """Partial sums of flat `x`, one per program; their sum is x.sum() (in fp32)."""
    import torch

    n = x.numel()
    # one program reduces one block of `block` consecutive elements (more, smaller programs measured
    # faster on H200 than programs looping over several blocks: no tail wave)
    grid = (triton.cdiv(n, block),)
    if partial is None:
        partial = torch.empty(grid[0], dtype=torch.float32, device=x.device)
    read_kernel[grid](x, partial, n, BLOCK=block, num_warps=8)
    return partial


def stream_copy(x, y, block: int = BLOCK):
    """y[:] = x[:] for flat contiguous tensors of equal size."""
    n = x.numel()
    # one program copies one block of `block` consecutive elements
    grid = (triton.cdiv(n, block),)
    copy_kernel[grid](x, y, n, BLOCK=block, num_warps=8)
    return y
