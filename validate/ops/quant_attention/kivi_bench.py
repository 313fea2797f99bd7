"""The fast kernel's KIVI variants (kivi_variants.VARIANTS: old, qall, qall-r128) timed on the GPU at the shapes of
kivi-variants-predicted.json: `python -m validate.ops.quant_attention.kivi_bench OUT.json`. Every variant is
launched with its own VAR bits and register cap, not LAUNCH's: "old" (VAR 0, no cap) is the kernel KIVI ran before
qall-r128 became LAUNCH's KIVI default, and was named "default" in the files written before
(nvidia-h{100,200}-kivi-variants.json), so this bench times the same kernels as it did then. Per method: a
reference check of every variant (one sequence of 4096 tokens, output pre-filled with NaN; relative RMS against the
torch reference), then per shape CUDA-graph medians over rotated inputs (validate.common.harness), achieved bytes/s
from the roofline op's bytes, the bf16 flash-decode time and the copy ceiling (rows_bench's), the prediction
committed before the run beside each time; environment as harness.environment (git SHA from ROOFLINE_GIT_SHA)."""

from __future__ import annotations

import json
import sys

from validate.ops.quant_attention import tiled_launch
from validate.ops.quant_attention.kivi_variants import FORMERLY, METHODS, OUT, SHAPES, VARIANTS
from validate.ops.quant_attention.rows_bench import bench


def _call(name: str):
    """decode(q, cache, out, work) of variant `name`: its VAR bits and register cap (None: no cap), never LAUNCH's."""
    var, cap = VARIANTS[name]
    return lambda q, c, out, work: tiled_launch.fast_decode(q, c, None, out, work, maxnreg=cap, variant=var)


def _predicted(device: str) -> dict:
    """kivi-variants-predicted.json's rows of the device's catalogue entry ({} when it has none)."""
    name = "H200" if "H200" in device else "H100-SXM"
    return json.loads(OUT.read_text())["predicted"].get(name, {}) if OUT.exists() else {}


def main(path: str) -> None:
    """Every variant of kivi-2 and kivi-4 at SHAPES beside its committed prediction (module docstring)."""
    import torch

    table = _predicted(torch.cuda.get_device_name())

    def predicted(method: str, batch: int, context: int, name: str):
        got = table.get(f"{method}_b{batch}_l{context}", {})
        return got.get(name, got.get(FORMERLY.get(name), {})).get("ms")

    bench(path, METHODS, SHAPES, VARIANTS, _call, predicted)


if __name__ == "__main__":
    main(sys.argv[1])
