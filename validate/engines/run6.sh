#!/bin/bash
# Run 6 on one H200 (validate/notes/2026-11-29-vllm-h200-run6.md): a draft model's host work, multiprocess.
#   S: spec_step.py with SPEC_MP=1 (the engine in its own process, as served; wall only) on the 2-layer tiny target:
#      no draft (K = 0), the 2-layer tiny draft at K = 1 and 3, the 32-layer narrow draft (tiny-llama-32) at K = 3
#      (the host law's inputs: fixed, per pass, per layer), then Llama-3.2-1B at K = 3 (the composition with real
#      draft GPU work: a check, not an input); B = 1, 16, 32.
#   V: serve_spec.sh: Llama-3.1-8B drafted by Llama-3.2-1B (K = 3) served, closed loop at concurrency 1 and 16
#      (cases-run6.json): the judged cases, on the machine the law was measured on.
# Usage: run6.sh RESDIR  (detached: setsid nohup bash validate/engines/run6.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $HOME/models $R/spec $R/serve
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
{
echo "== env $(date -u +%FT%TZ) $(cd $ROOT && git rev-parse HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"
lscpu | grep -E "Model name|^CPU\(s\)"
} > $R/env.log 2>&1
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models tiny-llama tiny-llama-32 Llama-3.1-8B \
  Llama-3.2-1B) > $R/models.log 2>&1
echo "S $(date -u +%T)" > $R/stages.log
SPEC_MP=1 SPEC_BS=1,16,32 SPEC_CASE_TIMEOUT=170 setsid timeout 480 python3 $HERE/spec_step.py $HOME/models \
  $R/spec/spec_step_mp.json tiny-llama:-:0,tiny-llama:tiny-llama:1,tiny-llama:tiny-llama:3,tiny-llama:tiny-llama-32:3,tiny-llama:Llama-3.2-1B:3 \
  > $R/spec/spec_step_mp.log 2>&1
echo "V $(date -u +%T)" >> $R/stages.log
ROOFLINE_ENGINE_CASES=cases-run6.json setsid timeout 420 bash $HERE/serve_spec.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B \
  $R/serve > $R/serve/serve-driver.log 2>&1
echo "RUN6_DONE $(date -u +%T)" >> $R/stages.log
