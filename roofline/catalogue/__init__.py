"""Catalogues and spec files: strict YAML/JSON loading, the shipped hardware and model catalogues,
and the Hugging Face `config.json` import."""

from roofline.catalogue.store import catalogue_dir, hardware_names, load_hardware, load_model, model_names

__all__ = ["catalogue_dir", "hardware_names", "load_hardware", "load_model", "model_names"]
