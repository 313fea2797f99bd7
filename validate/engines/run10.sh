#!/bin/bash
# Run 10 on one H200 (session 17; cases-run10.json, prediction h200-vllm-run10-predicted.json committed before it):
# run 8's served pair again on another machine (serve_spec.sh: Llama-3.1-8B drafted by Llama-3.2-3B, K = 3, closed
# loop at concurrency 16), and the host probe three times in separate processes (the machine's per-process spread).
# Usage: run10.sh RESDIR  (detached: setsid nohup bash validate/engines/run10.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R/serve $HOME/models $HOME/bin
echo "start $(date -u +%T) pid $$" > $R/stages.log
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
{
echo "== env $(date -u +%FT%TZ) sha $(cat $ROOT/.sha 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"
for i in 1 2 3; do echo "host probe: $(python3 $HERE/host_probe.py)"; done; lscpu | grep -E "Model name|^CPU\(s\)"
} > $R/env.log 2>&1
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Llama-3.1-8B Llama-3.2-3B) > $R/models.log 2>&1
echo "V $(date -u +%T)" >> $R/stages.log
ROOFLINE_ENGINE_CASES=cases-run10.json setsid timeout 500 bash $HERE/serve_spec.sh $HOME/models/Llama-3.1-8B \
  Llama-3.1-8B $R/serve > $R/serve/serve-driver.log 2>&1
for i in 1 2 3; do echo "host probe after: $(python3 $HERE/host_probe.py)" >> $R/env.log; done
echo "RUN10_DONE $(date -u +%T)" >> $R/stages.log
