"""vLLM's gpu_memory_utilization when no flag is given: 0.92 from release 0.20 (vllm/config/cache.py of the 0.20.0 ..
0.24.0 sdists on PyPI, `Field(default=0.92, gt=0, le=1)`), 0.90 up to 0.19.1 (the 0.17.1 .. 0.19.1 sdists). Run 20's
server (vLLM 0.24.0 on one H200, `vllm serve Qwen3-30B-A3B --max-model-len 4096`, no --gpu-memory-utilization) logged
"GPU KV cache size: 744,656 tokens" and "Maximum concurrency for 4,096 tokens per request: 181.80x"
(validate/results/engines/nvidia-h200-vllm-2026-11-30-run20/server.log); the planner's 0.90 gave 714,352 and 174.40x
(-4.1 %)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from roofline.engines import default_utilization
from roofline.engines import vllm as vllm_engine
from tests.cli_run import run
from validate import stored

RUN20 = Path("validate/results/engines/nvidia-h200-vllm-2026-11-30-run20")


@pytest.mark.parametrize("release, util", [("0.17.1", 0.90), ("0.19.1", 0.90), ("0.20.0", 0.92), ("0.24.0", 0.92),
                                           (None, 0.92)])
def test_release_default(release, util):
    assert vllm_engine.default_utilization(release) == util


def test_engine_defaults():
    """The engine's own default stands when the workload gives none: SGLang's mem_fraction_static rule by memory
    (sglang#10975: (total - max(512 + 8192 x 1.5 + 256 x 2 + 1024 / 8, 10,240) MiB) / total at 141 GB)."""
    total = 141e9
    assert default_utilization("vllm", total) == 0.92
    assert default_utilization("sglang", total) == round((total - 13_440 * 2**20) / total, 3)
    assert default_utilization("trtllm", total) == 0.9 and default_utilization("ideal", total) == 0.9


def _logged():
    log = stored.read_text(RUN20 / "server.log")
    tokens = int(re.search(r"GPU KV cache size: ([\d,]+) tokens", log)[1].replace(",", ""))
    conc = float(re.search(r"Maximum concurrency for 4,096 tokens per request: ([\d.]+)x", log)[1])
    return tokens, conc


def _json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_run20_log_without_the_flag(capsys):
    """`capacity --engine vllm` with no --utilization is the engine's default: within 0.5 % of run 20's log."""
    tokens, conc = _logged()
    assert (tokens, conc) == (744_656, 181.80)
    out = _json(capsys, "capacity", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--engine", "vllm",
                "--max-model-len", "4096")
    assert abs(out["max_concurrency"] / conc - 1) <= 0.005
    assert abs(out["tokens_at_max_concurrency"] / tokens - 1) <= 0.005


def test_plan_and_simulate_take_the_same_default(capsys):
    """`simulate --engine vllm` sizes its pool as `capacity` does when neither is given a fraction."""
    cap = _json(capsys, "capacity", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--engine", "vllm",
                "--max-model-len", "4096")
    sim = _json(capsys, "simulate", "--model", "Qwen3-30B-A3B", "--hardware", "H200", "--method", "bf16",
                "--engine", "vllm", "--rate", "2", "--requests", "20", "--prompt-tokens", "2048",
                "--output-tokens", "64", "--no-search")
    assert abs(sim["kv_pool"]["capacity_bytes"] / cap["kv_pool_bytes"] - 1) <= 0.01
