"""The dashboard's scenario fields, declared once: each field's widget kind, default, bounds and query-string name.

The app draws one widget per field (a new select box is one `Field(...)` line in FIELDS), reads a shared link's
query string through `from_query` (each bad value is one line naming the field and the rule, and the default stays),
and writes the scenario back with `to_query`, so a link reproduces the page. Everything here is plain data that tests
cover without Streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from roofline.specs.workload import HOST_SPEED_HELP, HOST_SPEED_MAX

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp4", "fp32")


def _weight_dtype_choices() -> tuple[str, ...]:
    """The sidebar's weight dtypes: the storage dtypes, then llama-quantize's GGUF presets (engine llamacpp or ideal;
    another engine names the rule in one line)."""
    from roofline.gguf_quant import WEIGHT_DTYPES as GGUF

    return WEIGHT_DTYPES + GGUF
PAGES = ("plan", "roofline", "compare", "pareto", "serving", "validation", "claims")
HOST_SPEED_LO = 0.01


def _hardware_names() -> list[str]:
    from roofline.catalogue import hardware_names

    return hardware_names()


def _model_names() -> list[str]:
    from roofline.catalogue import model_names

    return model_names()


def _engine_names() -> tuple[str, ...]:
    from typing import get_args

    from roofline.specs.workload import Engine

    return get_args(Engine)


def _preset_names() -> list[str]:
    from roofline.methods import presets

    return sorted(presets())


@dataclass(frozen=True)
class Field:
    """One scenario field: `kind` is 'choice' (one of options()), 'multi' (several), 'int', 'float' or 'text';
    `group` is 'spec' (hardware/model), 'methods', 'workload' (a Workload field named `target`) or 'target'
    (a planning target such as the TPOT SLO, not part of the workload)."""

    key: str
    label: str
    kind: str
    default: Any
    group: str
    target: str = ""
    options: Callable[[], Sequence[Any]] | None = None
    lo: float | None = None
    hi: float | None = None
    step: float | None = None
    help: str = ""
    extra: dict = field(default_factory=dict)


FIELDS: tuple[Field, ...] = (
    Field("hardware", "Hardware", "choice", "H100-SXM", "spec", options=_hardware_names),
    Field("model", "Model", "choice", "Llama-3.1-8B", "spec", options=_model_names),
    Field("methods", "Methods (presets)", "multi", ("bf16", "fp8", "kivi-2", "xquant-2", "zack-50"), "methods",
          options=_preset_names, help="Configurations from the seed papers and baselines (`roofline list methods`)."),
    Field("custom", "Custom method SPECs (one per line, or separated by ';')", "text", "", "methods"),
    Field("batch", "Batch (sequences)", "int", 16, "workload", "batch", lo=1, hi=1 << 16),
    Field("context", "Context (tokens)", "int", 32_768, "workload", "context_tokens", lo=2, hi=1 << 30, step=1024),
    Field("generated", "Generated tokens", "int", 1024, "workload", "generated_tokens", lo=0, hi=1 << 30, step=256),
    Field("utilization", "GPU memory utilization (0: the engine's default)", "float", 0.0, "workload",
          "gpu_memory_utilization", lo=0.0, hi=1.0, step=0.05,
          help="The CLI's --utilization; 0 leaves it to the engine (vLLM 0.92, SGLang's rule by memory, "
               "TensorRT-LLM 0.9, the planner's own 0.90)."),
    Field("tp", "Tensor parallel", "int", 1, "workload", "tp", lo=1, hi=4096, help="Degrees that divide the heads."),
    Field("weight_dtype", "Weight dtype", "choice", "bf16", "workload", "weight_dtype", options=_weight_dtype_choices,
          help="Storage dtype of the weights (the CLI's --weight-dtype): fp8 ... nvfp4 on an unquantized model store "
               "the linear matrices in the dtype's usual format, the embedding, LM head and norms at bf16; "
               "gguf:Q4_K_M ...: a GGUF preset's per-tensor types, under the llamacpp engine (or ideal)."),
    Field("engine", "Serving engine", "choice", "ideal", "workload", "engine", options=_engine_names,
          help="Whose memory rules, scheduler and step costs (the CLI's --engine): 'ideal' is the physical bound; "
               "vLLM's and SGLang's step costs are measured on the H200 (the trust line says how far they hold)."),
    # the CLI's --host-speed: (0, HOST_SPEED_MAX] there, from HOST_SPEED_LO here (a box needs a least value); drawn
    # beside the engine (the sidebar's "More settings" lays its fields out two a row, in this order)
    Field("host_speed", "Host speed (x the engine profile's host)", "float", 1.0, "workload", "host_speed",
          lo=HOST_SPEED_LO, hi=HOST_SPEED_MAX, step=0.1,
          help=f"The CLI's --host-speed: {HOST_SPEED_HELP.replace('%%', '%')}. From {HOST_SPEED_LO:g} to "
               f"{HOST_SPEED_MAX:g}; no effect "
               "under 'ideal' (the GPU work alone, no host work)."),
    Field("pp", "Pipeline stages", "int", 1, "workload", "pp", lo=1, hi=4096),
    Field("tpot_target_ms", "TPOT target (ms, 0: none)", "float", 0.0, "target", lo=0.0, hi=1e6, step=5.0,
          help="The SLO: largest context and batch under it (the CLI's --tpot-target-ms), and the SLO line."),
    # the Serving page's inputs (drawn there, kept in the link like the sidebar's)
    Field("srv_prompt", "Prompt tokens", "int", 4096, "serving", lo=16, hi=1 << 30, step=512),
    Field("srv_output", "Output tokens", "int", 512, "serving", lo=1, hi=1 << 30, step=128),
    Field("srv_requests", "Requests", "int", 300, "serving", lo=50, hi=5000, step=50),
    Field("srv_ttft", "TTFT p99 SLO (ms)", "float", 2000.0, "serving", lo=1.0, hi=1e6, step=100.0),
    Field("srv_tpot", "TPOT p99 SLO (ms)", "float", 50.0, "serving", lo=0.1, hi=1e5, step=5.0),
)
SERVING = tuple(f.key for f in FIELDS if f.group == "serving")
BY_KEY = {f.key: f for f in FIELDS}


def defaults() -> dict[str, Any]:
    """Every field's default value (lists for 'multi')."""
    return {f.key: list(f.default) if f.kind == "multi" else f.default for f in FIELDS}


