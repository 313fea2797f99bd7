#!/bin/bash
# Run 11 on one H200 (session 18; cases-run11.json, prediction h200-vllm-run11-predicted.json and
# h200-vllm-run11-spec-predicted.json committed before it):
#   P: core_probe.py, three sweeps: is the host's 1.6-1.9x spread between processes where a process lands or when.
#   M: lat.py on Qwen3-30B-A3B (run 9's judged cases, three timed reps a case) and tiny-qwen3moe-48.
#   D: spec_step.py multiprocess (SPEC_MP=1, as served) on the tiny target: drafts of 2 / 16 / 32 layers at width
#      256 (tiny-llama, -16, -32) and Llama-3.2-1B / -3B (16 / 28 layers at 2,048 / 3,072) at K = 3, the 2-layer one
#      at K = 1 too (the fixed term apart from the pass), B = 1 and 16, in two rounds, the second in the reverse order (the host's drift cancels in the medians); each case
#      carries its process's host probe before and after.
# Usage: run11.sh RESDIR  (detached: setsid nohup bash validate/engines/run11.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $R/spec $HOME/models $HOME/bin
echo "start $(date -u +%T) pid $$" > $R/stages.log
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export ROOFLINE_ENGINE_CASES=cases-run11.json
{
echo "== env $(date -u +%FT%TZ) sha $(cat $ROOT/.sha 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"
lscpu | grep -E "Model name|^CPU\(s\)|MHz|NUMA"
} > $R/env.log 2>&1
echo "P $(date -u +%T)" >> $R/stages.log
python3 $HERE/core_probe.py 3 > $R/core_probe.json 2> $R/core_probe.err
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Qwen3-30B-A3B tiny-qwen3moe-48 \
  tiny-llama tiny-llama-16 tiny-llama-32 Llama-3.2-1B Llama-3.2-3B) > $R/models.log 2>&1
echo "M $(date -u +%T)" >> $R/stages.log
SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 bash $HERE/run.sh $R Qwen3-30B-A3B tiny-qwen3moe-48 > $R/driver-M.log 2>&1
echo "D $(date -u +%T)" >> $R/stages.log
T=tiny-llama
R1="$T:-:0,$T:$T:1,$T:$T:3,$T:tiny-llama-16:3,$T:tiny-llama-32:3,$T:Llama-3.2-1B:3,$T:Llama-3.2-3B:3"
R2="$T:Llama-3.2-3B:3,$T:Llama-3.2-1B:3,$T:tiny-llama-32:3,$T:tiny-llama-16:3,$T:$T:3,$T:-:0"
SPEC_MP=1 SPEC_BS=1,16 SPEC_CASE_TIMEOUT=150 setsid timeout 900 python3 $HERE/spec_step.py $HOME/models \
  $R/spec/spec_step_mp.json "$R1,$R2" > $R/spec/spec_step_mp.log 2>&1
python3 $HERE/core_probe.py 1 > $R/core_probe_after.json 2>&1
echo "RUN11_DONE $(date -u +%T)" >> $R/stages.log
