#!/bin/bash
# llama.cpp run 2 on one H200: the mechanisms' own microbenchmarks (run 1's note, "Mechanisms"; llamacpp_mech.py),
# the detached driver (detach.sh), one device call from a fresh machine. Payloads, both copied into ~/stash by the
# same call: .payload/l0/llamacpp-src.tar.xz (llamacpp_pack.sh) and .payload/l1/llamacpp-ops.tar.xz
# (llamacpp_pack_ops.sh: tests/test-backend-ops.cpp of the same tree).
#   bash llamacpp_run2.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run2.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log; budgets in seconds; the cases in llamacpp_cases_run2.json):
#   U  unpack both payloads (sha256 checked) into ~/lcpp/llama.cpp; tests/CMakeLists.txt of one target         ~10
#   B  CUDA build as run 1's plus test-backend-ops (build.log, build_s)                                      <=330
#   G  (beside B) the model, as run 1's                                                                       -
#   S  per -np in serve.np: llama-server -np N; N closed-loop clients, rounds x N requests, default sampler chain
#      then greedy (serve-npN-default.json, serve-npN-greedy.json; serve-npN.log)                       <=3 x 60
#   F  llama-bench -p fa_prefill -n 0 -r 3, -fa on then -fa off (bench-fa-on.json, bench-fa-off.json)       <=2 x 45
#   O  test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} --test-file ops-cases.txt (llamacpp_mech.py testfile): ops.txt      what is left of 540 s
# LLAMACPP_BIN (a built bin/ with the three binaries: no U, B), LLAMACPP_MODEL (a GGUF: no G), LLAMACPP_NGL,
# LLAMACPP_OPS_BACKEND (default CUDA0) and LLAMACPP_CASES run the same stages on the CPU machine (the check, README).
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run2.json
T_START=$(date +%s)  # the call's 560 s: O gets what is left of 540 (at least 20 s)
llamacpp_unpack ops
llamacpp_build_model 330 "" ON "llama-server llama-bench test-backend-ops" llama-server

server() {  # server N NP LOG: llama-server in its own session, every layer on the GPU; waits up to N x 2 s
  setsid $BIN/llama-server -m $MODEL -c $(C "c['serve']['c']") -np "$2" -ngl $NGL --host 127.0.0.1 --port $PORT \
    --seed 0 --metrics > "$3" 2>&1 &
  SPID=$!
  wait_healthy $SPID "$3" $PORT "$1"
}

stage S
for np in $(C "' '.join(map(str, c['serve']['np']))"); do
  server 60 $np $R/serve-np$np.log
  for mode in default greedy; do  # greedy's seed is one more: other prompts, no prompt-cache hit across the pair
    stage "S-np$np-$mode"; g=(); [ $mode = greedy ] && g=(--greedy)
    timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/serve-np$np-$mode.json --prompt $(C "c['serve']['prompt']") \
      --output $(C "c['serve']['output']") --requests $(( np * $(C "c['serve']['rounds']") )) \
      --seed $(( $(C "c['serve']['seed']") + ${#g[@]} )) --concurrency $np "${g[@]}"
  done
  stop
done

stage F
for fa in on off; do
  timeout 45 $BIN/llama-bench -m $MODEL -ngl $NGL -fa $fa -p $(C "','.join(map(str, c['fa_prefill']))") -n 0 -r 3 \
    -o json > $R/bench-fa-$fa.json 2> $R/bench-fa-$fa.log
done
grep -o '"avg_ts": [0-9.]*' $R/bench-fa-*.json

llamacpp_ops 540 20
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
