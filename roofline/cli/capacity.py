"""`roofline capacity`: the KV pool as a serving engine allocates and logs it."""

from __future__ import annotations

import argparse
import math
from typing import Any

from roofline import report as display

HELP = "KV pool, logged tokens and concurrency as vLLM / SGLang / TensorRT-LLM / llama.cpp size them"


def add_capacity_parser(sub, positive_int, positive_float) -> None:
    """Register `roofline capacity` and its engine flags on the subcommand parser."""
    from roofline.cli import add_kv_cache_memory
    from roofline.engines import ENGINES

    p = sub.add_parser("capacity", help=HELP)
    p.add_argument("--model", required=True, help="catalogue name, YAML spec or HF config.json")
    p.add_argument("--name", help="the model's name when --model is a config.json (default: its _name_or_path, "
                   "else the folder holding it)")
    p.add_argument("--hardware", help="catalogue name or YAML spec (default H100-SXM; unused with --kv-memory-gib)")
    p.add_argument("--engine", required=True, choices=ENGINES)
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel ranks")
    p.add_argument("--pp", type=positive_int, default=1, help="pipeline stages (the first, fullest, is reported)")
    p.add_argument("--dp", type=positive_int, default=1, help="data-parallel replicas (SGLang: DP attention)")
    p.add_argument("--kv-cache-dtype", default="auto", help="the engine's own KV dtype names (default auto)")
    p.add_argument("--block-size", type=positive_int, help="block / page / tokens_per_block (engine default)")
    p.add_argument("--max-model-len", type=positive_int, help="tokens per request (llama.cpp: n_ctx)")
    p.add_argument("--gpu-memory-utilization", type=positive_float,
                   help="vLLM gpu_memory_utilization, SGLang mem_fraction_static, TRT-LLM free_gpu_memory_fraction")
    p.add_argument("--max-num-batched-tokens", type=positive_int, help="profile-run / chunked-prefill tokens")
    p.add_argument("--kv-memory-gib", type=positive_float,
                   help="KV budget per rank in GiB (e.g. a logged 'Available KV cache memory'); replaces the estimate")
    add_kv_cache_memory(p)
    p.add_argument("--weight-dtype", help="weights for the budget estimate (bf16, fp8, mxfp4, ...; default: the "
                   "checkpoint's stored widths from its quantization_config, else bf16); under --engine llamacpp a "
                   "llama-quantize file type: gguf:Q8_0, gguf:Q6_K, gguf:Q5_K_M, gguf:Q4_K_M, gguf:Q4_0, ...")
    p.add_argument("--expert-weight-dtype", help="routed experts for the budget estimate (default: --weight-dtype; "
                   "gpt-oss ships mxfp4)")
    p.add_argument("--entry-point", choices=("api", "offline"), default="api",
                   help="how the engine is started: 'api' its server (vllm serve), 'offline' its Python LLM class; "
                   "vLLM's default token budget differs (8192 / 16384 on a >= 70 GiB GPU)")
    p.add_argument("--enable-prefix-caching", action="store_true",
                   help="vLLM: prefix caching on (hybrid models: their mamba cache mode holds more blocks)")
    p.add_argument("--mamba-cache-mode", choices=("none", "align", "all"),
                   help="vLLM --mamba-cache-mode (default: the engine's choice for the model)")
    p.add_argument("--parallel", type=positive_int, default=1, help="llama.cpp -np: sequences")
    p.add_argument("--no-kv-unified", action="store_true", help="llama.cpp: one KV stream per sequence")
    p.add_argument("--swa-full", action="store_true", help="llama.cpp --swa-full: SWA layers keep n_ctx cells")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_capacity)


# flags only one engine reads (their help says whose): given with another engine they would be ignored silently
ENGINE_FLAGS = (("entry_point", "--entry-point", "vllm", lambda v: v != "api"),
                ("enable_prefix_caching", "--enable-prefix-caching", "vllm", bool),
                ("mamba_cache_mode", "--mamba-cache-mode", "vllm", lambda v: v is not None),
                ("parallel", "--parallel", "llamacpp", lambda v: v != 1),
                ("no_kv_unified", "--no-kv-unified", "llamacpp", bool),
                ("swa_full", "--swa-full", "llamacpp", bool))


