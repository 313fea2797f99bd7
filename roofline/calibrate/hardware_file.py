"""A raw calibration JSON + a catalogue device -> a validated hardware YAML whose `measured` section is calibrated.

The datasheet fields (peaks, memory, links, sources) come from the base device the user names (`--base H200`, a
catalogue name or a YAML path) or, without one, from the catalogue device whose measured section names the same
driver device string, or whose catalogue name the driver's device name spells; no match is a one-line error asking
for --base. The measured section is roofline.calibrate.section's mapping with kind "calibrated"; the figures CUDA
reports about the device itself also replace the base's: driver_memory_bytes (total memory), and, with an
all-reduce measured, the scale-up link's bus bandwidth.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from roofline.calibrate.section import SectionError, measured_section
from roofline.errors import SpecError

MAX_RAW_BYTES = 16 << 20


def _norm(text: str) -> str:
    """Lower case, 'nvidia' and every non-alphanumeric removed: 'NVIDIA H100 80GB HBM3' -> 'h10080gbhbm3'."""
    return re.sub(r"[^a-z0-9]", "", text.lower().replace("nvidia", ""))


def _tokens(text: str) -> set[str]:
    """Lower-case words of a device or catalogue name: 'NVIDIA A100-SXM4-80GB' -> {'nvidia', 'a100', 'sxm4', '80gb'}."""
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def match_base(device: str) -> str | None:
    """The catalogue device that `device` (torch.cuda.get_device_name) is: the one whose measured section names the
    same device; else the catalogue name all of whose words are words of the device's ('RTX-4090' in 'NVIDIA
    GeForce RTX 4090', 'A100-80GB' in 'NVIDIA A100-SXM4-80GB'; 'A10' is not in it), the one with most words when
    several are; None when none or a tie."""
    from roofline.catalogue import hardware_names, load_hardware

    names = hardware_names()
    same = [n for n in names if (m := load_hardware(n).measured) is not None and not m.estimate
            and _norm(m.device) == _norm(device)]
    if len(same) == 1:
        return same[0]
    words = _tokens(device)
    inside = [n for n in names if _tokens(n) <= words]
    most = max((len(_tokens(n)) for n in inside), default=0)
    best = [n for n in inside if len(_tokens(n)) == most]
    return best[0] if len(best) == 1 else None


def load_raw(path: Path) -> dict:
    """A raw calibration JSON (python -m roofline.calibrate.measure), checked for its format line."""
    from roofline.calibrate.measure import FORMAT
    from roofline.catalogue.loading import parse_json_object, read_text

    raw = parse_json_object(read_text(Path(path), MAX_RAW_BYTES), str(path))
    if raw.get("format") != FORMAT:
        raise SpecError(f"{path}: format: expected {FORMAT!r} (a file of python -m roofline.calibrate.measure), "
                        f"got {str(raw.get('format'))[:40]!r}")
    return raw


def _allreduce_bus_bytes_per_s(raw: dict) -> tuple[float, dict] | None:
    """Bus bandwidth 2 (n - 1) / n x bytes / time of the largest all-reduce row, and that row (None without)."""
    rows = [r for r in raw.get("rows", []) if r.get("kind") == "allreduce" and r.get("s")]
    if not rows:
        return None
    row = max(rows, key=lambda r: r["bytes"])
    n = row["gpus"]
    return 2 * (n - 1) / n * row["bytes"] / row["s"], row


def calibrated_hardware(raw: dict, source: str, base: str | None = None, name: str | None = None):
    """The Hardware spec: `base`'s datasheet fields (matched from the raw device when None) + the calibrated
    section; `name` defaults to '<base>-calibrated'. SpecError (one line) when anything does not hold."""
    from roofline.catalogue import load_hardware
    from roofline.catalogue.loading import validate
    from roofline.specs import Hardware

    try:
        section = measured_section(raw, source)
    except SectionError as err:
        raise SpecError(f"{source}: {err}") from None
    if base is None:
        base = match_base(section["device"])
        if base is None:
            raise SpecError(f"--base: the device {section['device']!r} matches no catalogue hardware; name the "
                            "catalogue device (or YAML) whose datasheet figures it has, e.g. --base H100-SXM")
        print(f"roofline calibrate: {section['device']!r} is catalogue {base} (datasheet fields from it; "
              "--base to choose another)", file=sys.stderr)
        spec = load_hardware(base)
    else:
        spec = load_hardware(base)
        matched = match_base(section["device"])
        if matched is not None and matched != spec.name:
            print(f"roofline calibrate: note: {section['device']!r} is catalogue {matched}; its datasheet fields are "
                  f"taken from --base {base} as asked", file=sys.stderr)
    data = spec.model_dump(mode="json", exclude_none=True)
    data["name"] = name or f"{spec.name}-calibrated"
    data["description"] = f"{spec.description}; ceilings calibrated on {section['device']} ({section['date']})"
    sources = dict(data["sources"])
    total = next((r.get("total_memory_bytes") for r in raw["rows"] if r.get("kind") == "cuda_context"), None)
    if total:
        data["driver_memory_bytes"] = int(total)
        sources["driver_memory_bytes"] = f"torch.cuda.get_device_properties total_memory, `roofline calibrate` {source}"
    bus = _allreduce_bus_bytes_per_s(raw)
    if bus is not None and data.get("scale_up"):
        rate, row = bus
        data["scale_up"]["bytes_per_s"] = float(f"{rate:.4g}")
        sources["scale_up"] = (f"bytes_per_s: bus bandwidth 2(n-1)/n S/t of the largest NCCL all-reduce "
                               f"({row['bytes']} bytes, {row['gpus']} GPUs, NVLS off) by `roofline calibrate` "
                               f"({source}); the rest as {spec.name}: {sources.get('scale_up', 'no source')}")
    data["sources"] = sources
    data["measured"] = {k: (v.isoformat() if k == "date" else v) for k, v in section.items()}
    return validate(Hardware, json.loads(json.dumps(data)), f"{source} on {spec.name}")


def hardware_yaml(hardware, raw_source: str) -> str:
    """The spec as YAML text, a comment on top saying where it comes from."""
    import yaml

    data = hardware.model_dump(mode="json", exclude_none=True)
    data["measured"] = {k: v for k, v in data["measured"].items() if v not in ({}, [])}
    head = (f"# {hardware.name}: written by `roofline calibrate` from {raw_source}.\n"
            "# Datasheet fields and their sources are the base device's; `measured` is this GPU's calibration.\n")
    return head + yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120)


def from_upload(text: str, filename: str, base: str | None = None):
    """The Hardware spec of an uploaded file, for the dashboard: a raw calibration JSON (converted on `base`, or the
    catalogue device its driver name matches) or a hardware YAML/JSON such as `roofline calibrate` writes. SpecError
    (one line naming the file) when it is neither or does not validate."""
    from roofline.calibrate.measure import FORMAT
    from roofline.catalogue.loading import check_plain_data, parse_text, validate
    from roofline.specs import Hardware

    data = parse_text(text, filename)
    if data.get("format") == FORMAT:
        check_plain_data(data, filename)
        return calibrated_hardware(data, filename, base)
    return validate(Hardware, data, filename)
