"""Family "aquakv" (AQUA-KV's reference decode of one predicted layer): work and prediction.

The case is the roofline "aquakv_reconstruct" op of the predicted layer group (layer 1) of a two-layer model
with the case's heads under the case's method SPEC, decode at B = batch, L = context.
"""

from __future__ import annotations

from roofline.validation import fixed_costs
from roofline.validation.predict import decode_model, decode_work, predict_op
from roofline.validation.results_file import Case

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


def predict(case: Case, hardware) -> dict:
    """The roofline "aquakv_reconstruct" op of the predicted layer group (layer 1) of a two-layer
    model with these heads, decode at B = batch, L = context (predict.predict_op)."""
    m, method = model_and_method(case.params)
    pred = predict_op(m, method, "aquakv_reconstruct", {"B": case.params["batch"], "L": case.params["context"]},
                      hardware)
    return fixed_costs.with_fixed_costs(pred, NAME, case.params, hardware)  # K^ and V^: two launches, one op