def check_engine_flags(args: argparse.Namespace) -> None:
    """Refuses a flag of one engine given with another (ENGINE_FLAGS) and llama.cpp with --dp (its server has no
    data-parallel replicas), each in one line naming the flag and whose it is."""
    from roofline.errors import SpecError

    for attr, flag, engine, given in ENGINE_FLAGS:
        if given(getattr(args, attr)) and args.engine != engine:
            raise SpecError(f"{flag}: {engine}'s flag; --engine {args.engine} does not read it")
    if args.dp > 1 and args.engine == "llamacpp":
        raise SpecError("--dp: llama.cpp's server has no data-parallel replicas (run several servers instead)")


def _options(args: argparse.Namespace):
    from roofline.engines import GIB, EngineOptions
    from roofline.errors import SpecError

    check_engine_flags(args)
    if args.kv_memory_gib is not None and args.kv_cache_memory_bytes is not None:
        raise SpecError("--kv-cache-memory-bytes: gives the KV budget as --kv-memory-gib does; give one of them")
    util = args.gpu_memory_utilization
    if util is not None and util > 1:
        raise SpecError(f"--gpu-memory-utilization: {util} must be at most 1")
    return EngineOptions(
        tp=args.tp, pp=args.pp, dp=args.dp, kv_cache_dtype=args.kv_cache_dtype, block_size=args.block_size,
        max_model_len=args.max_model_len, gpu_memory_utilization=util,
        max_num_batched_tokens=args.max_num_batched_tokens,
        kv_memory_bytes=(float(args.kv_cache_memory_bytes) if args.kv_cache_memory_bytes is not None else
                         None if args.kv_memory_gib is None else args.kv_memory_gib * GIB),
        parallel=args.parallel, kv_unified=not args.no_kv_unified, swa_full=args.swa_full,
        enable_prefix_caching=args.enable_prefix_caching, mamba_cache_mode=args.mamba_cache_mode)


def budget_parts(model, hardware, tp: int, pp: int, chunk: int, weight_dtype: str,
                 expert_weight_dtype: str | None = None, engine: str | None = None, max_num_seqs: int | None = None):
    """The planner's estimates of what sits beside the KV cache on the fullest GPU (routed experts at
    `expert_weight_dtype` when given, else at `weight_dtype`). With engine 'vllm' the activations are vLLM 0.24's
    profile-run peak for `chunk` tokens and `max_num_seqs` sampler rows (None: the engine's default for this GPU),
    its CUDA-graph estimate and its measured non-torch increase (roofline/engines/vllm_profile.py) instead of the
    generic activation_peak and runtime reserve."""
    from dataclasses import replace

    from roofline.catalogue.loading import validate
    from roofline.engines import BudgetParts
    from roofline.planner.memory import activation_peak, context_bytes, default_reserve, weights_per_gpu
    from roofline.specs import Workload

    workload = validate(Workload, {"batch": 1, "context_tokens": chunk + 1, "prompt_tokens": chunk,
                                   "prefill_chunk_tokens": chunk, "tp": tp, "pp": pp,
                                   "weight_dtype": weight_dtype,
                                   **({"expert_weight_dtype": expert_weight_dtype} if expert_weight_dtype else {})},
                        "workload")
    # what CUDA reports (torch total_memory, what every engine reads), else the datasheet capacity
    parts = BudgetParts(total=hardware.driver_memory_bytes or hardware.memory_bytes,
                        weights=weights_per_gpu(model, workload),
                        activations=activation_peak(model, workload), non_torch=default_reserve(workload, hardware),
                        context=context_bytes(workload, hardware))
    if engine != "vllm":
        return parts
    from roofline.engines.vllm_profile import engine_peak

    peak = engine_peak(model, hardware, tp, chunk, max_num_seqs)
    return replace(parts, activations=peak.peak_bytes, cudagraph=peak.cudagraph_bytes,
                   non_torch=peak.non_torch_bytes, context=0)




