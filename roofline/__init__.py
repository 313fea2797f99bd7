"""roofline: analytical roofline and memory planning for LLM inference under KV-cache compression.

Data flows one way: spec (pydantic) -> method config (pydantic) -> op graph (sympy)
-> totals and limits (sympy) -> numbers (lambdified numpy) -> plans, plots, app.

The package itself imports nothing eagerly (RooflineError and SpecError load on first use, PEP 562), so
`python -m roofline.calibrate.measure` runs on a GPU box that has torch but not pydantic.
"""

__all__ = ["RooflineError", "SpecError", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str):
    """RooflineError / SpecError from roofline.errors, imported when first asked for."""
    if name in ("RooflineError", "SpecError"):
        from roofline import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")
