"""One catalogue device's `measured:` section (kind 'derived') from aiconfigurator's tables.

Each ceiling is taken from the rows that match the project's own microbenchmark of it (validate/clients/micro.py,
validate/ops/ceilings) as closely as the database's grid allows, with the calibration's definition (fits.py):

    gemm_flops_per_s         2 M N K / t at M = N = K = 8192 (the ceilings family's GEMM_SIZE), bf16 and per-tensor
                             fp8 (gemm_dtype 'fp8'), the fastest kernel the table has for that shape
    gemm_latency_s, gemm_stream_bytes_per_s   relative fit of t = alpha + 2 N K / bw over the bf16 rows at
                             M in (1, 16, 32, 64) of the model shapes micro.GEMM_SHAPES that the grid holds
    gemm_shape_flops_per_s   median 2 M N K / t of those shapes at M in (2048, 8192, 16384), bf16
    decode_attention_*       relative fit of t = alpha + KV bytes / bw over generation attention at micro.DECODE's
                             (batch, context) pairs, 32 query / 8 KV heads, head dim 128, bf16 cache, no window
                             (context = isl + step), whose KV exceeds the L2 (micro rotates copies so that none
                             is read from it; the tables do not); with fewer than DECODE_MIN_SHAPES of them, every
                             (batch, context) of the table past the L2
    memory_latency_s,        relative fit of t = alpha + bytes / bw over every row of quantize/scale_matrix (vLLM's
    stream_bytes_per_s       static_scaled_fp8_quant: an elementwise kernel reading M K bf16 and writing M K fp8,
                             3 M K bytes) moving at least the device's L2 (smaller ones run from the L2, which the
                             project's stream kernel never does); aiconfigurator has no plain memory-copy table.
                             A system without that table (A100: no fp8) takes the bf16 GEMM rows at M <= 64 whose
                             weights (2 N K bytes) exceed the L2, as streams of their weights
    bandwidth_curve,         that table's median rate per size past the L2 (about CURVE_POINTS sizes), and the
    read_bytes_per_s,        median rate of its three largest sizes (LARGEST_SIZES), as read and as copy rate: the
    copy_bytes_per_s         kernel's bytes are read plus written, like the copy, mostly read, like the read
    kernel_overhead_s,       the median time of that quantize kernel at M K <= SMALL_ELEMENTS: one small kernel's
    aten_kernel_s,           fixed cost, standing for the graph chain's per-kernel time, the eager aten kernels and
    fused_kernel_s           Inductor's fused ones alike (the project measures them apart: 0.93 / 2.04 / 1.61 us
                             on H200, 1.02 / 2.09 / 1.90 us on H100; the database's figure is 1.89 / 2.00 us). With
                             kernel_overhead_s set the planner adds each kernel's fixed time to it, as it does for
                             the measured devices (costmodel.device: the additive law)
    attention_flops_per_s    per head dim: causal flash FLOPs / t of context attention at batch 1, 32 / 8 heads,
                             the longest prompt the table has (micro.FLASH: 16384)
    grouped_gemm_*           relative fit of t = 2 alpha + active experts' bytes / bw over the bf16 MoE rows of
                             Mixtral-8x7B's shape (hidden 4096, inter 14336, 8 experts, top-2, tp = ep = 1,
                             balanced routing) at 1 .. 64 tokens, active = min(E, tokens x top-k): alpha per
                             grouped call (the planner prices two, w13 and w2); the fused kernel's routing is
                             inside alpha, so routing_kernel_s is left out; left out too when the fit is not
                             physical (alpha or 1/bw <= 0)
    allreduce_curve_s        NCCL all_reduce (fp16) time by message size per GPU count (comm/nccl; the median of
                             repeated rows of one size), the nccl version systems/<system>.yaml names when present

A law whose rows give no physical fit (alpha or 1/bw <= 0: e.g. kernels whose operands the L2 holds) is left out
and named in `source`. Fields the database cannot give (launch, sustained clocks, the on-chip rates, the CUDA
context) are left out: the planner then uses its defaults for them (no latency floor, burst rates in steady state).
"""

from __future__ import annotations

import datetime as dt
import statistics

from roofline.catalogue.derive import fits
from roofline.catalogue.derive.tables import Database, DatabaseError