def cmd_capacity(args: argparse.Namespace) -> int:
    """`roofline capacity`: the engine's KV pool, pool tokens and concurrency for the model; 0 on success."""
    from dataclasses import replace

    from roofline.catalogue import load_hardware, load_model
    from roofline.engines import capacity
    from roofline.engines.scheduling import SCHEDULING_ENGINES, scheduling
    from roofline.gguf_quant import preset_of, weights_rule
    from roofline.report.bounds import check_expert_dtype, check_weight_dtype

    model = load_model(args.model, name=args.name)
    check_expert_dtype(model, args.expert_weight_dtype)
    if args.weight_dtype is None:  # a .gguf --model: its file type (gguf_file.file_weight_dtype)
        from roofline.gguf_file import file_weight_dtype

        args.weight_dtype = file_weight_dtype(args.model)
    check_weight_dtype(model, args.weight_dtype, args.engine, args.expert_weight_dtype)
    options = _options(args)
    hardware = load_hardware("H100-SXM" if args.hardware is None else args.hardware)
    if options.max_num_batched_tokens is None and args.engine in SCHEDULING_ENGINES:
        # the engine's own default for this GPU and entry point (vLLM: 16384 offline / 8192 served on >= 70 GiB)
        default = scheduling(args.engine, hardware, entry=args.entry_point, tp=args.tp).max_num_batched_tokens
        options = replace(options, max_num_batched_tokens=default)
    weight_dtype, expert_dtype, read = _checkpoint_dtypes(model, args)
    options = replace(options, kv_cache_dtype=read.get("kv_cache_dtype", options.kv_cache_dtype))
    parts = None
    if options.kv_memory_bytes is None:
        parts = budget_parts(model, hardware, args.tp, args.pp, options.max_num_batched_tokens, weight_dtype,
                             expert_dtype, engine=args.engine)
    result = capacity(model, args.engine, options, parts).as_dict()
    if parts is not None and args.engine == "vllm":
        from roofline.engines.vllm_profile import engine_peak

        result["rules"].insert(1, engine_peak(model, hardware, args.tp, options.max_num_batched_tokens).rule())
    result["model"] = model.name
    result["dp"] = args.dp  # max_concurrency and sequences_at_once are over the dp replicas; the pool is one's
    if (preset := preset_of(weight_dtype)) is not None:
        result["rules"].append(weights_rule(model, preset))
        from roofline.gguf_file import rules_note

        if note := rules_note(args.model, model, weight_dtype):
            result["notes"] = [*result.get("notes", ()), note]
    if read:
        result["checkpoint_read"] = read
    _no_room(result, parts, options)
    from roofline.stored_bytes import uncounted_towers

    if parts is not None and (missing := uncounted_towers(model)):  # the estimate's weights miss a tower
        result["notes"] = [*result.get("notes", ()), missing]
    from roofline.trust.quantities import capacity_trust

    result["trust"] = capacity_trust(hardware, args.engine, model, budget_logged=options.kv_memory_bytes is not None)
    if args.json:
        import json

        print(json.dumps(result, indent=2, default=_json_default))
    else:
        print(capacity_text(result, model.max_position_embeddings))
    return 0


def _checkpoint_dtypes(model, args: argparse.Namespace) -> tuple[str, str | None, dict[str, Any]]:
    """(weight dtype, expert dtype, what was read): the flags when given, else the checkpoint's stored widths
    (stored_bytes.dominant_dtypes; the planner adds its scales and unconverted modules), or the what-if an unquantized
    model at a quantized dtype is planned as (planned_weights.what_if_note); and for vLLM with
    --kv-cache-dtype auto, the KV dtype the checkpoint declares (vLLM's auto resolves to it: stored_bytes.KV_NOTE)."""
    from roofline.planned_weights import what_if_note
    from roofline.stored_bytes import KV_NOTE, dominant_dtypes

    read: dict[str, Any] = {}
    weight, expert = args.weight_dtype or "bf16", args.expert_weight_dtype
    q = model.quantization
    if q is not None and args.weight_dtype is None and expert is None:
        weight, expert = dominant_dtypes(model)
        read["weights"] = (f"quantization_config {q.method}: stored widths (weights {weight}, "
                           f"experts {expert or weight})")
    elif note := what_if_note(model, weight, expert or weight):  # an unquantized model at a quantized dtype
        read["weights"] = note["what_if"]
    if q is not None and q.kv_cache_dtype == "fp8" and args.engine == "vllm" and args.kv_cache_dtype == "auto":
        read["kv_cache_dtype"] = "fp8"
        key = "kv_cache_scheme" if q.method == "compressed-tensors" else "kv_cache_quant_algo"
        read["kv_cache"] = KV_NOTE.format(key=key, dtype="fp8")
    return weight, expert, read


