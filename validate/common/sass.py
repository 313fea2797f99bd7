"""Static counts of a compiled kernel's main loop, read from its SASS (no GPU): what the hierarchical roofline
takes as the kernel's structure (roofline.validation.structure), with the rates left to the device.

`loop_counts(sass)`: the body of the longest loop (the span from the target of a backward branch to that
branch), per warp and per trip, counted by what each instruction occupies:
    instructions   warp instructions issued (the dispatch: one per scheduler and clock)
    int            integer-pipe instructions (LOP3, PRMT, IADD3, SHF, LEA, SEL, ISETP, IMAD, VIADD, FMNMX, ...):
                   64 lanes per clock per SM on compute capability 7.0-9.0 (CUDA C++ Programming Guide,
                   arithmetic instruction throughput), i.e. 2 clocks per warp instruction per scheduler
    fp             FP32/FP16 vector instructions (FFMA, FMUL, FADD, HFMA2, HMUL2, HADD2): 128 lanes per clock per SM
    mma            tensor-core instructions (HMMA)
    classes        every instruction by the issue class that times it (`issue_classes`): int, fp (as above),
                   f2fp (F2FP: fp32 -> bf16/fp16 pack conversions), i2f (I2F, I2FP), f2i (F2I, F2F, FRND: the
                   other conversions), mufu (MUFU), dispatch (all the rest: uniform, memory, control, moves,
                   tensor-core issue, barriers; each takes one issue slot of its scheduler)
    wavefronts     shared-memory wavefronts (128 B each, one per clock per SM) a warp's accesses need without
                   bank conflicts: ldmatrix/stmatrix .x1/.x2/.x4 = 1/2/4, LDS/STS/LDGSTS by width x 32 lanes
                   / 128 B (8-32 bit: 1, 64: 2, 128: 4)
    stall_cycles   the fixed-latency stalls the compiler encoded in the control bits (bits 41-44 of each
                   instruction's second word on sm_70+): the cycles one warp alone needs to issue the body
    waits          instructions that wait on a scoreboard (variable-latency results: shared/global loads,
                   barriers, MUFU, shuffles)
    ldl, stl, ldg  local-memory loads and stores (register spills) and global loads (LDG, LDGSTS): the
                   long-scoreboard producers (`memory_counts`)
    body_bytes     the loop body's code, 16 B per instruction: what the instruction caches must hold
                   (executed_counts: the region's static instructions, cold spans left out, each counted once)
Registers and shared memory per program come from the compiled kernel's metadata (cuobjdump -res-usage).
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from pathlib import Path

INT = ("LOP3", "PRMT", "IADD3", "SHF", "LEA", "SEL", "ISETP", "IMAD", "VIADD", "FMNMX", "SGXT", "IABS", "POPC",
       "FLO", "BMSK", "IMNMX", "PLOP3")
FP = ("FFMA", "FMUL", "FADD", "HFMA2", "HMUL2", "HADD2", "FSEL", "FSETP")
CONVERSIONS = {"F2FP": "f2fp", "I2F": "i2f", "I2FP": "i2f", "F2I": "f2i", "F2F": "f2i", "FRND": "f2i",
               "MUFU": "mufu"}
ISSUE_CLASSES = ("int", "fp", "f2fp", "i2f", "f2i", "mufu", "dispatch")
INSTRUCTION_BYTES = 16  # one sm_70+ SASS instruction (two 64-bit words)
_LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);\s*/\* (0x[0-9a-f]+) \*/")
_WORD = re.compile(r"/\* (0x[0-9a-f]+) \*/")


def instructions(sass: str) -> list[tuple[int, str, int]]:
    """(address, instruction text, second control word) for each instruction of cuobjdump -sass output."""
    lines, out, i = sass.splitlines(), [], 0
    while i < len(lines):
        m = _LINE.match(lines[i])
        if m and i + 1 < len(lines) and _WORD.search(lines[i + 1]):
            out.append((int(m.group(1), 16), m.group(2).strip(), int(_WORD.search(lines[i + 1]).group(1), 16)))
            i += 2
            continue
        i += 1
    return out


def opcode(text: str) -> str:
    """The opcode with its modifiers ('LDSM.16.M88.4'), predicate guard dropped."""
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]


def wavefronts(op: str) -> int:
    """Shared-memory wavefronts of one warp instruction `op` without bank conflicts (0: not shared memory)."""
    base = op.split(".")[0]
    if base in ("LDSM", "STSM"):
        return int(op.rsplit(".", 1)[1]) if op.rsplit(".", 1)[1] in ("1", "2", "4") else 1
    if base in ("LDS", "STS", "LDGSTS"):
        width = 128 if ".128" in op else 64 if ".64" in op else 32
        return max(1, 32 * width // 8 // 128)
    return 0


def issue_class(op: str) -> str:
    """The issue class of opcode `op` (module docstring: int, fp, f2fp, i2f, f2i, mufu or dispatch)."""
    base = op.split(".")[0]
    return "int" if base in INT else "fp" if base in FP else CONVERSIONS.get(base, "dispatch")


def issue_classes(ops: Counter) -> dict:
    """Instructions of `ops` (opcode -> count) per issue class (`issue_class`); the classes sum to the total."""
    out = dict.fromkeys(ISSUE_CLASSES, 0)
    for op, n in ops.items():
        out[issue_class(op)] += n
    return out


def loop_counts(sass: str) -> dict:
    """Counts of the longest loop's body (module docstring), per warp and trip."""
    ins = instructions(sass)
    loops = [(int(m.group(1), 16), a) for a, t, _ in ins
             if (m := re.search(r"BRA (0x[0-9a-f]+)", t)) and int(m.group(1), 16) < a]
    if not loops:
        raise ValueError("sass: no loop (no backward branch) in the kernel")
    start, end = max(loops, key=lambda span: span[1] - span[0])
    body = [(opcode(t), w) for a, t, w in ins if start <= a <= end]
    ops = Counter(op for op, _ in body)
    return {
        "instructions": len(body),
        "int": sum(n for op, n in ops.items() if op.split(".")[0] in INT),
        "fp": sum(n for op, n in ops.items() if op.split(".")[0] in FP),
        "mma": sum(n for op, n in ops.items() if op.startswith("HMMA")),
        "wavefronts": sum(n * wavefronts(op) for op, n in ops.items()),
        "stall_cycles": sum((w >> 41) & 0xF for _, w in body),
        "waits": sum(1 for _, w in body if (w >> 52) & 0x3F),
        "classes": issue_classes(ops),
        **memory_counts(ops), "body_bytes": INSTRUCTION_BYTES * len(body),
    }


