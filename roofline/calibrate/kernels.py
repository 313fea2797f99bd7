"""The lab's three Triton stream kernels (validate/ops/ceilings/kernel.py) written in CUDA C and compiled through
torch's NVRTC wrapper (torch.cuda._compile_kernel), so a torch-only box runs the same kernels the catalogue's
figures come from:

  read_kernel   one block of 256 threads (Triton's num_warps=8) sums 4096 consecutive fp32 (BLOCK) into one partial,
                each thread loading 128-bit vectors at 4 t + 1024 i (Triton's blocked layout, 4 elements per thread)
  copy_kernel   the same blocks copying 4096 fp32 each
  empty_kernel  takes one pointer and does nothing, launched as 1 block of 128 threads (Triton's default 4 warps)
Each is None where torch cannot compile (no NVRTC, an older torch): the callers fall back to torch ops and say so.
"""

from __future__ import annotations

import torch

BLOCK = 4096
THREADS = 256
SOURCE = r"""
extern "C" __global__ void read_kernel(const float4* __restrict__ x, float* __restrict__ partial, int n4) {
    long long base = (long long)blockIdx.x * 1024;
    float acc = 0.f;
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        long long j = base + i * 256 + threadIdx.x;
        if (j < n4) { float4 v = x[j]; acc += (v.x + v.y) + (v.z + v.w); }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    __shared__ float warp_sums[8];
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 8) {
        acc = warp_sums[threadIdx.x];
        for (int o = 4; o > 0; o >>= 1) acc += __shfl_down_sync(0xffu, acc, o);
        if (threadIdx.x == 0) partial[blockIdx.x] = acc;
    }
}
extern "C" __global__ void copy_kernel(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    long long base = (long long)blockIdx.x * 1024;
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        long long j = base + i * 256 + threadIdx.x;
        if (j < n4) y[j] = x[j];
    }
}
extern "C" __global__ void empty_kernel(float* x) {}
"""


class StreamKernels:
    """The compiled kernels, or `error` saying why there are none."""

    def __init__(self):
        self.error = None
        try:
            self._read = torch.cuda._compile_kernel(SOURCE, "read_kernel")
            self._copy = torch.cuda._compile_kernel(SOURCE, "copy_kernel")
            self._empty = torch.cuda._compile_kernel(SOURCE, "empty_kernel")
        except Exception as err:  # noqa: BLE001 - any failure to compile: the torch fallbacks
            self.error = f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''}"

    @property
    def ok(self) -> bool:
        """Whether the three kernels compiled."""
        return self.error is None

    def read(self, x: torch.Tensor, partial: torch.Tensor) -> None:
        """partial[b] = sum of x[4096 b : 4096 (b + 1)] (x: contiguous fp32, a multiple of 4096 long)."""
        self._read(grid=(x.numel() // BLOCK, 1, 1), block=(THREADS, 1, 1), args=[x, partial, x.numel() // 4])

    def copy(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """y[:] = x[:] (contiguous fp32 of equal size, a multiple of 4096 long)."""
        self._copy(grid=(x.numel() // BLOCK, 1, 1), block=(THREADS, 1, 1), args=[x, y, x.numel() // 4])

    def empty(self, x: torch.Tensor) -> None:
        """Launch the empty kernel: one block of 128 threads."""
        self._empty(grid=(1, 1, 1), block=(128, 1, 1), args=[x])


def check(kernels: StreamKernels) -> str | None:
    """None when the compiled read and copy give torch's answers on a small random buffer, else what differs."""
    x = torch.rand(3 * BLOCK, device="cuda")
    partial, y = torch.empty(3, device="cuda"), torch.empty_like(x)
    kernels.read(x, partial)
    kernels.copy(x, y)
    torch.cuda.synchronize()
    if not torch.allclose(partial, x.view(3, BLOCK).sum(1), rtol=1e-4):
        return "read_kernel's partial sums differ from torch.sum"
    if not torch.equal(x, y):
        return "copy_kernel's output differs from its input"
    return None
