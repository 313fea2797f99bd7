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


def test_the_longest_request_names_the_models_positions_when_memory_allows_more(capsys):
    """Llama-3.1-8B has 131,072 positions (its config.json's max_position_embeddings): on an H100 the pool holds a
    longer sequence, which the text must not offer as a request length; on an L4 the pool is the limit."""
    from roofline.cli import main
    assert main(["capacity", "--model", "Llama-3.1-8B", "--engine", "vllm"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("longest request"))
    assert "the model's 131,072 positions cap a request" in line
    assert main(["capacity", "--model", "Llama-3.1-8B", "--engine", "vllm", "--hardware", "L4"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("longest request"))
    assert "positions" not in line and int(line.split()[-1].replace(",", "")) < 131_072


def test_no_room_without_a_fraction_does_not_call_the_whole_gpu_the_engines_share(capsys):
    """SGLang's share of an L4 is total x mem_fraction_static (its default by GPU memory, in the rules), not the
    GPU's memory (22.05 GiB as CUDA reports it, vllm-project/vllm#20214): the message must not state the whole GPU
    as the share when no fraction was given."""
    from roofline.cli import main
    assert main(["capacity", "--model", "Llama-3.1-70B", "--engine", "sglang", "--hardware", "L4"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "do not fit" in x)
    assert "default share of the GPU's 22.05 GiB" in line and "share of 22.05 GiB by" not in line
