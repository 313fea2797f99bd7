"""llama.cpp run 18 (llamacpp_run18.sh, cublas_first_call.cu): a fresh process's first cuBLAS GEMMs, read back.

    python -m validate.engines.cublas_first_call RESDIR --predicted PRED     (the table and the hypotheses' verdicts)
    python -m validate.engines.cublas_first_call RESDIR --predicted PRED --ggml   (run 18b: the program's ggml mode)
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def runs(res: Path) -> dict[str, dict]:
    """Each process's JSON line (first-call-<loading>-<k>.json), by file stem."""
    return {f.stem: json.loads(f.read_text()) for f in sorted(res.glob("first-call-*.json"))}


def first_and_steady(run: dict, m: int, n: int) -> tuple[float, float] | None:
    """(the first call's seconds, the second's) of shape (m, n) in one process, in call order."""
    calls = [c["s"] for c in run["calls"] if (c["m"], c["n"]) == (m, n)]
    return (calls[0], calls[1]) if len(calls) >= 2 else None


def report(res: Path, pred: dict) -> list[str]:
    rs = runs(res)
    shapes = sorted({(c["m"], c["n"]) for r in rs.values() for c in r["calls"]}, key=lambda s: (s[1] != 512, s))
    lines = [f"run 18 ({res}): per process, the first / the second call of each shape (ms), in call order; "
             "context and cublasCreate (ms)",
             f"{'process':22} {'context':>8} {'create':>8} " + " ".join(f"{m}x{n:<4}".rjust(16) for m, n in shapes)]
    for name, r in rs.items():
        cells = []
        for m, n in shapes:
            fs = first_and_steady(r, m, n)
            cells.append(f"{fs[0] * 1e3:7.2f}/{fs[1] * 1e3:6.3f}".rjust(16) if fs else "-".rjust(16))
        lines.append(f"{name:22} {r['context_s'] * 1e3:8.1f} {r['create_s'] * 1e3:8.1f} " + " ".join(cells))
    h = pred["hypotheses"]
    lazy = [r for k, r in rs.items() if "lazy" in k]
    excess = [a - b for a, b in (first_and_steady(r, 4096, 512) for r in lazy)]
    med = statistics.median(excess)
    band = h["H1_first_gemm"]["low_s"], h["H1_first_gemm"]["high_s"]
    lines.append(f"H1 first 4096x512 less the second, lazy processes: {', '.join(f'{e * 1e3:.1f}' for e in excess)} "
                 f"ms, median {med * 1e3:.1f}: {'held' if band[0] <= med <= band[1] else 'refuted'} "
                 f"({band[0] * 1e3:.0f}-{band[1] * 1e3:.0f} ms predicted)")
    creates = [r["create_s"] for r in lazy]
    verdict = "held" if max(creates) < h["H2_create"]["max_s"] else "refuted"
    lines.append(f"H2 cublasCreate, lazy processes: {', '.join(f'{c * 1e3:.1f}' for c in creates)} ms: {verdict} "
                 "(EAGER loads every module in it)")
    steady = statistics.median(first_and_steady(r, 4096, 512)[1] for r in rs.values())
    ref = h["H3_steady"]["reference_s"]
    lines.append(f"H3 steady 4096x512: median {steady * 1e6:.1f} us against {ref * 1e6:.2f}: "
                 f"{'held' if abs(steady / ref - 1) <= h['H3_steady']['within'] else 'refuted'}")
    later = [first_and_steady(r, m, n)[0] for r in rs.values() for m, n in shapes if (m, n) != (4096, 512)]
    lines.append(f"H4 a later shape's first call: max {max(later) * 1e3:.1f} ms: "
                 f"{'held' if max(later) < h['H4_new_shape']['max_s'] else 'refuted'}")
    return lines


PROJECTIONS = ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (128256, 4096))  # (m, k): q/o .. lm_head


def report_ggml(res: Path, pred: dict) -> list[str]:
    """Run 18b: per process and n, the five projections' first calls less their steady ones, summed (ms)."""
    h = pred["hypotheses"]
    lines = [f"run 18b ({res}): per process, the first 512-row GEMM less its steady call, then per n the five "
             "projections' (q/o, k/v, gate/up, down, lm_head) first calls less their steady ones, summed (ms)"]
    sums: dict[int, list[float]] = {17: [], 24: [], 32: []}
    for name, r in runs(res).items():
        first = first_and_steady(r, 4096, 512)
        row = [f"{name:20} 512-row {(first[0] - first[1]) * 1e3:7.1f}"]
        for n, acc in sums.items():
            pairs = [[c["s"] for c in r["calls"] if (c["m"], c["n"], c["k"]) == (m, n, k)] for m, k in PROJECTIONS]
            acc.append(sum(p[0] - p[1] for p in pairs))
            row.append(f"n {n} {acc[-1] * 1e3:7.1f} ({' + '.join(f'{(p[0] - p[1]) * 1e3:.1f}' for p in pairs)})")
        lines.append("   ".join(row))
    med = statistics.median(sums[17])
    lo, hi = h["H1_first_n17"]["low_s"], h["H1_first_n17"]["high_s"]
    lines.append(f"H1 n 17's sum: median {med * 1e3:.1f} ms: {'held' if lo <= med <= hi else 'refuted'} "
                 f"({lo * 1e3:.0f}-{hi * 1e3:.0f} predicted; run 15's B 17 once: split 68, -kvu 92)")
    later = max(max(sums[24]), max(sums[32]))
    lines.append(f"H2 n 24 and 32 after it: max {later * 1e3:.2f} ms: "
                 f"{'held' if later < h['H2_after_n17']['max_s'] else 'refuted'}")
    return lines


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--predicted", type=Path, required=True)
    p.add_argument("--ggml", action="store_true")
    a = p.parse_args()
    print("\n".join((report_ggml if a.ggml else report)(a.results, json.loads(a.predicted.read_text()))))


if __name__ == "__main__":
    main()
