"""`roofline capacity`: a flag only one engine reads, given with another, is refused in one line naming it (it was
silently ignored: `--engine sglang --entry-point offline` printed SGLang's pool as if the flag meant something).

Whose flag is whose, from the flags' own help and the engines' rules: --entry-point (vLLM's `vllm serve` vs the LLM
class: their token budgets differ, roofline.engines.scheduling.vllm), --enable-prefix-caching and
--mamba-cache-mode (vLLM's hybrid block rules, roofline/engines/vllm.py), --parallel / --no-kv-unified /
--swa-full (llama.cpp's -np, --kv-unified, --swa-full: roofline/engines/llamacpp.py); llama.cpp's server has no
data-parallel replicas (--dp).
"""

from __future__ import annotations

import pytest

from roofline.cli import main

BASE = ["capacity", "--model", "Llama-3.1-8B", "--hardware", "H200"]


@pytest.mark.parametrize(("flags", "named"), [
    (["--engine", "sglang", "--entry-point", "offline"], "--entry-point"),
    (["--engine", "trtllm", "--enable-prefix-caching"], "--enable-prefix-caching"),
    (["--engine", "llamacpp", "--mamba-cache-mode", "all"], "--mamba-cache-mode"),
    (["--engine", "vllm", "--parallel", "4"], "--parallel"),
    (["--engine", "sglang", "--no-kv-unified"], "--no-kv-unified"),
    (["--engine", "vllm", "--swa-full"], "--swa-full"),
    (["--engine", "llamacpp", "--dp", "2"], "--dp"),
])
def test_another_engines_flag_is_refused(flags, named, capsys):
    assert main([*BASE, *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0]


@pytest.mark.parametrize("flags", [["--engine", "vllm", "--entry-point", "offline"],
                                   ["--engine", "llamacpp", "--parallel", "4"],
                                   ["--engine", "sglang", "--tp", "2", "--dp", "2"]])
def test_the_engines_own_flags_run(flags, capsys):
    assert main([*BASE, *flags]) == 0
