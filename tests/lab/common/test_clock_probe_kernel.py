"""validate.common.clocks' probe kernel compiles for sm_90 (on the CPU) and reads both timers around its spin."""

import os
import subprocess
import sys

import pytest

from validate.common.sm90 import ROOT

SCRIPT = """
from validate.common import clocks
from validate.common.sm90 import compile_sm90
ptx = compile_sm90(clocks._probe_kernel(), {"out_ptr": "*i64", "spin": "i64"}, {}, 1, 1).asm["ptx"]
lines = [l.strip() for l in ptx.splitlines()]
reads = [l for l in lines if "%clock64" in l or "%globaltimer" in l]
print(len([l for l in reads if "%globaltimer" in l]), len([l for l in reads if "%clock64" in l]),
      sum(1 for l in lines if l.startswith("@") and "bra" in l))
"""


def test_probe_kernel_reads_globaltimer_twice_and_clock64_in_its_loop() -> None:
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    timers, clocks64, branches = map(int, out.stdout.split())
    # %globaltimer at the start and the end; %clock64 before the loop and inside it; a conditional back-branch
    assert timers == 2 and clocks64 >= 2 and branches >= 1
