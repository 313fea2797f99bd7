"""`roofline calibrate`: measure this machine's GPU and write a hardware YAML whose `measured` section is its own.

    roofline calibrate [--out my-gpu.yaml] [--name NAME] [--base H200] [--quick] [--device cuda|cpu]
        measures (roofline.calibrate.measure: 20-40 s on an H200 with the full grid; --quick: fewer sizes), keeps
        the raw timings beside the YAML (<out>.raw.json), and writes the YAML on the base device's datasheet fields
    roofline calibrate --from-json raw.json [--base H200] --out my-gpu.yaml
        the same file from a raw JSON measured elsewhere (python -m roofline.calibrate.measure, torch only)
    roofline calibrate --compare-to H200 my-gpu.yaml
        each ceiling of a calibrated file against a catalogue device's measured section, with the % difference
    roofline calibrate --out my-gpu.yaml --check H200   (or with --from-json)
        measure (or convert), write, then print that table against H200 (checked before anything runs)
The YAML plugs into `plan`, `capacity`, `simulate` and `kv` as `--hardware my-gpu.yaml`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from roofline.errors import SpecError

CALIBRATE_HELP = "measure this GPU's ceilings and write a hardware YAML (or convert / compare one)"


def add_calibrate_parser(sub) -> None:
    """The `calibrate` subcommand and its flags."""
    p = sub.add_parser("calibrate", help=CALIBRATE_HELP)
    p.add_argument("file", nargs="?", help="with --compare-to: the calibrated hardware YAML to compare")
    p.add_argument("--out", type=Path, help="hardware YAML to write (default my-gpu.yaml)")
    p.add_argument("--name", help="the spec's name (default <base>-calibrated)")
    p.add_argument("--base", help="catalogue device or YAML whose datasheet fields this GPU has (default: matched "
                                  "from the device name CUDA reports)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and no sustained window")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: a toy run that exercises the pipeline (CI); its figures describe no GPU")
    p.add_argument("--from-json", type=Path, help="convert this raw JSON instead of measuring")
    p.add_argument("--compare-to", help="catalogue device (or YAML) to compare FILE's measured section against")
    p.add_argument("--check", metavar="HARDWARE", help="after writing, print each calibrated ceiling against this "
                                                       "catalogue device's (or YAML's) measured section")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Measure (or convert) and write the YAML, or compare a calibrated file (see the module docstring)."""
    if args.compare_to:
        return _compare(args)
    if args.file:
        raise SpecError(f"calibrate: FILE {args.file!r} is only read with --compare-to")
    out = args.out or Path("my-gpu.yaml")
    if out.suffix not in (".yaml", ".yml"):
        raise SpecError(f"--out: {out} must end in .yaml or .yml")
    if not out.resolve().parent.is_dir():
        raise SpecError(f"--out: folder {out.resolve().parent} does not exist")
    reference = _reference(args.check) if args.check else None
    if args.from_json is not None:
        from roofline.calibrate.hardware_file import load_raw

        raw, source = load_raw(args.from_json), str(args.from_json)
    else:
        raw, source = _measure(args, out)
    spec = _write(raw, source, args, out)
    if reference is not None:
        from roofline.calibrate.compare import compare, law_rows, table

        print(table(compare(spec, reference), reference.name, law_rows(spec, reference)))
    return 0


def _reference(name: str):
    """The --check device, loaded (and its measured section required) before anything is measured."""
    from roofline.catalogue import load_hardware

    reference = load_hardware(name)
    if reference.measured is None:
        raise SpecError(f"--check: {reference.name} has no measured section to check against (a catalogue device "
                        "with one: H200, H100-SXM)")
    return reference


def _measure(args: argparse.Namespace, out: Path) -> tuple[dict, str]:
    """Run the microbenchmarks (raw JSON written beside `out`); SpecError when this machine cannot."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise SpecError("calibrate: torch is not installed (pip install torch), or pass --from-json")
    from roofline.calibrate.hardware_file import load_raw
    from roofline.calibrate.measure import device_problem, measure_to_file

    problem = device_problem(args.device)
    if problem:
        raise SpecError(f"calibrate: {problem}")
    raw_path = out.with_suffix(".raw.json")
    status = measure_to_file(raw_path, args.device, args.quick)
    if status != 0:
        raise SpecError(f"calibrate: the measurement failed (see above); raw timings, if any, in {raw_path}")
    return load_raw(raw_path), str(raw_path)


def _write(raw: dict, source: str, args: argparse.Namespace, out: Path):
    """The calibrated spec written to `out` (atomically); returns the spec."""
    from roofline.calibrate.hardware_file import calibrated_hardware, hardware_yaml
    from roofline.calibrate.measure import write_atomic

    spec = calibrated_hardware(raw, source, args.base, args.name)
    write_atomic(out, hardware_yaml(spec, source))
    print(f"wrote {out} ({spec.name}); use it as --hardware {out}", file=sys.stderr)
    return spec


def _compare(args: argparse.Namespace) -> int:
    from roofline.calibrate.compare import compare, law_rows, table
    from roofline.catalogue import load_hardware

    if args.check:
        raise SpecError("--check: give it with --out (a measurement or --from-json), not with --compare-to")
    if not args.file:
        raise SpecError("--compare-to: give the calibrated hardware YAML to compare, e.g. "
                        "roofline calibrate --compare-to H200 my-gpu.yaml")
    mine, reference = load_hardware(args.file), load_hardware(args.compare_to)
    print(table(compare(mine, reference), reference.name, law_rows(mine, reference)))
    return 0
