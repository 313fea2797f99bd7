#!/bin/bash
# Run 7 on one H200 (validate/notes/2026-11-29-vllm-h200-run6.md, "run 7"): lat.py on cases-run7.json: tiny-llama's
# graphed 256-token prefill, tiny-dsv2-27 (the eager law's narrow DeepSeek) and DeepSeek-V2-Lite's judged cases on one
# machine, then a pure-Python probe of the CPU (host speed beside the host laws).
# Usage: run7.sh RESDIR  (detached: setsid nohup bash validate/engines/run7.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $HOME/models
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
M="tiny-llama tiny-dsv2-27 DeepSeek-V2-Lite"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models $M) > $R/models.log 2>&1
echo "A $(date -u +%T)" > $R/stages.log
SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 ROOFLINE_ENGINE_CASES=cases-run7.json bash $HERE/run.sh $R $M
echo "P $(date -u +%T)" >> $R/stages.log
python3 -c "
import time, json
def work():
    d = {}
    for i in range(200000):
        d[i % 997] = d.get(i % 997, 0) + i
    return [x * 2 for x in range(100000)]
ts = []
for _ in range(7):
    t = time.perf_counter(); work(); ts.append(time.perf_counter() - t)
print(json.dumps({'python_probe_s': sorted(ts)[3]}))" > $R/host-probe.json 2>&1
echo "RUN7_DONE $(date -u +%T)" >> $R/stages.log
