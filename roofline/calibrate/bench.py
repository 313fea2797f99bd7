"""What one measuring run shares: the timer, the device's L2 and free memory, the sizes of its scale, the rows.

A row: {"kind", "name", ..params, "s": seconds per call, "bytes": bytes moved, "flops": FLOPs} (torch-free data,
written to the raw JSON and read by roofline.calibrate.section).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import torch

from roofline.calibrate.timing import ClockSampler, Timer, rotation

MIB = 1 << 20


@dataclass(frozen=True)
class Scale:
    """Sizes of one run: 'full' and 'quick' on a GPU (the lab's grids, or a subset), 'cpu' a toy for CI."""

    read_bytes: tuple[int, ...]
    gemm_size: int
    gemm_tokens: tuple[int, ...]
    gemm_shapes: tuple[tuple[int, int], ...]
    flash: dict[int, tuple[int, ...]]
    decode: tuple[tuple[int, int], ...]
    moe_batches: tuple[int, ...]
    moe_dims: tuple[int, int, int]  # experts, d_model, expert intermediate
    chain: int
    reps: int
    sustain_s: float


# (N, K) of the Llama-3.1-8B and Llama-3.2-3B projections (validate/clients/micro.py GEMM_SHAPES)
MODEL_SHAPES = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096),
                (5120, 3072), (3072, 3072), (16384, 3072), (3072, 8192))
