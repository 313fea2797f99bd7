"""The prediction side of each measured kernel family: the explicit list, name -> module.

Each module gives `NAME`, `work(params) -> {"bytes", "flops"}` (the roofline op's own expressions for the
case: what the GPU bench records beside its time) and `predict(case, hardware) -> {"time_s", "bytes",
"flops", "bound", ...}` (time_s None where the spec has no figure), from the roofline spec alone. The kernels
of the same families, and their case grids, are the checkout's validate/ops/ (torch, triton).
"""

from __future__ import annotations

from types import ModuleType

from validate.model.families import aquakv, calibration, fp16_attention, quant_attention, xquant, zack

FAMILIES: dict[str, ModuleType] = {m.NAME: m for m in (calibration, fp16_attention, quant_attention, xquant, aquakv,
                                                        zack)}