def memory_counts(ops: Counter) -> dict:
    """Long-scoreboard loads and spills of `ops` (opcode -> count): ldl / stl (local memory: spilled registers),
    ldg (global loads, LDG, and global-to-shared copies, LDGSTS)."""
    by = Counter()
    for op, n in ops.items():
        by[op.split(".")[0]] += n
    return {"ldl": by["LDL"], "stl": by["STL"], "ldg": by["LDG"] + by["LDGSTS"]}


def cubin_counts(cubin: bytes, workdir: Path) -> dict:
    """loop_counts and the registers of a cubin, with the cuobjdump that ships in the triton wheel."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    path = Path(workdir) / "kernel.cubin"
    path.write_bytes(cubin)
    sass = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([str(tool), "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
    registers = int(re.search(r"REG:(\d+)", usage).group(1))
    return {"registers": registers, "loop": loop_counts(sass)}


def _branch(text: str) -> int | None:
    """Target of a branch instruction (None: not a branch)."""
    m = re.search(r"\bBRA (0x[0-9a-f]+)", text)
    return int(m.group(1), 16) if m else None


def cold_spans(ins: list[tuple[int, str, int]]) -> list[tuple[int, int]]:
    """[start, end) address spans a warp skips: the code under a forward conditional branch that holds a load
    of the constant global table (LDG.E.CONSTANT): libdevice's sinf/cosf slow path (Payne-Hanek reduction,
    taken only for |x| >= 105615; the kernels reduce their angles to [-pi, pi] first). Outermost spans only."""
    spans = []
    for i, (a, t, _) in enumerate(ins):
        target = _branch(t)
        if target is None or target <= a or not t.startswith("@"):
            continue
        inside = [x for x in ins[i + 1:] if x[0] < target]
        if any("LDG.E.CONSTANT" in x[1] for x in inside) and not any(s <= a < e for s, e in spans):
            spans.append((inside[0][0], target))
    return spans


def _loops(ins) -> list[tuple[int, int]]:
    return [(target, a) for a, t, _ in ins if (target := _branch(t)) is not None and target < a]


def mma_flops(op: str) -> int:
    """FLOPs of one warp's tensor-core instruction: HMMA.16816 (m16n8k16 per warp) = 2*16*8*16; HGMMA.64xNx16
    (a warpgroup's m64nNk16, issued by each of its 4 warps) = 2*64*N*16 / 4 per warp."""
    if op.startswith("HMMA."):
        m, n, k = (int(x) for x in re.match(r"HMMA\.(\d\d)(\d)(\d+)", op).groups())
        return 2 * m * n * k
    if op.startswith("HGMMA."):
        m, n, k = (int(x) for x in re.match(r"HGMMA\.(\d+)x(\d+)x(\d+)", op).groups())
        return 2 * m * n * k // 4
    return 0


_RS = re.compile(r"HGMMA\S*\s+R\d+,\s*R\d+,")  # HGMMA D, A (a register), B descriptor: A from registers


def hgmma_shapes(ins, lo: int, hi: int, cold, inner, trips: int) -> dict:
    """wgmma FLOPs per warp by shape, "n<N>.rs" (A from registers: HGMMA's second operand a register) or "n<N>.ss"
    (both from shared-memory descriptors), over the region lo..hi with the trips of `executed_counts`."""
    out: dict[str, int] = {}
    for a, t, _ in ins:
        if not (lo <= a <= hi and opcode(t).startswith("HGMMA.")) or any(
                c0 <= a < c1 for c0, c1 in cold):
            continue
        op = opcode(t)
        n = int(re.match(r"HGMMA\.\d+x(\d+)x", op).group(1))
        key = f"n{n}." + ("rs" if _RS.search(t) else "ss")
        out[key] = out.get(key, 0) + mma_flops(op) * (trips if any(s <= a <= e for s, e in inner) else 1)
    return out


def executed_counts(sass: str, trips: int, region: str = "kernel") -> dict:
    """Instructions one warp executes per pass of `region` ("kernel": the whole kernel once; "outer": one trip
    of its longest loop), every loop nested in it run `trips` times (one level: an instruction in two nested
    loops of the region also counts `trips` times) and cold_spans left out: instructions,
    int, fp, classes (as loop_counts), hmma / hgmma instructions with their FLOPs per warp (`mma_flops`; hgmma_shapes:
    by shape and A operand, `hgmma_shapes`), spills (STL
    and LDL: local-memory stores and loads of spilled registers; also apart as stl, ldl, with ldg: `memory_counts`),
    wavefronts, body_bytes (the region's static code, cold spans left out)."""
    ins = instructions(sass)
    cold = cold_spans(ins)
    loops = [s for s in _loops(ins) if not any(c0 <= s[0] < c1 for c0, c1 in cold)]
    if region == "outer":
        lo, hi = max(loops, key=lambda s: s[1] - s[0])
    else:
        lo, hi = ins[0][0], ins[-1][0]
    inner = [(s, e) for s, e in loops if lo <= s and e <= hi and (s, e) != (lo, hi)]
    ops = Counter()
    for a, t, _ in ins:
        if lo <= a <= hi and not any(c0 <= a < c1 for c0, c1 in cold):
            ops[opcode(t)] += trips if any(s <= a <= e for s, e in inner) else 1
    by = {k: sum(n for op, n in ops.items() if op.split(".")[0] == k) for k in ("HMMA", "HGMMA", "STL", "LDL")}
    return {
        "instructions": sum(ops.values()),
        "int": sum(n for op, n in ops.items() if op.split(".")[0] in INT),
        "fp": sum(n for op, n in ops.items() if op.split(".")[0] in FP),
        "hmma": by["HMMA"], "hmma_flops": sum(n * mma_flops(op) for op, n in ops.items() if op.startswith("HMMA.")),
        "hgmma": by["HGMMA"],
        "hgmma_flops": sum(n * mma_flops(op) for op, n in ops.items() if op.startswith("HGMMA.")),
        "hgmma_shapes": hgmma_shapes(ins, lo, hi, cold, inner, trips),
        "spills": by["STL"] + by["LDL"],
        "wavefronts": sum(n * wavefronts(op) for op, n in ops.items()),
        "inner_loops": len(inner), "cold_spans": len(cold), "classes": issue_classes(ops),
        **memory_counts(ops),
        "body_bytes": INSTRUCTION_BYTES * sum(1 for a, _, _ in ins if lo <= a <= hi
                                              and not any(c0 <= a < c1 for c0, c1 in cold)),
    }
