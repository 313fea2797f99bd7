#!/bin/bash
# Run 16 on one H200 (session 21; prediction validate/results/engines/h200-profile-mem-run16-predicted.json committed
# before it): profile_mem.py's run-16 set, the CUDA-graph estimate's first capture on vLLM's V1 runner by depth,
# width and vocabulary, and the non-torch increase at tp 1 (validate/engines/profile_mem.py's docstring).
# Usage: run16.sh RESDIR  (detached: setsid nohup bash validate/engines/run16.sh RES > /dev/null 2>&1 &)
set -u
R=$1
source "$(dirname "$0")/x2_env.sh"
env_log $R/env.log
echo "M $(date -u +%T)" >> $R/stages.log
timeout 1500 python3 $HERE/profile_mem.py $R/profile_mem_run16.json --set ${SET:-run16} > $R/profile_mem_run16.log 2>&1
echo "RUN16_DONE $(date -u +%T)" >> $R/stages.log
