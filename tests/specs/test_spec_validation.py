"""Spec invariants: strict, frozen, described, JSON-schema exportable, validators name the field."""

import pytest
from pydantic import BaseModel, ValidationError

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.loading import validate
from roofline.errors import SpecError
from roofline.specs import MLA, AttentionLayer, Hardware, Link, Measured, Model, MoE, Workload

SPECS = [Hardware, Link, Measured, Model, AttentionLayer, MLA, MoE, Workload]


@pytest.mark.parametrize("cls", SPECS)
def test_every_field_is_described_and_schema_exports(cls: type[BaseModel]) -> None:
    for name, field in cls.model_fields.items():
        assert field.description, f"{cls.__name__}.{name} has no description"
    schema = cls.model_json_schema()
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(cls.model_fields)


def test_specs_are_frozen_and_reject_unknown_keys() -> None:
    model = load_model("Llama-3.1-8B")
    with pytest.raises(ValidationError):
        model.num_layers = 3  # type: ignore[misc]
    data = model.model_dump()
    data["num_layer"] = 32
    with pytest.raises(SpecError, match="num_layer: Extra inputs are not permitted"):
        validate(Model, data, "x.yaml")


def _llama(**changes):
    data = load_model("Llama-3.1-8B").model_dump()
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("changes", "field", "rule"),
    [
        ({"num_kv_heads": 5}, "num_kv_heads", "does not divide num_heads"),
        ({"num_layers": 0}, "num_layers", "greater than 0"),
        ({"hidden_size": -4096}, "hidden_size", "greater than 0"),
        ({"attention": [{"kind": "sliding"}]}, "attention.0", "needs a window"),
        ({"attention": [{"kind": "full", "window": 4}]}, "attention.0", "only sliding or chunked layers take a window"),
        ({"num_layers": "many"}, "num_layers", "valid integer"),
    ],
)
def test_model_validators_name_field_and_rule(changes, field, rule) -> None:
    with pytest.raises(SpecError) as err:
        validate(Model, _llama(**changes), "m.yaml")
    message = str(err.value)
    assert message.startswith(f"m.yaml: {field}")
    assert rule in message
    assert "\n" not in message


def test_moe_topk_cannot_exceed_experts() -> None:
    with pytest.raises(SpecError, match="experts_per_token: 9 exceeds num_experts 8"):
        validate(MoE, {"num_experts": 8, "experts_per_token": 9, "expert_intermediate_size": 1}, "moe")


def test_hardware_requires_a_source_for_every_number() -> None:
    data = load_hardware("H100-SXM").model_dump(mode="json")  # as a spec file holds it (dates as text)
    del data["sources"]["memory_bytes_per_s"]
    with pytest.raises(SpecError, match="sources: .*no source for memory_bytes_per_s"):
        validate(Hardware, data, "hw.yaml")


def test_hardware_peak_lookup() -> None:
    h100 = load_hardware("H100-SXM")
    assert h100.peak_flops_per_s("bf16") == 989.4e12
    assert h100.ridge_point("bf16") == pytest.approx(989.4e12 / 3.35e12)
    with pytest.raises(ValueError, match="no dense fp8 peak"):
        load_hardware("A100-80GB").peak_flops_per_s("fp8")


def test_workload_lengths() -> None:
    w = Workload(context_tokens=1000, generated_tokens=100)
    assert w.prompt == 900
    with pytest.raises(ValidationError, match="generated_tokens"):
        Workload(context_tokens=100, generated_tokens=100)
    with pytest.raises(ValidationError, match="prompt_tokens"):
        Workload(context_tokens=100, prompt_tokens=90, generated_tokens=20)
    with pytest.raises(ValidationError, match="gpu_memory_utilization"):
        Workload(context_tokens=100, gpu_memory_utilization=1.5)