def _parse(f: Field, raw: str) -> Any:
    """One query-string value as the field's type (ValueError naming the field and the rule if not)."""
    if f.kind == "multi":
        values = [v for v in raw.split(",") if v]
        bad = [v for v in values if v not in f.options()]
        if bad:
            raise ValueError(f"{f.key}: {', '.join(bad[:3])} is not a preset (roofline list methods)")
        return values
    if f.kind == "text":
        if len(raw) > 2000:
            raise ValueError(f"{f.key}: at most 2,000 characters")
        return raw
    if f.kind == "choice":
        options = list(f.options())
        if raw not in options:
            raise ValueError(f"{f.key}: {raw[:60]!r} is not one of the catalogue's names")
        return raw
    try:
        value = int(raw) if f.kind == "int" else float(raw)
    except ValueError:
        raise ValueError(f"{f.key}: {raw[:60]!r} is not a{'n integer' if f.kind == 'int' else ' number'}") from None
    if not (f.lo <= value <= f.hi):
        raise ValueError(f"{f.key}: {value} is outside [{f.lo:g}, {f.hi:g}]")
    return value


def from_query(params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The fields a query string sets (unknown names ignored) and one error line per value that is not valid."""
    state, errors = {}, []
    for key, raw in params.items():
        f = BY_KEY.get(key)
        if f is None:
            continue
        raw = raw[-1] if isinstance(raw, list | tuple) else raw
        try:
            state[key] = _parse(f, str(raw))
        except ValueError as err:
            errors.append(f"link: {err}")
    return state, errors


def to_query(state: Mapping[str, Any]) -> dict[str, str]:
    """The query string of a scenario: only the fields that differ from their defaults, so links stay short."""
    out = {}
    base = defaults()
    for f in FIELDS:
        if f.key not in state or state[f.key] == base[f.key]:
            continue
        value = state[f.key]
        out[f.key] = ",".join(value) if f.kind == "multi" else f"{value:g}" if f.kind == "float" else str(value)
    return out


def adjustments(state: Mapping[str, Any], tp_degrees: Sequence[int], layers: int) -> list[str]:
    """One line per value the page cannot plan as given and changes (a link's tp that does not divide the heads, pp
    past the layers), so a changed number is never silent."""
    out = []
    tp, pp = state.get("tp", 1), state.get("pp", 1)
    if tp not in tp_degrees:
        out.append(f"tp: {tp} does not divide the model's heads (degrees {', '.join(map(str, tp_degrees))}): "
                   f"planning tp 1")
    if pp > layers:
        out.append(f"pp: {pp:,} exceeds the model's {layers:,} layers: planning pp {layers:,}")
    return out


def upload_note(kind: str, label: str) -> str | None:
    """What a link says of an uploaded spec: it cannot travel (the file is not in the link)."""
    if not str(label).startswith("uploaded: "):
        return None
    return (f"The uploaded {kind} spec cannot travel in a link: a shared link opens with the default {kind} "
            f"({BY_KEY[kind].default}); share the file with it.")


def workload_fields(state: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload fields of a scenario state (its 'workload' group, renamed to the Workload's names)."""
    return {f.target: state.get(f.key, f.default) for f in FIELDS if f.group == "workload"}
