"""A method is named by the SPEC it was asked for, even where a cache shares work between equal configs: the preset
'kivi-2' and 'kivi:bits=2' are one config (methods/kivi.py's preset fields), and a reason computed for one must not
name the other (roofline.methods.registry.applies keeps its answers by content, on disk too)."""

from pathlib import Path

from roofline.catalogue import load_model
from roofline.methods import parse_method
from roofline.methods.registry import applies

MAMBA = Path(__file__).resolve().parents[1] / "data" / "hf" / "Mamba-2.8B" / "config.json"


def test_a_reason_names_the_spec_it_was_asked_for() -> None:
    mamba = load_model(str(MAMBA))  # every layer recurrent: no KV method applies
    assert parse_method("kivi-2").model_dump() == parse_method("kivi:bits=2").model_dump()
    assert applies(parse_method("kivi:bits=2"), mamba).startswith("method 'kivi:bits=2' on Mamba-2.8B")
    assert applies(parse_method("kivi-2"), mamba).startswith("method 'kivi-2' on Mamba-2.8B")
