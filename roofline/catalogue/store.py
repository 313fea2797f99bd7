"""The shipped catalogues of hardware and models: exact-name lookup, or a path to a spec file.

Inside a wheel the YAML files live in `roofline/_catalogue/`; in a checkout they are the top-level
`hardware/` and `models/` folders.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from roofline.catalogue.loading import load_json_object, load_spec
from roofline.errors import SpecError
from roofline.specs import Hardware, Model

_PACKAGE = Path(__file__).resolve().parent.parent


def catalogue_dir(kind: str) -> Path:
    """Folder holding the `kind` ('hardware' or 'models') YAML files."""
    if kind not in ("hardware", "models"):
        raise ValueError(f"kind: {kind!r} is not 'hardware' or 'models'")
    for candidate in (_PACKAGE / "_catalogue" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise SpecError(f"catalogue: no {kind} folder found beside the roofline package")


def _files(kind: str) -> dict[str, Path]:
    return {p.stem: p for p in sorted(catalogue_dir(kind).glob("*.yaml"))}


def hardware_names() -> list[str]:
    return sorted(_files("hardware"), key=str.lower)


def model_names() -> list[str]:
    return sorted(_files("models"), key=str.lower)


@cache
def _load_catalogue_hardware(name: str) -> Hardware:
    return load_spec(Hardware, _files("hardware")[name])


@cache
def _load_catalogue_model(name: str) -> Model:
    return load_spec(Model, _files("models")[name])


def _looks_like_path(ref: str) -> bool:
    return "/" in ref or "\\" in ref or ref.endswith((".yaml", ".yml", ".json"))


def load_hardware(ref: str) -> Hardware:
    """A catalogue name (exact) or a path to a YAML/JSON Hardware spec."""
    if ref in _files("hardware"):
        return _load_catalogue_hardware(ref)
    if _looks_like_path(ref) or Path(ref).is_file():
        return load_spec(Hardware, Path(ref))
    raise SpecError(f"hardware: unknown name {ref!r}; valid: {', '.join(hardware_names())}")


def load_model(ref: str) -> Model:
    """A catalogue name (exact), a YAML/JSON Model spec, or a Hugging Face config.json."""
    if ref in _files("models"):
        return _load_catalogue_model(ref)
    if _looks_like_path(ref) or Path(ref).is_file():
        path = Path(ref)
        if path.suffix == ".json":
            data = load_json_object(path)
            if "architectures" in data or "model_type" in data:
                from roofline.catalogue.hf import model_from_hf_config

                return model_from_hf_config(data, where=str(path))
        return load_spec(Model, path)
    raise SpecError(f"model: unknown name {ref!r}; valid: {', '.join(model_names())}")
