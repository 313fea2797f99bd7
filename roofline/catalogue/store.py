"""The shipped catalogues of hardware and models: exact-name lookup, or a path to a spec file.

Inside a wheel the YAML files live in `roofline/_catalogue/`; in a checkout they are the top-level
`hardware/` and `models/` folders.
"""

from __future__ import annotations

import os
import re
import warnings
from functools import cache
from pathlib import Path

from roofline.catalogue.loading import load_json_object, load_spec
from roofline.errors import PlausibilityWarning, SpecError
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
    """Names of the shipped hardware specs, case-insensitively sorted."""
    return sorted(_files("hardware"), key=str.lower)


def model_names() -> list[str]:
    """Names of the shipped model specs, case-insensitively sorted."""
    return sorted(_files("models"), key=str.lower)


@cache
def _load_catalogue_hardware(name: str) -> Hardware:
    return load_spec(Hardware, _files("hardware")[name])


@cache
def _load_catalogue_model(name: str) -> Model:
    return load_spec(Model, _files("models")[name])


def _looks_like_path(ref: str) -> bool:
    """A path rather than a catalogue name: a separator, a spec suffix, a file, or a checkpoint folder named bare
    (`--model Qwen3-8B-FP8` in the folder that holds it, as `vllm serve Qwen3-8B-FP8` takes it)."""
    return ("/" in ref or "\\" in ref or ref.endswith((".yaml", ".yml", ".json")) or _is_file(ref)
            or _is_file(str(Path(ref) / "config.json")) or _exists(ref))


def _is_dir(ref: str) -> bool:
    """Path(ref).is_dir(), False for a name too long or otherwise unusable (as _is_file)."""
    try:
        return Path(ref).is_dir()
    except (OSError, ValueError):
        return False


def _exists(ref: str) -> bool:
    """Something on disk by that name (a folder, a FIFO, a dangling link): read as a path, so that its reading says
    what it is rather than 'unknown name'."""
    try:
        return os.path.lexists(ref)
    except (OSError, ValueError):
        return False


def _is_file(ref: str) -> bool:
    """Path(ref).is_file() that is False, not an OSError, for a name too long or otherwise unusable."""
    try:
        return Path(ref).is_file()
    except (OSError, ValueError):
        return False


HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")


def _not_fetched(kind: str, ref: str) -> None:
    """A URL, or a Hugging Face id that names no file here, refused by rule: roofline reads local files only (the
    path reading would otherwise say 'No such file' of a URL with its '//' folded); an empty name names nothing."""
    if not ref.strip():
        raise SpecError(f"{kind}: {ref!r} is empty; give a catalogue name (roofline list {kind}"
                        f"{'s' if kind == 'model' else ''}) or a path")
    if "://" in ref:
        raise SpecError(f"{kind}: {ref} is a URL; roofline reads no network: download the file "
                        f"({'its config.json' if kind == 'model' else 'the spec'}) and give its path")
    if kind == "model" and HUB_ID.fullmatch(ref) and not ref.endswith((".json", ".yaml", ".yml")):
        try:
            exists = Path(ref).exists()
        except (OSError, ValueError):
            exists = False
        if not exists:
            raise SpecError(f"model: {ref!r} is neither a catalogue name nor a file here; a Hugging Face id is not "
                            f"fetched (no network): download its config.json and give the path")


def _checked(spec, where: str):
    """`spec`, after each of its plausibility warnings is issued as a PlausibilityWarning naming `where`."""
    for line in spec.plausibility_warnings():
        warnings.warn(f"{where}: {line}", PlausibilityWarning, stacklevel=3)
    return spec


def _unknown(kind: str, ref: str, names: list[str]) -> SpecError:
    shown = ref if len(ref) <= 80 else ref[:60] + "..."
    return SpecError(f"{kind}: unknown name {shown!r}; valid: {', '.join(names)}")


def load_hardware(ref: str) -> Hardware:
    """A catalogue name (exact) or a path to a YAML/JSON Hardware spec."""
    if ref in _files("hardware"):
        return _load_catalogue_hardware(ref)
    _not_fetched("hardware", ref)
    if _looks_like_path(ref):
        return _checked(load_spec(Hardware, Path(ref)), ref)
    raise _unknown("hardware", ref, hardware_names())


def load_model(ref: str, name: str | None = None) -> Model:
    """A catalogue name (exact), a YAML/JSON Model spec, a Hugging Face config.json (or the checkpoint folder
    that holds one, with its hf_quant_config.json when there is one), or a llama.cpp .gguf file (its header):
    named `name` when given, else by its `_name_or_path` (a .gguf: its file name), else by the folder that holds it
    (the current folder for a bare `config.json`)."""
    if ref in _files("models"):
        return _load_catalogue_model(ref)
    _not_fetched("model", ref)
    if _looks_like_path(ref):
        path = Path(ref)
        if _is_file(str(path / "config.json")) or _exists(str(path / "config.json")):  # a checkpoint's folder, as
            path = path / "config.json"  # `vllm serve PATH` takes it (a config.json not a file is refused below)
        elif _is_dir(ref):
            raise SpecError(f"{ref}: (folder): holds no config.json; give a Hugging Face checkpoint folder, its "
                            f"config.json or a YAML/JSON Model spec")
        if path.suffix == ".gguf":  # a llama.cpp file: its header's config (roofline.gguf_file)
            from roofline.gguf_file import model_from_gguf, read_header

            return _checked(model_from_gguf(read_header(path), name or path.stem), ref)
        if path.suffix == ".json":
            data = load_json_object(path, constants_as_text=True)  # a spec JSON is re-read strictly below
            if "architectures" in data or "model_type" in data:
                from roofline.catalogue.hf import model_from_hf_config

                if name is None and not data.get("_name_or_path") and not path.parent.name and path.stem == "config":
                    name = path.resolve().parent.name or None
                sibling = path.with_name("hf_quant_config.json")  # a ModelOpt export's settings (hf_quant)
                quant = (load_json_object(sibling) if "quantization_config" not in data and sibling.is_file()
                         else None)
                return _checked(model_from_hf_config(data, where=str(path), name=name, hf_quant_config=quant), ref)
            load_json_object(path)  # a Model spec in JSON: strict (no Infinity or NaN)
        return _checked(load_spec(Model, path), ref)
    raise _unknown("model", ref, model_names())
