"""Family "fp16_attention" (GQA split-K decode attention over a bf16 cache): work and prediction.

The case is the roofline "attention" op (with its "attention_reduce") of a one-layer model with the case's
heads, bf16 baseline cache, decode at B = batch, L = context; bytes and FLOPs are that op's expressions.
"""

from __future__ import annotations

from roofline.validation.results_file import Case
from validate.model.fixed_costs import with_fixed_costs
from validate.model.predict import case_model, decode_work, predict_op

NAME = "fp16_attention"


def model_and_method(params: dict):
    """(one-layer Model with the case's heads, bf16 Baseline)."""
    from roofline.methods.baseline import Baseline

    return case_model("fp16-attention", params), Baseline(dtype="bf16")


def work(params: dict) -> dict:
    """Bytes and FLOPs of the case from the roofline "attention" op and its reduce."""
    return decode_work(*model_and_method(params), "attention", params)


def predict(case: Case, hardware) -> dict:
    """The roofline "attention" op of a one-layer model with these heads, bf16 baseline cache,
    decode at B = batch, L = context (predict.predict_op), plus the fixed cost of any kernel beyond those ops
    (fixed_costs.with_fixed_costs)."""
    model, method = model_and_method(case.params)
    values = {"B": case.params["batch"], "L": case.params["context"]}
    return with_fixed_costs(predict_op(model, method, "attention", values, hardware), NAME, case.params, hardware)
