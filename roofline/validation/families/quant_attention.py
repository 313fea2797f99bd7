"""Family "quant_attention" (decode attention over a quantized cache, dequantization fused): work and prediction.

The case is the roofline "attention" op of a one-layer model with the case's heads under the case's method
SPEC (params["method"], parsed by roofline.methods.parse_method), decode at B = batch, L = context.
"""

from __future__ import annotations

from roofline.validation.predict import case_model, decode_work, predict_op
from roofline.validation.results_file import Case

NAME = "quant_attention"


def model_and_method(params: dict):
    """(one-layer Model with the case's heads, the method config of params["method"])."""
    from roofline.methods import parse_method

    return case_model("quant-attention", params), parse_method(params["method"])


def work(params: dict) -> dict:
    """Bytes and FLOPs of the case from the roofline "attention" op and its reduce."""
    return decode_work(*model_and_method(params), "attention", params)


def predict(case: Case, hardware) -> dict:
    """The roofline "attention" op of a one-layer model with these heads and the case's method,
    decode at B = batch, L = context (predict.predict_op)."""
    model, method = model_and_method(case.params)
    return predict_op(model, method, "attention", {"B": case.params["batch"], "L": case.params["context"]},
                      hardware)
