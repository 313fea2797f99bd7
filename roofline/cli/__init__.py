"""`roofline` command line: list, show, kv (and the planner's commands as they land).

Every failure a user can cause prints one line `roofline: error: ...` and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from pydantic import ValidationError

from roofline import report as display
from roofline.errors import PlausibilityWarning, RooflineError, describe_validation_error, one_line
from roofline.specs.workload import HOST_SPEED_HELP, HOST_SPEED_MAX, MAX_BATCH, MAX_CONTEXT_TOKENS, MAX_GPUS

EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("roofline").strip()
        self.exit(EXIT_USAGE, f"roofline: error: {where + ': ' if where else ''}{message}\n")


# Flags are bounded so every expression is evaluated on a plausible domain (the Workload's own caps).
MAX_CONTEXT = MAX_CONTEXT_TOKENS
MAX_COUNT = MAX_GPUS


def bounded_int(limit: int, minimum: int = 1) -> Callable[[str], int]:
    """An argparse type: a whole number in [minimum, limit] ('_' separators allowed)."""

    def parse(text: str) -> int:
        digits = text.strip().replace("_", "")
        try:
            value = int(digits) if len(digits) <= 30 else None
        except ValueError:
            value = None
        if value is None:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number")
        if value < minimum:
            rule = "must be positive" if minimum == 1 else f"must be at least {minimum}"
            raise argparse.ArgumentTypeError(f"{value} {rule}")
        if value > limit:
            raise argparse.ArgumentTypeError(f"{value:,} exceeds the limit {limit:,}")
        return value

    return parse


positive_int = bounded_int(MAX_COUNT)


def add_host_speed(p: argparse.ArgumentParser) -> None:
    """--host-speed, shared by `plan` and `simulate` (roofline.engines.timing mechanism 11)."""
    p.add_argument("--host-speed", type=bounded_float(HOST_SPEED_MAX), default=1.0, help=HOST_SPEED_HELP)


MAX_KV_CACHE_BYTES = 1 << 50  # Workload.kv_cache_memory_bytes' cap


def add_kv_cache_memory(p: argparse.ArgumentParser) -> None:
    """--kv-cache-memory-bytes, shared by `plan` and `simulate` (Workload.kv_cache_memory_bytes)."""
    p.add_argument("--kv-cache-memory-bytes", type=bounded_int(MAX_KV_CACHE_BYTES),
                   help="the KV pool per GPU in bytes, as vLLM's --kv-cache-memory-bytes: replaces the engine's "
                        "budget (--utilization then does not size the pool)")


def bounded_float(limit: float) -> Callable[[str], float]:
    """An argparse type: a finite number in (0, limit]."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        if not 0 < value <= limit:
            raise argparse.ArgumentTypeError(f"{text[:40]} must be a positive finite number at most {limit:g}")
        return value

    return parse


positive_float = bounded_float(1e12)


