"""Compile Triton kernels for an H100 (sm_90) without a GPU, to read their shared memory.

`triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))` runs the whole pipeline to cubin
(ptxas ships with the triton wheel); tests use it to keep every kernel within the 227 KiB an H100 SM
gives one block. The compiler cannot run in a process that imported triton with TRITON_INTERPRET=1
(triton's own library functions are then interpreted), so `shared_bytes` compiles in a child process
without it: `python -m validate.common.sm90` reads a JSON list of kernel specs on stdin and prints the results.
A spec: {"module", "kernel", "signature": {arg: "*bf16" | "i32" | "fp32" ...}, "constexprs": {ARG: value},
"num_warps", "num_stages", "divisible": [int args that are multiples of 16 at run time], "maxnreg" (optional: the
register cap, as the launch option)}. Pointer arguments are taken as 16-byte aligned (as torch's allocations are),
like the JIT specializes them on a GPU, so the pipelining and shared memory match what the GPU compiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

H100_SHARED_BYTES = 227 * 1024
ROOT = Path(__file__).resolve().parents[2]  # the checkout


def compile_sm90(kernel, signature: dict[str, str], constexprs: dict[str, object], num_warps: int = 4,
                 num_stages: int = 3, capability: int = 90, divisible: tuple[str, ...] = (),
                 maxnreg: int | None = None):
    """Compile a JITFunction: `signature` types the runtime arguments, `constexprs` gives the others; `maxnreg`
    caps the registers per thread as the launch option of that name does (None: no cap)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import JITFunction

    if not isinstance(kernel, JITFunction):
        raise TypeError("compile_sm90: the kernel was decorated under TRITON_INTERPRET=1; use shared_bytes()")
    missing = [a for a in kernel.arg_names if a not in signature and a not in constexprs]
    if missing:
        raise ValueError(f"signature: no type or constexpr value for {missing}")
    full = {a: signature.get(a, "constexpr") for a in kernel.arg_names}
    target = GPUTarget("cuda", capability, 32)
    launch = {"num_warps": num_warps, "num_stages": num_stages} | ({"maxnreg": maxnreg} if maxnreg else {})
    options = make_backend(target).parse_options(launch)
    aligned = [a for a, t in full.items() if t.startswith("*") or a in divisible]
    attrs = {(kernel.arg_names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    return triton.compile(ASTSource(fn=kernel, signature=full, constexprs=dict(constexprs), attrs=attrs),
                          target=target, options=options.__dict__)


def _compile_spec(spec: dict) -> dict:
    kernel = getattr(import_module(spec["module"]), spec["kernel"])
    compiled = compile_sm90(kernel, spec["signature"], spec.get("constexprs", {}),
                            spec.get("num_warps", 4), spec.get("num_stages", 3),
                            divisible=tuple(spec.get("divisible", ())), maxnreg=spec.get("maxnreg"))
    return {"kernel": spec["kernel"], "shared": int(compiled.metadata.shared),
            "num_warps": spec.get("num_warps", 4), "num_stages": spec.get("num_stages", 3)}


def shared_bytes(specs: list[dict], timeout_s: float = 600) -> list[dict]:
    """Compile each spec for sm_90 in a child process without TRITON_INTERPRET; one result per spec."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "validate.common.sm90"], input=json.dumps(specs), env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"sm_90 compile failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps([_compile_spec(spec) for spec in json.load(sys.stdin)]))
