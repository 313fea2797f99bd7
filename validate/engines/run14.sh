#!/bin/bash
# Run 14 on two H200s of one host (session 20; cases-run14.json, predictions h200x2-vllm-run14-predicted.json and
# public-burst-run14-predicted.json committed before it), in priority order:
#   P: nixl_probe.py, NUM_THREADS=4 ISOLATE=1 (the connector's configuration): the post alone; a pair's first reads.
#   A: ar_probe.py with eager all-reduces (custom vs PyNCCL around vLLM's 8 MiB max_size).
#   X: serve_pd.sh at 512 in / 256 out, rates 8 / 24 / 40.
#   T: lat.py at tp 2 (Llama-3.1-8B prefill sweep, tiny-llama-32) and tp 1 (tiny-llama-32-tp1); Llama-3.3-70B at tp 2
#      with the worker's memory profile (cases' worker_memory_log).
#   B: public_burst.sh on GPU 0 (Llama-3.1-8B, 1000 x 1024/128 at once: A100 limits, defaults, synchronous).
# Usage: run14.sh RESDIR  (detached: setsid nohup bash validate/engines/run14.sh RES > /dev/null 2>&1 &)
set -u
R=$1
source "$(dirname "$0")/x2_env.sh"
export ROOFLINE_ENGINE_CASES=cases-run14.json
env_log $R/env.log
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Llama-3.1-8B Llama-3.3-70B \
  tiny-llama-32 tiny-llama-32-tp1) > $R/models.log 2>&1
echo "P $(date -u +%T)" >> $R/stages.log
ISOLATE=1 NUM_THREADS=4 timeout 150 python3 $HERE/nixl_probe.py $R/nixl_probe_t4.json > $R/nixl_probe_t4.log 2>&1
echo "A $(date -u +%T)" >> $R/stages.log
timeout 200 python3 $HERE/ar_probe.py $R/ar_probe.json > $R/ar_probe.log 2>&1
echo "X $(date -u +%T)" >> $R/stages.log
setsid timeout 480 bash $HERE/serve_pd.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R > $R/driver-X.log 2>&1
echo "T $(date -u +%T)" >> $R/stages.log
mkdir -p $R/T
SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 bash $HERE/run.sh $R/T tiny-llama-32 tiny-llama-32-tp1 Llama-3.1-8B \
  Llama-3.3-70B > $R/driver-T.log 2>&1
echo "B $(date -u +%T)" >> $R/stages.log
CUDA_VISIBLE_DEVICES=0 setsid timeout 560 bash $HERE/public_burst.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R \
  > $R/driver-B.log 2>&1
echo "RUN14_DONE $(date -u +%T)" >> $R/stages.log
