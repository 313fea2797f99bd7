"""Family "aquakv" (AQUA-KV's reference decode of one predicted layer): work and prediction.

The case is the roofline "aquakv_reconstruct" op of the predicted layer group (layer 1) of a two-layer model
with the case's heads under the case's method SPEC, decode at B = batch, L = context.

Kernel structure (validate.model.kernel_structure; structure/aquakv.json from validate/ops/aquakv/structure.py):
the GPU kernel (validate/ops/aquakv) is one GEMM-with-epilogue launched twice, K^ (d_kv inputs) then V^ (2 d_kv),
over ceil(rows / BLOCK_M) x d_kv / BLOCK_N programs, rows = B x l_q, with the small tiles below the launcher's
big-tile threshold and the big ones from there (each kernel's "rows_from"). Where that compile is known, the op
carries what the launches' warps execute, each launch scaled by its last wave (`kernel_structure.wave_factor`):
    matmul_flops = wgmma FLOPs                                        at the measured GEMM rate
    vector_flops, int_ops = FP32 and integer instructions x 32 lanes  at the measured FMA / integer rates (issue)
    shared_bytes = (wavefronts x 128 B + wgmma operand bytes)         at the measured shared-memory rate
    l2_bytes     = the op's bytes + the operand tiles each program re-reads from L2 (`tile_rereads`)
                                                                      at the measured L2 read rate
and Roofline times it as every op: max(matmul + issue, DRAM bytes / bandwidth, shared bytes / shared bandwidth,
L2 bytes / L2 bandwidth). The L2 rate is taken as measured (bytes/s, as DRAM's), not scaled by the case's SM clock.
The clock: a large case runs below the boost clock the on-chip rates were measured at (the board's power limit);
`validate compare` times each case at the SM clock recorded while it ran (validate.model.case_clock).
Nothing is fitted to these kernels' timings.
"""

from __future__ import annotations

from roofline.validation.results_file import Case
from validate.model import fixed_costs
from validate.model.predict import decode_model, decode_work, predict_op

NAME = "aquakv"


def model(kv_heads: int, head_dim: int, heads: int):
    """A two-layer roofline Model with these attention heads: layer 1 is the predicted layer group."""
    return decode_model(f"aquakv-h{heads}-kv{kv_heads}-d{head_dim}", heads, kv_heads, head_dim, num_layers=2,
                        source="validate: synthetic two-layer model")


def model_and_method(params: dict):
    """(the two-layer `model` of the case's heads, the method config of params["method"])."""
    from roofline.methods import parse_method

    return model(params["num_kv_heads"], params["head_dim"], params["num_heads"]), parse_method(params["method"])


def work(params: dict) -> dict:
    """Bytes and FLOPs from the roofline "aquakv_reconstruct" op."""
    return decode_work(*model_and_method(params), "aquakv_reconstruct", params)


def rows(params: dict) -> int:
    """GEMM rows of the case: batch x l_q, the quantized tokens (context less the fp16 sinks and buffer:
    roofline.kv.quant.full_precision_tokens of the method's residual storage)."""
    from roofline.kv.quant import full_precision_tokens
    from roofline.lazy import sp

    _, method = model_and_method(params)
    q = method.residual_quant(params["num_kv_heads"] * params["head_dim"])
    sinks, recent = (int(x) for x in full_precision_tokens(q, sp.Integer(params["context"])))
    return params["batch"] * (params["context"] - sinks - recent)


