"""Old (kernel.acc_update_kernel, one fp32 lane per element) against new (acc_words.acc4_words_kernel, the 4-bit
update on packed words) XQuant-CL accumulator update on the GPU: `python -m validate.ops.xquant.acc_bench OUT.json`.

Per case (acc4_b1_l4096, acc4_b8_l32768, acc4_b32_l131072, acc16_b8_l32768; cases.params): a check of each
variant against xref.acc_reference on a really quantized delta of 2048 tokens (as cases.check_acc, the delta a few
steps wide; 4-bit: the fraction of codes that differ and the largest difference; bf16: relative RMS), then
CUDA-graph medians over rotated inputs (validate.common.harness, as cases._run_acc times the grid) of each variant
("elements" at the committed launch; "words" at launch.ACC4_*; the bf16 accumulator has only "elements"), the bytes
roofline counts for the case (validate.model.families.xquant.work) over each time, and their share of the
measured copy bandwidth of the ceilings family (the spec's measured.copy_bytes_per_s: the project's Triton stream
copy; a graph-timed torch copy_ of 1 GiB, measured here, is recorded beside it as "torch_copy_tbps": it reached
only 2.76 TB/s on the H200 against the ceilings family's 4.08). The
committed prediction (validate/results/experiments/acc-bench-predicted.json) sits beside each time. The JSON is
rewritten after each case. About 1-2 minutes on an H100 (the largest case's input set is 13.4 GB, made once).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from validate.common import harness
from validate.common.sm90 import ROOT
from validate.common.testing import relative_rms
from validate.ops.xquant import cases
from validate.ops.xquant import launch as xk
from validate.ops.xquant import reference as xref

PREDICTED = ROOT / "validate" / "results" / "experiments" / "acc-bench-predicted.json"
CASES = ((4, 1, 4096), (4, 8, 32768), (4, 32, 131072), (16, 8, 32768))  # (e_b, B, L)
STEP = 0.05  # the 4-bit accumulator's step, as cases._run_acc
COPY_BYTES = 1 << 30


def variants(acc_bits: int) -> tuple[str, ...]:
    """The kernels a case times: both for the 4-bit accumulator, the elementwise one for bf16."""
    return ("elements", "words") if acc_bits == 4 else ("elements",)


def check(p: dict, variant: str) -> dict:
    """The variant against xref.acc_reference: 2048 tokens of one sequence, delta ~ N(0, 0.1) quantized."""
    import torch

    from validate.common.quantize import quantize

    n, d = min(p["context"], cases.CHECK_TOKENS), p["num_heads"] * p["head_dim"]
    g = torch.Generator(device="cuda").manual_seed(0)
    delta, deq = quantize(torch.randn(1, 1, n, d, device="cuda", generator=g) * 0.1, cases.recipes(p)[0])
    if p["accumulator_bits"] == 4:
        acc = torch.randint(0, 256, (1, n, d // 2), dtype=torch.uint8, device="cuda", generator=g)
    else:
        acc = torch.randn(1, n, d, device="cuda", generator=g).to(torch.bfloat16)
    want = xref.acc_reference(deq[:, 0], acc.clone(), None, step=STEP)
    got = xk.acc_update(delta, acc, None, step=STEP, variant=variant)
    if p["accumulator_bits"] != 4:
        return {"rel_rms": relative_rms(got, want)}
    gc, wc = (torch.stack([x.int() & 15, x.int() >> 4], -1) for x in (got, want))
    return {"differ": (gc != wc).float().mean().item(), "max_diff": (gc - wc).abs().max().item()}


def ok(row: dict) -> bool:
    """Every check of the row within cases.check_acc's bound (1e-2) and, for codes, one code at most."""
    checks = [v for k, v in row.items() if k.startswith("check_")]
    return all(c.get("rel_rms", c.get("differ", 1.0)) <= 1e-2 and c.get("max_diff", 0) <= 1 for c in checks)


def reference_tbps(device: str) -> float:
    """The ceilings family's measured copy bandwidth of `device`'s catalogue spec, TB/s."""
    from validate.model.compare import hardware_for_device
    from validate.model.hardware import load_hardware

    return load_hardware(hardware_for_device(device)).measured.copy_bytes_per_s / 1e12


def copy_tbps() -> float:
    """Streaming bandwidth: a graph-timed device copy of COPY_BYTES, (read + write) bytes per second / 1e12."""
    import torch

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = harness.graph_ms(lambda s, t: t.copy_(s), [(src, dst)])
    return 2 * COPY_BYTES / ms / 1e9


def time_case(p: dict) -> dict:
    """Graph medians (ms) of each variant on the same rotated inputs (cases._run_acc's)."""
    import torch

    from validate.model.families.xquant import work

    batch, context, d = p["batch"], p["context"], p["num_heads"] * p["head_dim"]
    rec = cases.recipes(p)[0]

    def make():
        delta = cases.random_tensor(rec, batch, context, p["delta_width"], "cuda")
        if p["accumulator_bits"] == 4:
            return delta, torch.randint(0, 256, (batch, context, d // 2), dtype=torch.uint8, device="cuda")
        return delta, torch.randn(batch, context, d, device="cuda").to(torch.bfloat16)

    sets = harness.input_sets(make, cases._set_bytes(p))
    out = {"rotation": len(sets), "bytes": work(p)["bytes"]}
    for v in variants(p["accumulator_bits"]):
        out[f"{v}_ms"] = harness.graph_ms(lambda dl, ac, v=v: xk.acc_update(dl, ac, None, STEP, variant=v), sets)
    del sets
    torch.cuda.empty_cache()
    return out


def main(path: str) -> None:
    env, rows, start = harness.environment(), [], time.time()
    doc = json.loads(PREDICTED.read_text()) if PREDICTED.exists() else {"devices": {}}
    pred = {r["case"]: r for r in doc["devices"].get("H200" if "H200" in env["device"] else "H100-SXM", {}).get(
        "rows", [])}
    env["copy_tbps"], env["torch_copy_tbps"] = reference_tbps(env["device"]), copy_tbps()
    print(env, flush=True)
    for bits, batch, context in CASES:
        p = cases.params("acc_update", batch, context, bits, False)
        name = cases.case_name(p)
        row = {"case": name, **{f"check_{v}": check(p, v) for v in variants(bits)}, **time_case(p)}
        for v in variants(bits):
            row[f"{v}_tbps"] = row["bytes"] / row[f"{v}_ms"] / 1e9
            row[f"{v}_share_of_copy"] = row[f"{v}_tbps"] / env["copy_tbps"]
            row[f"predicted_{v}_ms"] = pred.get(name, {}).get(f"{v}_ms")
        rows.append(row)
        print(f"{name:18s} " + "  ".join(f"{v} {row[f'{v}_ms']:8.4f} ms ({row[f'{v}_share_of_copy']:.0%} of copy, "
                                          f"predicted {row[f'predicted_{v}_ms'] or float('nan'):.4f})"
                                          for v in variants(bits))
              + f"  checks {[row[f'check_{v}'] for v in variants(bits)]}  [{time.time() - start:.0f} s]", flush=True)
        Path(path).write_text(json.dumps({"env": env, "rows": rows}, indent=1) + "\n")
    bad = [r["case"] for r in rows if not ok(r)]
    if bad:
        raise SystemExit(f"acc_bench: kernel differs from the torch reference at {bad}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(f"usage: python -m validate.ops.xquant.acc_bench OUT.json (root {ROOT})")
    main(sys.argv[1])
