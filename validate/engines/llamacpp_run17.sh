#!/bin/bash
# llama.cpp run 17 on one H200: session 34's llama.cpp shortfalls, each by its own microbenchmark (llamacpp_ops17.py
# says which and why; the prediction `python -m validate.engines.llamacpp_ops17 predict` committed before the run).
# Payloads in ~/stash: .payload/l0/llamacpp-src.tar.xz (llamacpp_pack.sh) and .payload/l1/llamacpp-ops.tar.xz
# (llamacpp_pack_ops.sh).
#   bash llamacpp_run17.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run17.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages: U unpack (~10); B test-backend-ops and llama-batched-bench -j 16 (<=420; the F16 8B beside it); O
#   test-backend-ops perf on llamacpp_ops17's test file (<= 200); H-V llama-batched-bench -kvu probes of run 15's B 32
#   stall (each alone in a fresh process under its own timeout; nvidia-smi and the process's CPU ticks every second in
#   hang-V.mon; at the timeout each thread's state, CPU ticks and wait channel in hang-V.tasks, gdb's backtraces in
#   hang-V.gdb where gdb is installed).
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run15.json
T_START=$(date +%s)
llamacpp_unpack ops
llamacpp_build_model 420 16 ON "test-backend-ops llama-batched-bench" test-backend-ops llama-batched-bench
llamacpp_ops 760 200 llamacpp_ops17

hang() {  # hang NAME SECONDS ARGS..: llama-batched-bench ARGS.. under a watch, killed after SECONDS
  local name=$1 limit=$2 p t0 t; shift 2
  stage H-$name
  $BIN/llama-batched-bench -m $MODEL -ngl $NGL -b 2048 -ub 512 "$@" > $R/hang-$name.log 2>&1 &
  p=$!; t0=$(date +%s)
  while kill -0 $p 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt $limit ]; do
    echo "$(( $(date +%s) - t0 )) $(nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw,clocks.sm \
      --format=csv,noheader) ticks $(awk '{print $14, $15}' /proc/$p/stat 2>/dev/null)" >> $R/hang-$name.mon
    sleep 1
  done
  if kill -0 $p 2>/dev/null; then
    for t in /proc/$p/task/*; do
      echo "$(basename $t) $(cat $t/comm) $(awk '{print $3, $14, $15}' $t/stat) $(cat $t/wchan)"
    done > $R/hang-$name.tasks 2>&1
    command -v gdb > /dev/null && timeout 30 gdb -p $p -batch -ex "thread apply all bt 12" > $R/hang-$name.gdb 2>&1
    kill -KILL $p; wait $p 2>/dev/null
    echo "killed after ${limit} s" >> $R/hang-$name.log
  fi
}
hang kvu32 45 -c 65536 -npp 1024 -ntg 32 -npl 32 -kvu
hang kvu32-pp512 30 -c 65536 -npp 512 -ntg 32 -npl 32 -kvu
hang kvu24 30 -c 65536 -npp 1024 -ntg 32 -npl 24 -kvu
hang kvu32-faoff 40 -c 65536 -npp 1024 -ntg 32 -npl 32 -kvu -fa off
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