def emit(data: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    print(display.to_json(data) if as_json else human(data))


# ---- list / show -----------------------------------------------------------------------------------

def cmd_list(args: argparse.Namespace) -> int:
    from roofline.catalogue import hardware_names, load_hardware, load_model, model_names
    from roofline.methods import presets

    if args.what == "hardware":
        rows = []
        for name in hardware_names():
            hw = load_hardware(name)
            rows.append({"name": name, "memory_bytes": hw.memory_bytes,
                         "memory_bytes_per_s": hw.memory_bytes_per_s,
                         "bf16_dense_flops_per_s": hw.bf16_dense_flops_per_s,
                         "ridge_bf16_flops_per_byte": hw.ridge_point("bf16")})
        emit(rows, args.json, lambda r: display.table(
            ["hardware", "memory", "bandwidth", "bf16 dense", "ridge (FLOP/B)"],
            [[x["name"], display.gib(x["memory_bytes"]), display.tb_per_s(x["memory_bytes_per_s"]),
              display.tflops(x["bf16_dense_flops_per_s"]), f"{x['ridge_bf16_flops_per_byte']:.0f}"] for x in r]))
    elif args.what == "models":
        from roofline.accounting import parameter_count

        rows = []
        for name in model_names():
            m = load_model(name)
            pc = parameter_count(m)
            rows.append({"name": name, "params_total": pc.total, "params_active": pc.active,
                         "layers": m.num_layers, "heads": m.num_heads, "kv_heads": m.num_kv_heads,
                         **_kv_figures(m), "max_position_embeddings": m.max_position_embeddings})
        emit(rows, args.json, lambda r: display.table(
            ["model", "params", "active", "layers", "heads/kv", "KV B/token (bf16)", "KV/seq at max ctx",
             "max ctx"],
            [[x["name"], f"{x['params_total'] / 1e9:.2f} B", f"{x['params_active'] / 1e9:.2f} B", x["layers"],
              f"{x['heads']}/{x['kv_heads']}", f"{x['bf16_kv_bytes_per_token']:,}",
              display.gib(x["bf16_kv_bytes_at_max_context"]), display.tokens(x["max_position_embeddings"])]
             for x in r]) + "\nKV B/token: bf16 bytes one token adds over every attending layer (while sliding "
            "windows fill); KV/seq: one sequence at the model's max positions, windows capped")
    else:
        rows = [{"name": name, "method": method, "description": desc, "fields": fields}
                for name, (method, fields, desc) in sorted(presets().items())]
        emit(rows, args.json, lambda r: display.table(
            ["preset", "method", "description"], [[x["name"], x["method"], x["description"]] for x in r],
            align="lll"))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from roofline.catalogue import load_hardware, load_model

    spec = load_hardware(args.name) if args.what == "hardware" else load_model(args.name)
    data = spec.model_dump(mode="json")
    if args.what == "model":
        from roofline.accounting import parameter_count

        pc = parameter_count(spec)
        data["derived"] = {"params_total": pc.total, "params_active": pc.active, **_kv_figures(spec)}
    emit(data, args.json, _show_text)
    return 0


def _kv_figures(model) -> dict[str, int]:
    """bf16 KV bytes per token over every attending layer (windows not yet full: the second token's growth, so a
    recurrent layer's fixed state, which kv_bytes counts at any context, is not a token's), per token past every
    window (full-attention layers only: 0 for an all-sliding model) and for one sequence at the model's
    positions (states included)."""
    from roofline.accounting import kv_bytes, kv_bytes_per_token

    return {"bf16_kv_bytes_per_token": int(kv_bytes(model, context=2) - kv_bytes(model, context=1)),
            "bf16_kv_bytes_per_token_past_windows": int(kv_bytes_per_token(model)),
            "bf16_kv_bytes_at_max_context": int(kv_bytes(model, context=model.max_position_embeddings))}


def _show_text(data: dict[str, Any]) -> str:
    sources = data.pop("sources", {})
    rows = [[k, json.dumps(v) if isinstance(v, dict | list) else v] for k, v in data.items()]
    text = display.table(["field", "value"], rows, align="ll")
    if sources:
        text += "\n\nsources:\n" + "\n".join(f"  {k}: {v}" for k, v in sources.items())
    return text


# ---- kv --------------------------------------------------------------------------------------------

def cmd_kv(args: argparse.Namespace) -> int:
    from roofline.accounting import under_convention
    from roofline.analysis.kvreport import kv_report
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.ceiling_sources import ceilings_label, with_ceilings
    from roofline.errors import SpecError
    from roofline.methods import parse_method
    from roofline.trust import ceilings_trust, method_trust

    model = load_model(args.model, name=args.name)
    method = parse_method(args.method)
    hardware = with_ceilings(load_hardware(args.hardware), args.ceilings)
    try:
        seen = under_convention(model, args.convention)
    except ValueError as exc:
        raise SpecError(f"{exc}") from None
    report = kv_report(seen, method, args.context, args.batch, hardware, fusion=args.fusion)
    report.update(ceilings=ceilings_label(hardware, args.ceilings), fusion=args.fusion, convention=args.convention)
    report["trust"] = {**ceilings_trust(hardware, args.fusion, model=model),
                       "kernels": method_trust(args.method, hardware)}
    if args.context > model.max_position_embeddings:
        report["warnings"] = [f"context {args.context:,} exceeds {model.name}'s max_position_embeddings "
                              f"{model.max_position_embeddings:,}: the model was not trained that long"]
    declared = model.quantization.kv_cache_dtype if model.quantization is not None else None
    if declared is not None and args.method != declared:
        report.setdefault("warnings", []).append(
            f"the checkpoint declares an {declared} KV cache (its quantization_config), which vLLM's --kv-cache-dtype "
            f"auto uses; this report is for --method {args.method} (--method {declared} gives the checkpoint's)")
    emit(report, args.json, _kv_text)
    return 0


def _kv_text(r: dict[str, Any]) -> str:
    head = (f"{r['model']}  method {r['method']}  context {r['context']:,}  batch {r['batch']}\n"
            f"KV cache: {r['kv_bytes']:,} bytes ({display.gib(r['kv_bytes'])}, {display.gb(r['kv_bytes'])}); "
            f"{r['bytes_per_token']:,.1f} bytes/token; {r['effective_bits']:.4g} effective bits\n")
    rows = [[p, f"{v:,.0f}", display.gib(v)] for p, v in r["parts_bytes"].items()]
    rows += [[f"fixed: {k}", f"{v:,}", display.gib(v)] for k, v in r["fixed_bytes"].items()]
    text = head + "\n" + display.table(["part", "bytes", "GiB"], rows)
    if "decode_ops" in r:
        ops = [[f"{o['name']} ({o['group']}) x{o['count']}", f"{o['flops']:.3g}", f"{o['bytes']:.3g}",
                f"{o['intensity_flops_per_byte']:.2f}", o["bound"], display.seconds(o["time_s"])]
               for o in r["decode_ops"]]
        text += (f"\n\ndecode step on {r['hardware']}: {display.seconds(r['decode_step_s'])} "
                 f"(ridge {r['decode_ops'][0]['ridge_flops_per_byte']:.0f} FLOP/B; {r['decode_kernels']:,} kernels at "
                 f"fusion {r['fusion']}; rows per layer instance; {_weights_text(r['decode_weights'])})\n"
                 f"ceilings: {r['ceilings']}\n"
                 + (f"trust: {r['trust']['text']}; {r['trust']['kernels']['text']}\n" if "trust" in r else ""))
        text += display.table(["op", "FLOPs", "bytes", "FLOP/B", "bound", "time"], ops)
    return text + "".join(f"\nwarning: {w}" for w in r.get("warnings", ()))


def _weights_text(w: dict[str, Any]) -> str:
    """The decode step's weight widths: 'weights bf16 (no quantization_config)', 'weights fp8
    (quantization_config: fp8)', or the routed experts apart (gpt-oss's mxfp4 experts)."""
    widths = (f"weights {w['weight_dtype']}, routed experts {w['expert_weight_dtype']}" if w["expert_weight_dtype"]
              else f"weights {w['weight_dtype']}")
    return f"{widths} ({w['read']})"


# ---- limits ----------------------------------------------------------------------------------------

def cmd_limits(args: argparse.Namespace) -> int:
    from roofline.analysis.compute_for_memory import remat_limit, remat_limit_paper
    from roofline.catalogue import load_hardware, load_model

    model = load_model(args.model)
    if args.paper_assumptions:
        result = remat_limit_paper(model, args.bits)
    else:
        result = remat_limit(model, load_hardware(args.hardware), args.bits, args.batch)
    emit(result, args.json, _limits_text)
    return 0


def _limits_text(r: dict[str, Any]) -> str:
    where = f"paper assumptions ({r['equation']})" if r["mode"] == "paper" else f"{r['hardware']}, batch {r['batch']}"
    limit = r["limit_tokens"]
    value = "never compute-bound" if limit == float("inf") else f"{limit:,.0f} tokens ({limit / 1000:.1f}K)"
    rows = [["ridge point", f"{r['ridge_flops_per_byte']:.1f} FLOP/byte"],
            ["remat FLOPs per cached token per layer", f"{r['remat_flops_per_token']:,.0f}"],
            ["cache bytes per token per layer", f"{r['cache_bytes_per_token']:,.2f}"],
            ["weight bytes per layer (overlapped)", f"{r['weight_bytes_per_layer']:,.0f}"]]
    text = f"XQuant rematerialization limit: {r['model']}, {r['bits']:g} bits, {where}\n  {value}\n\n"
    text += display.table(["term", "value"], rows, align="ll")
    note = r.get("assumptions") or r.get("formula")
    return text + (f"\n\n{note}" if note else "")


# ---- claims ----------------------------------------------------------------------------------------

def cmd_claims(args: argparse.Namespace) -> int:
    from roofline.analysis.claims import claims
    from roofline.trust import annotate_claims

    emit(annotate_claims(claims()), args.json, _claims_text)
    return 0


def _fmt_value(value: Any, unit: str) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_fmt_value(v, "") for v in value) + "]" + (f" {unit}" if unit else "")
    if isinstance(value, float):
        text = f"{value:,.4g}" if abs(value) < 1e5 else f"{value:,.0f}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def _claims_text(rows: list[dict[str, Any]]) -> str:
    blocks = []
    for c in rows:
        blocks.append(f"[{c['verdict']}] {c['id']} — {c['seed']}, {c['section']}\n"
                      f"  claim:    {c['statement']}\n"
                      f"  computed: {_fmt_value(c['computed'], c.get('unit', ''))}\n"
                      f"  assumes:  {c['assumptions']}\n"
                      f"  why:      {c['detail']}" + (f"\n  trust:    {c['trust']['text']}" if "trust" in c else ""))
    counts: dict[str, int] = {}
    for c in rows:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    summary = "; ".join(f"{n} {v}" for v, n in counts.items())
    return "\n\n".join(blocks) + f"\n\n{len(rows)} claims: {summary}"


