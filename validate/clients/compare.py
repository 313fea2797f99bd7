"""python -m validate.clients.compare --results FILE --hardware NAME|PATH [--out FILE.txt]

The committed client results against the roofline's prediction from the specs alone: every timed case
(roofline.validation.clients.compare) and the memory boundary (roofline.validation.client_memory). Pure Python.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def report_text(results: dict, hardware) -> str:
    """The timing table, then the memory-boundary table (when the results have a client_memory case)."""
    from roofline.validation.client_memory import compare_memory, render_memory
    from roofline.validation.clients import compare, render

    text = render(compare(results, hardware))
    memory = compare_memory(results, hardware)
    return text + ("\n\n" + render_memory(memory) if memory else "") + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="validate.clients.compare")
    p.add_argument("--results", type=Path, required=True)
    p.add_argument("--hardware", required=True, help="catalogue name or YAML path")
    p.add_argument("--out", type=Path, help="also write the tables here")
    args = p.parse_args(argv)
    from roofline.catalogue import load_hardware

    text = report_text(json.loads(args.results.read_text()), load_hardware(args.hardware))
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
