"""Property tests: random and mutated spec files never escape as anything but a one-line SpecError."""

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.hf import model_from_hf_config
from roofline.catalogue.loading import parse_text, validate
from roofline.errors import SpecError
from roofline.specs import Hardware, Model, Workload

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True),
    st.text(max_size=12), st.lists(st.integers(-3, 3), max_size=3),
)
VALID = {
    Model: load_model("Llama-3.1-8B").model_dump(mode="json"),
    Hardware: load_hardware("H100-SXM").model_dump(mode="json"),
    Workload: {"batch": 4, "context_tokens": 4096, "generated_tokens": 128},
}


def _check(cls, data) -> None:
    try:
        validate(cls, data, "spec.yaml")
    except SpecError as err:
        message = str(err)
        assert message.startswith("spec.yaml: ") and "\n" not in message


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(cls=st.sampled_from(list(VALID)), key=st.text(min_size=1, max_size=20), value=SCALARS,
       drop=st.booleans())
def test_mutated_specs_fail_cleanly(cls, key, value, drop) -> None:
    data = dict(VALID[cls])
    keys = sorted(data)
    target = keys[hash(key) % len(keys)]
    if drop:
        data.pop(target)
    else:
        data[target] = value
    data.setdefault(key, value) if len(key) % 3 == 0 else None
    _check(cls, data)


@settings(max_examples=150)
@given(text=st.text(max_size=200))
def test_random_text_fails_cleanly(text) -> None:
    try:
        data = parse_text(text, "spec.yaml")
    except SpecError as err:
        assert "\n" not in str(err)
        return
    _check(Model, data)


@settings(max_examples=100)
@given(data=st.dictionaries(st.text(max_size=10), SCALARS, max_size=6))
def test_random_mappings_fail_cleanly(data) -> None:
    for cls in VALID:
        _check(cls, data)
    try:
        model_from_hf_config(dict(data, architectures=["LlamaForCausalLM"]), where="config.json")
    except SpecError as err:
        assert "\n" not in str(err)


@settings(max_examples=100)
@given(key=st.sampled_from(["hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                            "intermediate_size", "vocab_size", "rope_theta", "head_dim"]), value=SCALARS)
def test_mutated_hf_configs_fail_cleanly(root, key, value) -> None:
    import json

    data = json.loads((root / "tests/data/hf/Llama-3.1-8B/config.json").read_text())
    data[key] = value
    try:
        model_from_hf_config(data, where="config.json")
    except SpecError as err:
        assert "\n" not in str(err)


def test_yaml_round_trip_of_every_catalogue_model() -> None:
    from roofline.catalogue import model_names

    for name in model_names():
        data = yaml.safe_load(yaml.safe_dump(load_model(name).model_dump(mode="json")))
        assert validate(Model, data, name) == load_model(name)


def test_a_field_name_with_a_newline_gives_a_one_line_error():
    # found by the random mappings above: {'\n': inf} printed the key raw and split the error over two lines
    from roofline.catalogue.loading import check_plain_data

    with pytest.raises(SpecError) as err:
        check_plain_data({"\n": float("inf")}, "spec.yaml")
    assert str(err.value) == "spec.yaml: '\\n': inf is not a finite number"


def test_a_hugging_face_config_with_pythons_infinity_imports_and_a_spec_with_it_is_refused(tmp_path):
    # nvidia/Nemotron-H-8B-Base-8K's config.json ships "time_step_limit": [0.0, Infinity] (Python's json.dump
    # default, not JSON): the config imports; a Model spec in JSON keeps refusing non-finite numbers
    import json as _json
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "data" / "hf" / "hf-default-nemotron_h" / "config.json"
    text = src.read_text()
    cfg = tmp_path / "config.json"
    cfg.write_text(text.rstrip().rstrip("}") + ', "time_step_limit": [0.0, Infinity]}\n')
    reference = tmp_path / "ref" / "config.json"
    reference.parent.mkdir()
    reference.write_text(text)
    assert load_model(str(cfg)).model_dump(exclude={"name", "source"}) == \
        load_model(str(reference)).model_dump(exclude={"name", "source"})
    spec = load_model("Llama-3.1-8B").model_dump(mode="json")
    spec.pop("max_position_embeddings")
    bad = tmp_path / "spec.json"
    bad.write_text(_json.dumps(spec).rstrip("}") + ', "max_position_embeddings": Infinity}')
    with pytest.raises(SpecError, match="Infinity"):
        load_model(str(bad))