# ---- app -------------------------------------------------------------------------------------------

def cmd_app(args: argparse.Namespace) -> int:
    import importlib.util
    import subprocess

    from roofline.dashboard.appdata import streamlit_command

    if importlib.util.find_spec("streamlit") is None:
        raise RooflineError("app: streamlit is not installed; pip install 'roofline[app]'")
    command = streamlit_command(port=args.port)
    print(f"roofline: serving the dashboard on http://127.0.0.1:{args.port or 8501}", file=sys.stderr)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 0


# ---- parser ----------------------------------------------------------------------------------------

def build_parser() -> Parser:
    parser = Parser(prog="roofline", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("list", help="list catalogue hardware, models or method presets")
    p.add_argument("what", choices=["hardware", "models", "methods"])
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="show one hardware or model spec with its sources")
    p.add_argument("what", choices=["hardware", "model"])
    p.add_argument("name", help="catalogue name or path to a spec file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("kv", help="KV-cache size, bytes per token and effective bits for a method")
    p.add_argument("--model", default="Llama-3.1-8B", help="catalogue name, YAML spec or HF config.json")
    p.add_argument("--name", help="the model's name when --model is a config.json (default: its _name_or_path, "
                   "else the folder holding it)")
    p.add_argument("--context", type=bounded_int(MAX_CONTEXT), required=True, help="tokens per sequence L")
    p.add_argument("--batch", type=bounded_int(MAX_BATCH), default=1, help="sequences B")
    p.add_argument("--method", default="bf16", help="preset name or name:key=value,...")
    p.add_argument("--hardware", default="H100-SXM", help="for the per-op decode costs: name or spec path")
    from roofline.accounting import CONVENTION_HELP, CONVENTIONS

    p.add_argument("--convention", choices=CONVENTIONS, default="engine",
                   help="whose cache the bytes follow; " + CONVENTION_HELP.replace("%", "%%"))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_kv)

    from roofline.cli.plan import add_ceilings_fusion, add_plan_parser

    add_ceilings_fusion(p)

    add_plan_parser(sub)

    from roofline.cli.best import add_best_parser

    add_best_parser(sub)

    from roofline.cli.simulate import add_simulate_parser

    add_simulate_parser(sub, positive_int, positive_float)

    from roofline.cli.capacity import add_capacity_parser

    add_capacity_parser(sub, positive_int, positive_float)

    from roofline.cli.calibrate import add_calibrate_parser

    add_calibrate_parser(sub)

    p = sub.add_parser("app", help="the Streamlit dashboard on 127.0.0.1")
    p.add_argument("--port", type=bounded_int(65535), help="port (default 8501)")
    p.set_defaults(func=cmd_app)

    p = sub.add_parser("claims", help="the seed papers' headline claims, computed, with verdicts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_claims)

    p = sub.add_parser("limits", help="closed-form limits of compute-for-memory methods")
    p.add_argument("which", choices=["remat"], help="remat: XQuant's rematerialization limit (Eq. 3/4)")
    p.add_argument("--model", default="Llama-3.1-8B")
    p.add_argument("--hardware", default="H100-SXM")
    p.add_argument("--bits", type=bounded_float(32), default=2.0, help="bits of the cached X / latents")
    p.add_argument("--batch", type=bounded_int(MAX_BATCH), default=1)
    p.add_argument("--paper-assumptions", action="store_true",
                   help="the paper's Eq. 3/4 as printed: ridge 378, d = 4096, batch 1")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_limits)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; warnings (implausible figures) go to stderr as `roofline: warning: ...` lines."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # named by the command that does not take them ('roofline: error: roofline: ...' before)
        parser.exit(EXIT_USAGE, f"roofline: error: {args.command}: unrecognized arguments: {' '.join(extra)}\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PlausibilityWarning)
        try:
            status = args.func(args)
        except (RooflineError, ValueError) as err:
            _print_warnings(caught)
            if isinstance(err, ValidationError):  # a spec built inside a command (e.g. XQuant(bits=...))
                message = describe_validation_error(err, err.title)
            else:
                message = one_line(str(err)) if str(err) else type(err).__name__
            print(f"roofline: error: {message}", file=sys.stderr)
            return EXIT_USAGE
        except BrokenPipeError:
            return 0
    _print_warnings(caught)
    return status


def _print_warnings(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        if issubclass(w.category, PlausibilityWarning):
            print(f"roofline: warning: {one_line(str(w.message))}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)