def launches(params: dict, big_rows: int | None = None, variant: str = "") -> list[tuple[str, int]]:
    """(structure name, programs) of the K and V launches of the case: the compiled tiles whose "rows_from" is
    the largest not above the case's rows (`big_rows`: the big tiles from that many rows on, the small ones below:
    the variant "tuned", validate/ops/aquakv/kernel.TUNED_BIG_ROWS); ceil(rows / BLOCK_M) x d_kv / BLOCK_N programs
    each; `variant`: the compiles of that kernel variant ("preinit"; '' the launched kernel). [] when
    structure/aquakv.json has no compile."""
    from validate.model import kernel_structure as ks

    n = rows(params)
    kernels = ks.kernels(NAME).get("kernels", {})
    start = {name: (k["rows_from"] if big_rows is None or k["tiles"] != "big" else big_rows)
             for name, k in kernels.items() if name.endswith("_k") and k.get("variant", "") == variant}
    fitting = [(first, kernels[name]["tiles"] == "big", name) for name, first in start.items() if first <= n]
    if not fitting or n == 0:
        return []
    name = max(fitting)[2]  # the latest start; at a tie (big_rows <= 0) the big tiles
    k = kernels[name]
    programs = -(-n // k["block_m"]) * (k["d_kv"] // k["block_n"])
    return [(name, programs), (name[:-1] + "v", programs)]


def structured(params: dict, hardware, big_rows: int | None = None, variant: str = ""):
    """The transform (op -> op) that puts the launches' executed work into the op (module docstring), or None
    where the case's kernel or its structure at these heads is not known."""
    from dataclasses import replace

    from roofline.costmodel import roofline_for
    from validate.model import kernel_structure as ks

    parts = [(ks.structure(NAME, name, params, hardware), programs)
             for name, programs in launches(params, big_rows, variant)]
    if not parts or any(s is None for s, _ in parts):
        return None
    scale = roofline_for(hardware).matmul_peak("bf16") / ks.mma_sync_rate(hardware)
    fields = {}
    for s, programs in parts:
        steps = programs * ks.wave_factor(programs, hardware.sm_count)
        work = ks.executed_work(s, steps, scale, hardware)
        work["shared_bytes"] += steps * s["warps"] * s["executed"]["wgmma_shared_bytes"]
        fields = {k: fields.get(k, 0) + v for k, v in work.items()}
    reread = sum(tile_rereads(s, rows(params)) for s, _ in parts)
    return lambda op: replace(op, **fields, l2_bytes=op.bytes + reread)


def tile_rereads(s: dict, n: int) -> int:
    """Bytes one launch of compile `s` reads from L2 beyond the op's own traffic, at `n` GEMM rows: each of its
    d_kv / BLOCK_N column tiles reads all `n` rows of its `inputs` bf16 activations [n, d_kv], and each of its
    ceil(n / BLOCK_M) row tiles the whole bf16 weight [inputs x d_kv, d_kv]; the op's bytes count each once
    (Nsight Compute: 81-91 % L2 hits, L2 at 72-84 % of its peak, nvidia-h{100,200}-ncu-aquakv.txt)."""
    cols, row_tiles, width = s["d_kv"] // s["block_n"], -(-n // s["block_m"]), s["inputs"] * s["d_kv"] * 2
    return (cols - 1) * n * width + (row_tiles - 1) * width * s["d_kv"]


def predict_params(params: dict, hardware, big_rows: int | None = None, variant: str = "",
                   structure: bool = True) -> dict:
    """The roofline "aquakv_reconstruct" op of the predicted layer group (layer 1) of a two-layer model with these
    heads, decode at B = batch, L = context (predict.predict_op), timed from the kernel's structure where it is
    known (`structured`; "flops" and "bytes" stay the op's algorithmic work); `big_rows` and `variant` time a
    kernel variant (`launches`)."""
    m, method = model_and_method(params)
    transform = structured(params, hardware, big_rows, variant) if structure else None
    out = predict_op(m, method, "aquakv_reconstruct", {"B": params["batch"], "L": params["context"]}, hardware,
                     transform=transform)
    if transform is not None:
        out.update(work(params), structure=[name for name, _ in launches(params, big_rows, variant)])
    return out


def predict(case: Case, hardware) -> dict:
    """`predict_params` of the case's params, with the fixed cost of each kernel beyond the op's one
    (validation.fixed_costs: K^ and V^ are two launches)."""
    return fixed_costs.with_fixed_costs(predict_params(case.params, hardware), NAME, case.params, hardware)
