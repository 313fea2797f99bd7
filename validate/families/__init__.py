"""Kernel families; importing this package registers each of them in validate.registry.FAMILIES."""

from importlib import import_module
from pathlib import Path

from validate.families import attention_fp16, ceilings  # noqa: F401  (registers)

# Families still being written land as modules here; import each one once its file exists.
for _optional in ("quant_attention", "xquant", "aquakv", "zack"):
    if (Path(__file__).with_name(f"{_optional}.py")).is_file():
        import_module(f"validate.families.{_optional}")
