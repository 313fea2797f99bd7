"""python -m roofline.catalogue.derive --package PATH [--backend vllm] [--write] [--only NAME ...]

Derives the measured section (kind 'derived') of every catalogue device aiconfigurator has tables for (SYSTEMS)
and prints one line per device; with --write, stores each as hardware/derived/<name>.yaml (the catalogue file with
that section, for checking against devices measured here) and, where the catalogue file has no section or a
derived one, into hardware/<name>.yaml itself (a measured section is never replaced). PATH: the
aiconfigurator-core wheel (`pip download aiconfigurator-core==0.12.0 --no-deps -d /tmp/aic`) or its unpacked
folder. Needs the optional extra `aic` (pandas, pyarrow). Exit status 2 on a bad package or a device whose
database disagrees with the catalogue's datasheet bandwidth by more than BANDWIDTH_TOLERANCE (another SKU).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from roofline.catalogue.derive.tables import DatabaseError, open_database
from roofline.catalogue.derive.write import BANDWIDTH_TOLERANCE, SYSTEMS, derive_device, write_device
from roofline.errors import SpecError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m roofline.catalogue.derive", description=__doc__.split("\n\n")[1])
    p.add_argument("--package", type=Path, required=True, help="aiconfigurator-core wheel or unpacked folder")
    p.add_argument("--backend", default="vllm", help="backend whose tables to read (vllm, sglang, trtllm)")
    p.add_argument("--write", action="store_true", help="write hardware/derived/*.yaml and the catalogue files")
    p.add_argument("--only", nargs="+", metavar="NAME", help="catalogue names to derive (default: all of SYSTEMS)")
    args = p.parse_args(argv)
    names = {v: k for k, v in SYSTEMS.items()}
    unknown = [n for n in args.only or [] if n not in names]
    if unknown:
        print(f"--only: {', '.join(unknown)} not among {', '.join(sorted(names))}", file=sys.stderr)
        return 2
    try:
        db = open_database(args.package)
        for name in args.only or list(names):
            section = derive_device(db, names[name], name, args.backend)
            where = write_device(name, section) if args.write else "not written"
            print(f"{name}: {section['device']}: read {section['read_bytes_per_s'] / 1e12:.3f} TB/s, bf16 GEMM "
                  f"{section['gemm_flops_per_s']['bf16'] / 1e12:.0f} TFLOP/s ({where})")
    except ImportError as err:
        print(f"error: {err.name or err}: the converter reads parquet tables; pip install 'roofline[aic]'",
              file=sys.stderr)
        return 2
    except (DatabaseError, SpecError, ValueError, KeyError, OSError) as err:
        print(f"error: {err} (bandwidth tolerance {BANDWIDTH_TOLERANCE:.0%})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