SCALES = {
    "full": Scale(read_bytes=tuple(MIB << i for i in range(13)), gemm_size=8192,
                  gemm_tokens=(1, 16, 32, 64, 128, 512, 2048, 8192, 16384), gemm_shapes=MODEL_SHAPES,
                  flash={128: (1024, 2048, 4096, 8192, 16384), 64: (2048, 8192, 16384)},
                  decode=((1, 4096), (1, 32768), (8, 8192), (32, 2048), (32, 8192), (64, 4096)),
                  moe_batches=(1, 2, 4, 8, 16, 32, 64), moe_dims=(8, 4096, 14336), chain=256, reps=10,
                  sustain_s=1.5),
    "quick": Scale(read_bytes=(MIB, 16 * MIB, 256 * MIB, 1024 * MIB, 4096 * MIB), gemm_size=8192,
                   gemm_tokens=(1, 16, 64, 2048, 8192), gemm_shapes=MODEL_SHAPES[:4],
                   flash={128: (16384,), 64: (16384,)}, decode=((1, 4096), (8, 8192), (32, 8192), (64, 4096)),
                   moe_batches=(1, 8, 64), moe_dims=(8, 4096, 14336), chain=256, reps=10, sustain_s=0.0),
    "cpu": Scale(read_bytes=tuple((1 << 16) << i for i in range(6)), gemm_size=256, gemm_tokens=(1, 16, 64, 256),
                 gemm_shapes=((512, 256), (256, 512)), flash={64: (128, 256)}, decode=((1, 512), (4, 1024)),
                 moe_batches=(1, 4), moe_dims=(4, 128, 256), chain=64, reps=5, sustain_s=0.0),
}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Bench:
    """One run on `device` ('cuda' or 'cpu') at `scale`, with a soft deadline of `budget_s` seconds."""

    device: str
    scale: Scale
    budget_s: float
    rows: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)
    required: bool = False

    def __post_init__(self):
        self.timer = Timer(self.device)
        self.mark = time.perf_counter()
        self.clocks = None  # started for the probe session only (start_clocks), as the lab's probe sampled them
        if self.device == "cuda":
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * MIB)
        else:
            self.l2_bytes = 1 * MIB  # a toy cache size: the CPU path checks the plumbing, not a cache

    def stream_kernels(self):
        """The compiled read / copy / empty kernels (roofline.calibrate.kernels), checked once; None (and a note in
        `skipped`) on the CPU or where they do not compile or check."""
        if not hasattr(self, "_kernels"):
            self._kernels = None
            if self.device == "cuda":
                from roofline.calibrate.kernels import StreamKernels, check

                k = StreamKernels()
                why = k.error or check(k)
                if why:
                    self.skip("stream kernels", f"{why}: torch.sum / copy_ / fill_ stand in")
                else:
                    self._kernels = k
        return self._kernels

    def start_clocks(self) -> None:
        """Sample the SM clock (NVML, every 20 ms) from now on. The lab's probe (validate/clients/step_costs_core.py
        ClockSampler) sampled it in a thread while it timed; its micro and ceilings runs, whose figures need no
        clock, ran without a sampler, so the parts that reproduce those run before this is called."""
        if self.device == "cuda" and self.clocks is None:
            self.clocks = ClockSampler()

    def idle(self, seconds: float) -> None:
        """Let the GPU sit idle `seconds` (nothing on the CPU): each lab figure was taken by its own process on a
        GPU back at its idle power, and the board returns from full power to idle in about one second (the H200's
        NVML samples after the probe's last sustained window, validate/results/clients/nvidia-h200-probe13.json
        clocks: 693 W at 1485 MHz, 1965 MHz within 0.3 s, idle power within 1.2 s)."""
        if self.device != "cuda" or seconds <= 0:
            return
        self.release()
        torch.cuda.synchronize()
        time.sleep(seconds)
        self.mark = time.perf_counter()

    def elapsed_s(self) -> float:
        """Seconds since the run began."""
        return time.perf_counter() - self.t0

    def close(self) -> None:
        """Stop the clock sampler."""
        if self.clocks is not None:
            self.clocks.stop()

    def log(self, msg: str) -> None:
        """One progress line on stderr, stamped with the run's elapsed seconds."""
        _log(f"[{self.elapsed_s():6.1f}s] {msg}")

    def late(self, name: str) -> bool:
        """True (and `name` recorded as skipped) once the run is past its budget, unless a part the hardware spec
        requires is running (`required`)."""
        if not self.required and self.elapsed_s() > self.budget_s:
            self.skipped.append(f"{name}: past the {self.budget_s:g} s budget")
            return True
        return False

    def skip(self, name: str, why: str) -> None:
        """Record (and log) a part not measured, and why."""
        self.skipped.append(f"{name}: {why}")
        self.log(f"  skipped {name}: {why}")

    def free_bytes(self) -> int:
        """Free device memory now, bytes (1 GiB stands for the CPU)."""
        if self.device == "cuda":
            return int(torch.cuda.mem_get_info()[0])
        return 1 << 30

    def copies(self, set_bytes: int, most: int = 256) -> int:
        """Input copies to rotate through so none is read from L2 (timing.rotation)."""
        return rotation(set_bytes, self.l2_bytes, self.free_bytes(), most)

    def randn(self, *shape, dtype=torch.bfloat16, std: float = 1.0) -> torch.Tensor:
        """Normal random values of standard deviation `std` (never zeros: some kernels take shortcuts on zeros)."""
        return torch.empty(*shape, device=self.device, dtype=dtype).normal_(0.0, std)

    def add(self, kind: str, name: str, s: float, moved: int = 0, flops: int = 0, **params) -> dict:
        """Record one row (with the mean SM clock since the last one, where NVML answers) and log it."""
        row = {"kind": kind, "name": name, **params, "s": s, "bytes": int(moved), "flops": int(flops)}
        now = time.perf_counter()
        if self.clocks is not None and self.clocks.ok:
            row["sm_mhz"] = self.clocks.mean_mhz(self.mark, now)
        self.mark = now
        self.rows.append(row)
        rate = f"{moved / s / 1e9:9.1f} GB/s" if moved else f"{flops / s / 1e12:9.1f} TFLOP/s" if flops else ""
        clock = f" @ {row['sm_mhz']:.0f} MHz" if row.get("sm_mhz") else ""
        self.log(f"  {name:28s} {s * 1e6:12.3f} us {rate}{clock}")
        return row

    def release(self) -> None:
        """Return cached device memory between parts."""
        if self.device == "cuda":
            torch.cuda.empty_cache()
