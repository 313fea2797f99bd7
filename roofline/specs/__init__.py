"""The typed inputs: hardware, model and workload (method configs live in roofline.methods)."""

from roofline.specs.base import Spec
from roofline.specs.hardware import DTYPES, Hardware, Link, Measured
from roofline.specs.model import MLA, AttentionLayer, Model, MoE
from roofline.specs.workload import Workload

__all__ = [
    "DTYPES",
    "MLA",
    "AttentionLayer",
    "Hardware",
    "Link",
    "Measured",
    "MoE",
    "Model",
    "Spec",
    "Workload",
]
