#!/bin/bash
# Run 17 on two H200s of one host (session 22; cases-run17.json, prediction h200x2-vllm-run17-predicted.json committed
# before it): where a disaggregated request's decode leg goes at low rates (validate/notes/2026-11-30-disagg-decode-
# leg.md), in priority order:
#   X: serve_pd.sh at 512 in / 256 out, rates 4 / 8 / 24, the pair's handshake first (PD_WARMUP=4), stats lines every
#      2 s, both servers' /metrics before and after each rate, the decode server's response headers per request.
#   K: serve_tiny.sh on GPU 0: the API server's own per-request cost (tiny-conc1.json's TTFT) on this host, against
#      the profile's (the 2026-11-28 host's 16.6 ms).
# The host probe (host_probe.py) before and after. Usage: run17.sh RESDIR
#   (detached: setsid nohup bash validate/engines/run17.sh RES > /dev/null 2>&1 &)
set -u
R=$1
source "$(dirname "$0")/x2_env.sh"
export ROOFLINE_ENGINE_CASES=cases-run17.json
env_log $R/env.log
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Llama-3.1-8B tiny-llama) \
  > $R/models.log 2>&1
echo "X $(date -u +%T)" >> $R/stages.log
PD_WARMUP=4 PD_LOG_INTERVAL=2 setsid timeout 540 bash $HERE/serve_pd.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R \
  > $R/driver-X.log 2>&1
echo "K $(date -u +%T)" >> $R/stages.log
CUDA_VISIBLE_DEVICES=0 setsid timeout 300 bash $HERE/serve_tiny.sh $HOME/models/tiny-llama $R > $R/driver-K.log 2>&1
echo "host probe after: $(python3 $HERE/host_probe.py)" >> $R/env.log
echo "RUN17_DONE $(date -u +%T)" >> $R/stages.log
