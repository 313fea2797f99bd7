"""Count flags and input files checked against what they describe, so no input yields a silently wrong answer.

- parallelism against the model: pipeline stages at most the decoder layers (a stage with no layer would make the
  plan look faster with every stage added); tensor and expert parallelism are checked by the planner itself
  (tp against the attention heads, ep against the routed experts).
- trace files: a regular file only (a FIFO or a device such as /dev/zero would block or never end), at most
  MAX_TRACE_BYTES, all its rows used; a trace longer than an explicit --requests is refused, never cut.
"""

from __future__ import annotations

import os
import stat

from roofline.errors import SpecError

# A trace of a few million requests (issue 33: a day, ~1 M, readable and never cut): 1 M rows are 20 MB of
# "1.234,4096,512", 37 MB of Azure's dated rows and 108 MB of Mooncake's JSON lines with hash_ids, which
# serving.traces reads line by line in 5, 9 and 15 s (0.2-0.4 GB) on the project's 2-core machine. 256 MiB holds
# serving.traces.MAX_ROWS rows of the CSVs and 2.4 M of Mooncake's (~1 GB read); a larger file (a 10 GB dump) is
# refused from its size before it is opened.
MAX_TRACE_BYTES = 256 << 20


def check_parallel(model, tp: int = 1, pp: int = 1, ep: int = 1) -> None:
    """Refuses pp > the model's decoder layers (one line naming the flag and the rule)."""
    if pp > model.num_layers:
        raise SpecError(f"--pp: {pp:,} pipeline stages exceed the {model.num_layers:,} layers of {model.name} "
                        f"(every stage needs at least one layer)")


def check_expert_dtype(model, expert_dtype: str | None) -> None:
    """Refuses --expert-weight-dtype on a model without routed experts: it sets nothing there, yet `plan` printed
    'experts mxfp4' in its header as if it applied (ep > 1 is refused the same way by the planner)."""
    if expert_dtype and model.moe is None:
        raise SpecError(f"--expert-weight-dtype: {expert_dtype} sets the routed experts' width; {model.name} has no "
                        "routed experts (use --weight-dtype for its weights)")


PLANNER_WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4", "nvfp4")


def check_weight_dtype(model, weight_dtype: str | None, engine: str | None, expert_dtype: str | None = None) -> None:
    """--weight-dtype: one of the planner's dtypes or a llama-quantize preset (`gguf:Q4_K_M`, roofline.gguf_quant),
    the latter under --engine llamacpp or ideal only (vLLM's GGUF loader is not modelled), without
    --expert-weight-dtype, on a model whose GGUF tensors are modelled; each refusal one line naming the flag."""
    from roofline.gguf_quant import PREFIX, PRESETS, RULE, check_supported

    if weight_dtype is None or weight_dtype in PLANNER_WEIGHT_DTYPES:
        return
    if not weight_dtype.startswith(PREFIX) or weight_dtype[len(PREFIX):] not in PRESETS:
        raise SpecError(f"--weight-dtype: {weight_dtype!r} is not a weight dtype; {', '.join(PLANNER_WEIGHT_DTYPES)}"
                        f", or {RULE}")
    if (engine or "ideal") not in ("llamacpp", "ideal"):
        raise SpecError(f"--weight-dtype: {weight_dtype} is a llama.cpp GGUF file type; --engine {engine} loading "
                        "GGUF is not modelled (use --engine llamacpp)")
    if expert_dtype:
        raise SpecError(f"--expert-weight-dtype: {weight_dtype} sets every tensor's type, the experts' too")
    check_supported(model)


def check_unique_methods(specs) -> None:
    """Refuses a --method SPEC given twice: its two rows would be the same numbers ranked 1 and 2 ('2 of 2 methods
    fit'), which buries the answer under a duplicate (the SPEC's text as typed; presets and their spelled-out
    fields are left to the user)."""
    seen: set[str] = set()
    for spec in specs or ():
        if spec in seen:
            raise SpecError(f"--method: {spec!r} is given twice; give each SPEC once (its rows would be identical)")
        seen.add(spec)


def check_trace_file(path: str) -> int:
    """The size of a trace file that may be read whole: refuses a missing path, anything but a regular file
    (FIFO, device, folder, socket) and a file past MAX_TRACE_BYTES, without opening it."""
    try:
        st = os.stat(path)
    except OSError as err:
        raise SpecError(f"--trace: cannot read {path}: {err.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise SpecError(f"--trace: {path} is {kind}; a trace must be a regular CSV file")
    if st.st_size > MAX_TRACE_BYTES:
        raise SpecError(f"--trace: {path} is {st.st_size:,} bytes, over the {MAX_TRACE_BYTES:,}-byte limit of a "
                        f"trace file")
    return st.st_size