GEMM_SIZE = 8192  # validate/ops/ceilings/cases.py GEMM_SIZE
# (N, K) of the Llama-3.1-8B and Llama-3.2-3B projections (validate/clients/micro.py GEMM_SHAPES)
GEMM_SHAPES = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096),
               (5120, 3072), (3072, 3072), (16384, 3072), (3072, 8192))
SKINNY_M = (1, 16, 32, 64)
LARGE_M = (2048, 8192, 16384)
DECODE = ((1, 4096), (1, 32768), (8, 8192), (32, 2048), (32, 8192), (64, 4096))  # micro.DECODE
DECODE_MIN_SHAPES = 3  # fewer of DECODE's shapes past the L2: every (batch, context) of the table past it
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # micro.HEADS, KV_HEADS; decode head dim
SCALE_MATRIX_BYTES = 3  # static_scaled_fp8_quant: reads a bf16 element (2 bytes), writes an fp8 one (1 byte)
SMALL_ELEMENTS = 4096  # scale_matrix rows this small are a kernel's fixed cost (the largest moves 12 KB)
CURVE_POINTS = 24  # the curve keeps about this many of the sizes (scale_matrix has ~240 past the L2)
MOE = {"hidden_size": 4096, "inter_size": 14336, "num_experts": 8, "topk": 2}  # Mixtral-8x7B (probe13_core)
MS = 1e-3


def _fastest(frame, keys: list[str]):
    """`frame` reduced to the fastest row per `keys` (the best kernel the table measured for each shape)."""
    return frame.sort_values("latency").drop_duplicates(keys, keep="first")


def _open(db: Database, system: str, family: str, backend: str, table: str, used: list[str]):
    path = db.table_path(system, family, backend, table)
    used.append(db.relative(path))
    return db.read(path)


def gemm_ceilings(db: Database, system: str, backend: str, used: list[str], skipped: list[str]) -> dict:
    """gemm_flops_per_s, the skinny-GEMM law and gemm_shape_flops_per_s (see the module docstring)."""
    g = _fastest(_open(db, system, "gemm", backend, "gemm_perf", used), ["gemm_dtype", "m", "n", "k"])
    out: dict = {"gemm_flops_per_s": {}}
    for dtype, name in (("bfloat16", "bf16"), ("fp8", "fp8")):
        row = g[(g.gemm_dtype == dtype) & (g.m == GEMM_SIZE) & (g.n == GEMM_SIZE) & (g.k == GEMM_SIZE)]
        if len(row):
            out["gemm_flops_per_s"][name] = fits.sig(2 * GEMM_SIZE**3 / (row.latency.iloc[0] * MS))
    if "bf16" not in out["gemm_flops_per_s"]:
        raise DatabaseError(f"{system}: gemm: no bfloat16 row at M = N = K = {GEMM_SIZE}")
    bf16 = g[g.gemm_dtype == "bfloat16"]
    shapes = [(n, k) for n, k in GEMM_SHAPES if len(bf16[(bf16.n == n) & (bf16.k == k)])]
    large = bf16[bf16.m.isin(LARGE_M) & bf16[["n", "k"]].apply(tuple, axis=1).isin(shapes)]
    out["gemm_shape_flops_per_s"] = {"bf16": fits.sig(statistics.median(
        2 * large.m * large.n * large.k / (large.latency * MS)))}
    skinny = bf16[bf16.m.isin(SKINNY_M) & bf16[["n", "k"]].apply(tuple, axis=1).isin(shapes)]
    try:
        alpha, bw = fits.relative_fit(list(2 * skinny.n * skinny.k), list(skinny.latency * MS))
    except ValueError as err:
        skipped.append(f"gemm_latency_s / gemm_stream_bytes_per_s ({err})")
        return out
    return out | {"gemm_latency_s": fits.sig(alpha), "gemm_stream_bytes_per_s": fits.sig(bw)}


def _attention_rows(frame):
    """The rows of 32 query / 8 KV heads, bf16 cache, full attention (older tables have no window_size column)."""
    rows = frame[(frame.num_heads == HEADS) & (frame.num_key_value_heads == KV_HEADS)
                 & (frame.kv_cache_dtype == "bfloat16")]
    return rows[rows.window_size == 0] if "window_size" in rows.columns else rows


