"""The typed inputs: hardware, model and workload (method configs live in roofline.methods)."""

from roofline.specs.base import Spec
from roofline.specs.hardware import DTYPES, Hardware, Link, Measured
from roofline.specs.model import MLA, AttentionConvs, AttentionLayer, LinearAttention, Model, MoE, SparseAttention
from roofline.specs.workload import Workload

__all__ = [
    "DTYPES",
    "MLA",
    "AttentionConvs",
    "AttentionLayer",
    "Hardware",
    "LinearAttention",
    "Link",
    "Measured",
    "MoE",
    "Model",
    "SparseAttention",
    "Spec",
    "Workload",
]
