"""roofline: analytical roofline and memory planning for LLM inference under KV-cache compression.

Data flows one way: spec (pydantic) -> method config (pydantic) -> op graph (sympy)
-> totals and limits (sympy) -> numbers (lambdified numpy) -> plans, plots, app.
"""

from roofline.errors import RooflineError, SpecError

__all__ = ["RooflineError", "SpecError", "__version__"]
__version__ = "0.1.0"