def _streaming(moved: list[int], seconds: list[float], what: str) -> dict:
    """read / copy rate, streaming law and curve from kernels moving `moved` bytes in `seconds` (module docstring)."""
    if len(set(moved)) < 2:
        raise DatabaseError(f"{what}: fewer than two sizes past the L2")
    alpha, bw = fits.relative_fit(moved, seconds)
    per_size: dict[int, list[float]] = {}
    for s, t in zip(moved, seconds, strict=True):
        per_size.setdefault(int(s), []).append(s / t)
    curve = [(s, statistics.median(r)) for s, r in sorted(per_size.items())]
    rate = fits.sig(fits.largest_rate(curve))
    step = max(1, len(curve) // CURVE_POINTS)
    return {"read_bytes_per_s": rate, "copy_bytes_per_s": rate, "memory_latency_s": fits.sig(alpha),
            "stream_bytes_per_s": fits.sig(bw), "bandwidth_curve": [[s, fits.sig(r)] for s, r in curve[::step]]}


def memory_ceilings(db: Database, system: str, backend: str, l2_bytes: int, used: list[str]) -> dict:
    """The streaming law, curve and large-size rate from the elementwise fp8 quantize kernel, or (a system with no
    such table, e.g. A100 without fp8, or one whose rows give no physical fit) from the bf16 GEMMs at M <= 64 as
    streams of their weights (module docstring)."""
    try:
        q = _open(db, system, "quantize", backend, "scale_matrix_perf", used)
        q = q[q.m * q.k * SCALE_MATRIX_BYTES >= l2_bytes]
        return _streaming(list(q.m * q.k * SCALE_MATRIX_BYTES), list(q.latency * MS),
                          f"{system}: quantize scale_matrix")
    except (DatabaseError, ValueError):
        if used and "/quantize/" in used[-1]:
            used.pop()
    g = _open(db, system, "gemm", backend, "gemm_perf", used)
    g = g[(g.gemm_dtype == "bfloat16") & g.m.isin(SKINNY_M) & (2 * g.n * g.k >= l2_bytes)]
    return _streaming(list(2 * g.n * g.k), list(g.latency * MS), f"{system}: gemm (streaming fallback)")


def small_kernel_ceilings(db: Database, system: str, backend: str) -> dict:
    """kernel_overhead_s, aten_kernel_s and fused_kernel_s: the median time of the elementwise quantize kernel at its
    smallest sizes (M K <= SMALL_ELEMENTS), the one small-kernel time the database measures; {} without it."""
    try:
        q = db.read(db.table_path(system, "quantize", backend, "scale_matrix_perf"))
    except DatabaseError:
        return {}
    small = q[q.m * q.k <= SMALL_ELEMENTS]
    if small.empty:
        return {}
    seconds = fits.sig(float(small.latency.median()) * MS)
    return {"kernel_overhead_s": seconds, "aten_kernel_s": seconds, "fused_kernel_s": seconds}


def decode_ceilings(db: Database, system: str, backend: str, l2_bytes: int, used: list[str],
                    skipped: list[str]) -> dict:
    """The decode-attention law from generation attention (module docstring)."""
    a = _attention_rows(_open(db, system, "attention", backend, "generation_attention_perf", used))
    a = _fastest(a[a.head_dim == HEAD_DIM], ["batch_size", "isl", "step"])
    rows = [(fits.decode_kv_bytes(b, KV_HEADS, i + s, HEAD_DIM), t * MS, (b, i + s) in DECODE)
            for b, i, s, t in zip(a.batch_size, a.isl, a.step, a.latency, strict=True)]
    rows = [r for r in rows if r[0] >= l2_bytes]
    law = [(s, t) for s, t, shape in rows if shape]
    if len(law) < DECODE_MIN_SHAPES:
        law = [(s, t) for s, t, _ in rows]
    try:
        d_alpha, d_bw = fits.relative_fit([s for s, _ in law], [t for _, t in law])
    except ValueError as err:
        skipped.append(f"decode_attention_* ({err})")
        return {}
    return {"decode_attention_latency_s": fits.sig(d_alpha), "decode_attention_bytes_per_s": fits.sig(d_bw)}


def prefill_ceilings(db: Database, system: str, backend: str, used: list[str]) -> dict:
    """attention_flops_per_s per head dim from context attention at batch 1, the longest prompt."""
    c = _attention_rows(_open(db, system, "attention", backend, "context_attention_perf", used))
    c = _fastest(c[c.batch_size == 1], ["head_dim", "isl"])
    out = {}
    for head_dim, rows in sorted(c.groupby("head_dim")):
        row = rows.loc[rows.isl.idxmax()]
        flops = fits.causal_flash_flops(HEADS, int(head_dim), int(row.isl))
        out[int(head_dim)] = fits.sig(flops / (row.latency * MS))
    return {"attention_flops_per_s": out} if out else {}


def moe_ceilings(db: Database, system: str, backend: str, used: list[str], skipped: list[str]) -> dict:
    """The grouped-GEMM law of the routed experts from the MoE table (module docstring); {} without the rows."""
    m = _open(db, system, "moe", backend, "moe_perf", used)
    m = m[(m.moe_dtype == "bfloat16") & (m.moe_tp_size == 1) & (m.moe_ep_size == 1)
          & (m.distribution == "balanced") & (m.num_tokens <= 64)]
    for key, value in MOE.items():
        m = m[m[key] == value]
    m = _fastest(m, ["num_tokens"])
    if m.num_tokens.nunique() < 2:
        return {}
    per_expert = 3 * MOE["hidden_size"] * MOE["inter_size"] * 2
    active = [min(MOE["num_experts"], t * MOE["topk"]) for t in m.num_tokens]
    try:
        alpha, bw = fits.relative_fit([a * per_expert for a in active], list(m.latency * MS))
    except ValueError as err:
        skipped.append(f"grouped_gemm_* ({err})")
        return {}
    return {"grouped_gemm_latency_s": fits.sig(alpha / 2), "grouped_gemm_stream_bytes_per_s": fits.sig(bw)}


def allreduce_ceilings(db: Database, system: str, used: list[str]) -> dict:
    """allreduce_curve_s: NCCL all_reduce fp16 seconds by message bytes, per GPU count; {} without a table."""
    nccl_version = str((db.system_spec(system).get("misc") or {}).get("nccl_version") or "") or None
    try:
        path = db.table_path(system, "comm", "nccl", "nccl_perf",
                             nccl_version if nccl_version in _nccl_versions(db, system) else None)
    except DatabaseError:
        return {}
    used.append(db.relative(path))
    n = db.read(path)
    n = n[(n.op_name == "all_reduce") & (n.nccl_dtype == "half")]
    median = n.groupby(["num_gpus", "message_size"]).latency.median()  # repeated rows of one size: their median
    curve: dict[int, list] = {}
    for (gpus, size), ms in median.items():
        curve.setdefault(int(gpus), []).append([int(size), fits.sig(ms * MS)])
    return {"allreduce_curve_s": curve} if curve else {}


def _nccl_versions(db: Database, system: str) -> list[str]:
    return [p.parent.name for p in (db.systems / "data" / system / "comm" / "nccl").glob("*/nccl_perf.parquet")]


def derived_section(db: Database, system: str, l2_bytes: int, backend: str = "vllm",
                    date: dt.date | None = None) -> dict:
    """The `measured:` mapping (kind 'derived') of `system` from `backend`'s tables, with its provenance;
    `l2_bytes`: the catalogue device's L2 (the streaming law skips sizes it holds); `date`: of the conversion
    (default today: the wheel records no collection dates)."""
    used: list[str] = []
    skipped: list[str] = []
    fields = {**gemm_ceilings(db, system, backend, used, skipped),
              **memory_ceilings(db, system, backend, l2_bytes, used), **small_kernel_ceilings(db, system, backend),
              **decode_ceilings(db, system, backend, l2_bytes, used, skipped),
              **prefill_ceilings(db, system, backend, used), **moe_ceilings(db, system, backend, used, skipped),
              **allreduce_ceilings(db, system, used)}
    device = str(db.read(db.table_path(system, "gemm", backend, "gemm_perf")).device.iloc[0])
    versions = sorted({p.split("/")[6] for p in used if f"/{backend}/" in p})
    source = (f"aiconfigurator-core {db.version} (pip download aiconfigurator-core=={db.version}; "
              f"github.com/ai-dynamo/aiconfigurator), {backend} {', '.join(versions)} tables: " + "; ".join(used)
              + ("; not derived, the rows give no physical fit: " + "; ".join(skipped) if skipped else ""))
    return {"kind": "derived", "device": device, "date": date or dt.date.today(), "source": source, **fields}
