#!/bin/bash
# Run 12 on two H200s of one host (session 19; cases-run12.json, prediction h200x2-vllm-run12-predicted.json committed
# before it):
#   L: link_probe.py (the peer copy and NCCL all-reduce by themselves).
#   T: lat.py at tp 2 on Llama-3.1-8B and Llama-3.3-70B (run.sh; the engine's custom all-reduce, symmetric-memory
#      all-reduce off: it needs NVLink multicast, which this machine keeps off).
#   X: serve_pd.sh: disaggregated prefill (GPU 0) / decode (GPU 1) through the NixlConnector, run 2's served shape.
# Usage: run12.sh RESDIR  (detached: setsid nohup bash validate/engines/run12.sh RES > /dev/null 2>&1 &)
set -u
R=$1
source "$(dirname "$0")/x2_env.sh"
export ROOFLINE_ENGINE_CASES=cases-run12.json
env_log $R/env.log
echo "L $(date -u +%T)" >> $R/stages.log
timeout 150 python3 $HERE/link_probe.py $R/link_probe.json > $R/link_probe.log 2>&1
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Llama-3.1-8B Llama-3.3-70B) > $R/models.log 2>&1
echo "T $(date -u +%T)" >> $R/stages.log
SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 bash $HERE/run.sh $R Llama-3.1-8B Llama-3.3-70B > $R/driver-T.log 2>&1
echo "X $(date -u +%T)" >> $R/stages.log
setsid timeout 600 bash $HERE/serve_pd.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R > $R/driver-X.log 2>&1
echo "RUN12_DONE $(date -u +%T)" >> $R/stages.log
