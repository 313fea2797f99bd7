"""Which compressed-tensors config_group stores a checkpoint matrix, as vLLM v0.24.0 assigns it.

vllm/model_executor/layers/quantization/compressed_tensors/utils.py `find_matched_target`: a layer's scheme is the
first target (in the order the groups list them; a target named twice belongs to the later group) that equals its
name or, for a `re:` target, `re.match`es it; failing that, the first non-regex target contained in its class name
(case-insensitive: `Linear` in `QKVParallelLinear`); failing that, for a fused layer (q, k and v in `qkv_proj`, gate
and up in `gate_up_proj`, Qwen3.5's in_proj_qkv and in_proj_z in `in_proj_qkvz`, in_proj_b and in_proj_a in
`in_proj_ba`), the target every one of its shards matches. The routed experts are looked up per
projection under the first expert's names (`...mlp.experts.0.gate_proj`, compressed_tensors_moe.py get_moe_method)
against the class RoutedExperts, to which a `Linear` target also applies (_add_fused_moe_to_target_scheme_map); all
their projections must share one scheme. The LM head (ParallelLMHead) is converted only when a target names it. A
layer no target matches stays at the model dtype (UnquantizedLinearMethod).
"""

from __future__ import annotations

import re
from typing import Any

from roofline.errors import SpecError

# checkpoint projection -> (vLLM's fused layer, its shards, the fused layer's class), in the scope vLLM fuses it
QKV = ("qkv_proj", ("q_proj", "k_proj", "v_proj"), "QKVParallelLinear")
GATE_UP = ("gate_up_proj", ("gate_proj", "up_proj"), "MergedColumnParallelLinear")
MLP_SCOPES = ("mlp", "shared_expert", "shared_experts")  # an attention's output gate_proj is a layer of its own
# Qwen3.5's Gated DeltaNet: packed_modules_mapping in vllm/model_executor/models/qwen3_5.py
GDN = (("in_proj_qkvz", ("in_proj_qkv", "in_proj_z"), "MergedColumnParallelLinear"),
       ("in_proj_ba", ("in_proj_b", "in_proj_a"), "MergedColumnParallelLinear"))


def _fused(scope: str, proj: str) -> tuple[str, tuple[str, ...], str] | None:
    last = scope.rsplit(".", 1)[-1]
    if proj in QKV[1] and last == "self_attn":
        return QKV
    if proj in GATE_UP[1] and last in MLP_SCOPES:
        return GATE_UP
    if last == "linear_attn":
        return next((f for f in GDN if proj in f[1]), None)
    return None


def _is_match(value: str, target: str, contains: bool = False) -> bool:
    if target.startswith("re:"):
        return re.match(target[3:], value) is not None
    return target.lower() in value.lower() if contains else target == value


def _first(value: str, targets: dict[str, Any], contains: bool = False) -> Any:
    return next((g for t, g in targets.items() if _is_match(value, t, contains)), None)


def target_map(groups: list[Any], experts: bool = False) -> dict[str, Any]:
    """target -> group, in vLLM's order (a dict keyed by target: a later group's same target replaces the scheme in
    the first one's place); for the experts, `Linear`'s group also under RoutedExperts."""
    out: dict[str, Any] = {}
    for group in groups:
        for target in group.targets:
            out[target] = group
    if experts and "Linear" in out and "RoutedExperts" not in out:
        out["RoutedExperts"] = out["Linear"]
    return out


def _layer_scheme(name: str, groups: list[Any]) -> Any:
    """A non-expert layer's group (module docstring), `name` the checkpoint's (unfused) matrix name."""
    targets = target_map(groups)
    scope, proj = name.rsplit(".", 1)
    fused = _fused(scope, proj)
    if fused is None:
        cls = "RowParallelLinear" if proj in ("o_proj", "down_proj") else "ColumnParallelLinear"
        return _first(name, targets) or _first(cls, targets, contains=True)
    layer, shards, cls = fused
    found = _first(f"{scope}.{layer}", targets) or _first(cls, targets, contains=True)
    if found is not None:
        return found
    per_shard = [_first(f"{scope}.{s}", targets) for s in shards]
    return per_shard[0] if all(per_shard) else None


def expert_scheme(prefix: str, projections: tuple[str, ...], groups: list[Any]) -> Any:
    """The routed experts' group under `prefix` (`model.layers.N.mlp.experts`): one for all projections, or a
    SpecError naming them (vLLM: "All MoE projections need to have same quantization scheme")."""
    targets = target_map(groups, experts=True)
    found = [_first(f"{prefix}.0.{p}", targets) or _first("RoutedExperts", targets, contains=True)
             for p in projections]
    if any(f is not found[0] for f in found):
        names = ", ".join(f"{p}: {f.name if f else 'none'}" for p, f in zip(projections, found, strict=True))
        raise SpecError(f"quantization_config.config_groups: the experts of {prefix} match different groups "
                        f"({names}); vLLM requires one scheme for all of an expert's projections")
    return found[0]


def scheme_of(name: str, groups: list[Any]) -> Any:
    """The group storing the non-expert matrix `name` (None: kept at the model dtype); the LM head by name only."""
    if name == "lm_head":
        targets = target_map(groups)
        return _first(name, targets) or _first("ParallelLMHead", targets, contains=True)
    return _layer_scheme(name, groups)


def check_experts(model: Any, where: str) -> None:
    """Refuse (SpecError naming `where`) a checkpoint whose config_groups split an expert's projections over groups,
    as vLLM's loader does; nothing to check without several groups or experts."""
    q = model.quantization
    if q is None or not q.groups or model.moe is None:
        return
    projections = ("gate_proj", "up_proj", "down_proj") if model.mlp == "gated" else ("up_proj", "down_proj")
    for i in range(model.num_layers):
        if model.layer_mlp(i) == "moe":
            try:
                expert_scheme(f"model.layers.{i}.mlp.experts", projections, q.groups)
            except SpecError as err:
                raise SpecError(f"{where}: {err}") from None
