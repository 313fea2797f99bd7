"""Symbolic cost model: ops of prefill and decode as sympy expressions, then roofline times."""

from roofline.costmodel.device import Roofline, RooflineOptions, roofline_for
from roofline.costmodel.graph import Graph, build_graph
from roofline.costmodel.ops import TRAFFIC, Op

__all__ = ["TRAFFIC", "Graph", "Op", "Roofline", "RooflineOptions", "build_graph", "roofline_for"]
