#!/bin/bash
# Run 13 on two H200s of one host (session 19; cases-run13.json, prediction h200x2-vllm-run13-predicted.json committed
# before it): A: ar_probe.py (vLLM's custom all-reduce and NCCL's in CUDA graphs); X: serve_pd.sh at 2,048 in / 128
# out, rates 2 / 8 / 12.
# Usage: run13.sh RESDIR  (detached: setsid nohup bash validate/engines/run13.sh RES > /dev/null 2>&1 &)
set -u
R=$1
source "$(dirname "$0")/x2_env.sh"
export ROOFLINE_ENGINE_CASES=cases-run13.json
env_log $R/env.log
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Llama-3.1-8B) > $R/models.log 2>&1
echo "X $(date -u +%T)" >> $R/stages.log
setsid timeout 480 bash $HERE/serve_pd.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R > $R/driver-X.log 2>&1
echo "A $(date -u +%T)" >> $R/stages.log
timeout 200 python3 $HERE/ar_probe.py $R/ar_probe.json > $R/ar_probe.log 2>&1
echo "RUN13_DONE $(date -u +%T)" >> $R/stages.log
