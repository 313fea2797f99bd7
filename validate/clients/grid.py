"""The clients' measurement grid (torch-free, so predictions can be written without a GPU)."""

from __future__ import annotations

DECODE_SHAPES = ((1, 1024), (1, 8192), (1, 32768), (4, 4096), (8, 8192), (16, 4096), (32, 2048), (32, 8192),
                 (64, 2048))
MOE_DECODE_SHAPES = ((1, 1024), (1, 8192), (8, 4096), (32, 2048), (64, 2048))
PREFILL_PROMPTS = (512, 2048, 8192, 16384)
MOE_PREFILL_PROMPTS = (512, 2048, 8192)
FORMS = ("compiled", "eager")
PARTS = {"dense-a": ("Llama-3.1-8B", "Qwen3-8B"), "dense-b": ("Mistral-7B-v0.3", "Qwen2.5-7B", "Llama-3.2-3B"),
         "moe": ("Mixtral-8x7B",)}
HF_MODEL, HF_SHAPES = "Llama-3.1-8B", ((1, 1024), (1, 8192), (16, 4096), (64, 2048))
MEMORY_MODEL, MEMORY_BATCH = "Llama-3.1-8B", 16


def moe_layers(model, total_memory: int) -> int | None:
    """Layers of an MoE model to build on a device of `total_memory` bytes: all when its bf16 weights take at
    most 70 % of it, else as many layers as 55 % holds (room for the caches and activations)."""
    from roofline.accounting import parameter_count

    pc = parameter_count(model)
    total = 2 * pc.total
    if total <= 0.7 * total_memory:
        return None
    per_layer = 2 * (pc.total - pc.embedding - pc.lm_head) / model.num_layers
    return max(1, int(0.55 * total_memory // per_layer))


def shapes_for(experts: int, max_positions: int) -> tuple[tuple, tuple]:
    """(decode (B, L) shapes, prefill prompts) of a model, within its positions."""
    decode = MOE_DECODE_SHAPES if experts else DECODE_SHAPES
    prefill = MOE_PREFILL_PROMPTS if experts else PREFILL_PROMPTS
    return (tuple(s for s in decode if s[1] <= max_positions), tuple(p for p in prefill if p <= max_positions))


def case_params(name: str, layers: int, experts: int, max_positions: int) -> list[dict]:
    """Params of every client case of one model (both forms, decode then prefill)."""
    decode, prefill = shapes_for(experts, max_positions)
    out = []
    for form in FORMS:
        out += [{"model": name, "layers": layers, "client": form, "phase": "decode", "batch": b, "context": n}
                for b, n in decode]
        out += [{"model": name, "layers": layers, "client": form, "phase": "prefill", "batch": 1, "prompt": p}
                for p in prefill]
    return out


def case_name(params: dict) -> str:
    key = "context" if params["phase"] == "decode" else "prompt"
    return f"{params['model']}/{params['client']}/{params['phase']}/b{params['batch']}-{key[0]}{params[key]}"
