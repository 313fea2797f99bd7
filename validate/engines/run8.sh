#!/bin/bash
# Run 8 on one H200 (prepared in session 15; validate/notes/2026-11-29-vllm-h200-run6.md): a third draft depth.
#   S: spec_step.py multiprocess (SPEC_MP=1) on the 2-layer tiny target: no draft, and the 2-, 16- and 28-layer drafts
#      (tiny-llama, Llama-3.2-1B, Llama-3.2-3B) at K = 1 and 3, B = 1 and 16, every batch warmed before any is timed.
#   V: serve_spec.sh: Llama-3.1-8B drafted by Llama-3.2-3B (K = 3) at concurrency 16 (cases-run8.json): judged.
# Usage: run8.sh RESDIR  (detached: setsid nohup bash validate/engines/run8.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $HOME/models $R/spec $R/serve
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
{
echo "== env $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"
echo "host probe: $(python3 $HERE/host_probe.py)"; lscpu | grep -E "Model name|^CPU\(s\)"
} > $R/env.log 2>&1
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models tiny-llama Llama-3.1-8B Llama-3.2-1B \
  Llama-3.2-3B) > $R/models.log 2>&1
echo "S $(date -u +%T)" > $R/stages.log
SPEC_MP=1 SPEC_BS=1,16 SPEC_CASE_TIMEOUT=170 setsid timeout 660 python3 $HERE/spec_step.py $HOME/models \
  $R/spec/spec_step_mp.json tiny-llama:-:0,tiny-llama:tiny-llama:1,tiny-llama:tiny-llama:3,tiny-llama:Llama-3.2-3B:1,tiny-llama:Llama-3.2-3B:3,tiny-llama:Llama-3.2-1B:1,tiny-llama:Llama-3.2-1B:3 \
  > $R/spec/spec_step_mp.log 2>&1
echo "V $(date -u +%T)" >> $R/stages.log
ROOFLINE_ENGINE_CASES=cases-run8.json setsid timeout 360 bash $HERE/serve_spec.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B \
  $R/serve > $R/serve/serve-driver.log 2>&1
echo "RUN8_DONE $(date -u +%T)" >> $R/stages.log
