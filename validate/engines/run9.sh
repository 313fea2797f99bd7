#!/bin/bash
# Run 9 on one H200 (session 17; cases-run9.json, prediction h200-vllm-run9-predicted.json committed before it):
#   M: lat.py on Qwen3-30B-A3B (run 3's judged cases, each warmed at its own timed shape; prefills 256-4,096) and on
#      tiny-qwen3moe-48 (the eager-step law's narrow input) on the same machine; uniform routing (run.sh).
#   C: serve.sh with SAMPLE_CLOCKS=1: Llama-3.1-8B served at Poisson rate 4 and 24 and a closed loop of 64, the GPU's
#      SM clock and power every 50 ms beside them.
#   S: spec_step.py in-process (profiler): Llama-3.1-8B with no draft, Llama-3.2-1B and Llama-3.2-3B at K = 3,
#      B = 1 and 16: step wall, GPU kernel time, the runner's scopes.
# Usage: run9.sh RESDIR  (detached: setsid nohup bash validate/engines/run9.sh RES > /dev/null 2>&1 &)
# The stage file is written first, so a launch can always see that a driver started (run 8's lesson).
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $R/serve $R/spec $HOME/models
echo "start $(date -u +%T) pid $$" > $R/stages.log
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export ROOFLINE_ENGINE_CASES=cases-run9.json
{
echo "== env $(date -u +%FT%TZ) sha $(cd $ROOT && git rev-parse HEAD 2>/dev/null || cat $ROOT/.sha 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"
echo "host probe: $(python3 $HERE/host_probe.py)"; lscpu | grep -E "Model name|^CPU\(s\)|MHz"
} > $R/env.log 2>&1
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Qwen3-30B-A3B tiny-qwen3moe-48 \
  Llama-3.1-8B Llama-3.2-1B Llama-3.2-3B) > $R/models.log 2>&1
echo "M $(date -u +%T)" >> $R/stages.log
SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 bash $HERE/run.sh $R Qwen3-30B-A3B tiny-qwen3moe-48 > $R/driver-M.log 2>&1
echo "C $(date -u +%T)" >> $R/stages.log
SAMPLE_CLOCKS=1 setsid timeout 420 bash $HERE/serve.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R/serve \
  > $R/serve/serve-driver.log 2>&1
echo "S $(date -u +%T)" >> $R/stages.log
SPEC_BS=1,16 SPEC_CASE_TIMEOUT=200 setsid timeout 600 python3 $HERE/spec_step.py $HOME/models $R/spec/spec_step.json \
  Llama-3.1-8B:-:0,Llama-3.1-8B:Llama-3.2-1B:3,Llama-3.1-8B:Llama-3.2-3B:3 > $R/spec/spec_step.log 2>&1
echo "RUN9_DONE $(date -u +%T)" >> $R/stages.log