def _no_room(result: dict[str, Any], parts, options) -> None:
    """A pool at or below zero is reported as 0 with the shortfall (`kv_pool_shortfall_bytes`) and what takes the
    memory, never as a negative pool."""
    pool = result["kv_pool_bytes"]
    if pool > 0:
        return
    result["kv_pool_bytes"] = 0
    result["kv_pool_shortfall_bytes"] = -pool
    if parts is not None:
        util = options.gpu_memory_utilization
        result["no_room"] = (f"the weights do not fit: weights {display.gib(parts.weights)} + activations "
                             f"{display.gib(parts.activations)} + non-torch {display.gib(parts.non_torch)} exceed the "
                             + (f"engine's share of {display.gib(parts.total)} x {util}" if util else
                                f"engine's default share of the GPU's {display.gib(parts.total)} (its fraction: rules)")
                             + f" by {display.gib(-pool)}: more GPUs (--tp, --pp) or smaller weights (--weight-dtype)")
    else:
        result["no_room"] = "--kv-memory-gib leaves no room for the KV cache"


def _json_default(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def _concurrency_rows(r: dict[str, Any]) -> list[list[str]]:
    """How many requests of max_model_len run at once; under vLLM with sliding windows, what it runs (its admission
    gate) first and the start-up log's estimate (every request at the admission cap) beside it, each labelled."""
    at, length = r.get("sequences_at_once"), f"{r['max_model_len']:,}"
    dp = r.get("dp", 1)
    if dp > 1:  # the engines log each replica's pool and concurrency; the row is their sum
        return [[f"max concurrency at {length} tokens, over {dp} data-parallel replicas (each "
                 f"{r['max_concurrency'] / dp:,.2f}x)", f"{r['max_concurrency']:,.2f}x"],
                *([[f"requests of {length} tokens running at once, over the {dp} replicas", f"{at:,}"]]
                  if at is not None and at != math.floor(r["max_concurrency"]) else [])]
    if at is None or at == math.floor(r["max_concurrency"]):
        return [[f"max concurrency at {length} tokens", f"{r['max_concurrency']:,.2f}x"]]
    return [[f"requests of {length} tokens running at once (vLLM's admission: windows held, not capped)", f"{at:,}"],
            ["'Maximum concurrency' vLLM logs at start-up (each request at window + chunk)",
             f"{r['max_concurrency']:,.2f}x"]]


def capacity_text(r: dict[str, Any], positions: int | None = None) -> str:
    """The capacity result as a two-column text table with the rules applied; `positions`: the model's, which cap a
    request whatever the pool holds (the longest request the pool holds is memory's answer, as the engines' own
    'estimated maximum model length' is)."""
    longest = r["max_model_len_that_fits"]
    capped = positions is not None and (longest is None or longest > positions)
    longest_text = ("unbounded" if longest is None else f"{longest:,}") + (
        f" (memory; the model's {positions:,} positions cap a request)" if capped else "")
    pool = (display.gib(r["kv_pool_bytes"]) if "kv_pool_shortfall_bytes" not in r
            else f"none ({display.gib(r['kv_pool_shortfall_bytes'])} short)")
    rows = [["KV pool per GPU", pool],
            ["bytes per token per GPU (long context)", f"{r['bytes_per_token']:,.0f}"],
            ["pool tokens (blocks x block size; vLLM <= 0.19 logs this)" if r["engine"] == "vllm"
             else "pool tokens (as the engine logs)", f"{r['pool_tokens']:,}"],
            *_concurrency_rows(r),
            *([["'GPU KV cache size' as vLLM 0.24 logs it (concurrency x max_model_len)",
                f"{r['tokens_at_max_concurrency']:,}"]] if r["engine"] == "vllm" else []),
            ["fits one request of max_model_len", "yes" if r["fits"] else "no"],
            ["longest request that fits", longest_text]]
    text = f"{r['model']} under {r['engine']}\n" + display.table(["quantity", "value"], rows, align="ll")
    if "no_room" in r:
        text = f"{text}\n\n{r['no_room']}"
    text += "".join(f"\nnote: {note}" for note in r.get("notes", ()))
    if "trust" in r:
        text = f"{text}\ntrust: {r['trust']['text']}"
    return text + "\n\nrules:\n" + "\n".join(f"  {rule}" for rule in r["rules"])
