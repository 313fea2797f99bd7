#!/bin/bash
# llama.cpp run 3 on one H200: why the served step at -np 8 (15.0 ms, run 2) is twice batched-bench's (7.8 ms), and
# run 2's stage O, which its build budget left unrun. The detached driver (detach.sh), one device call from a fresh
# machine; payloads as run 2's (.payload/l0 llamacpp-src.tar.xz, .payload/l1 llamacpp-ops.tar.xz, in ~/stash).
#   bash llamacpp_run3.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run3.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log; budgets in seconds; the cases in llamacpp_cases_run3.json):
#   U  unpack both payloads (sha256 checked) into ~/lcpp/llama.cpp; tests/CMakeLists.txt of one target         ~10
#   B  CUDA build of llama-server, llama-batched-bench, test-backend-ops only, -j 16 (build.log, build_s)     <=420
#   G  (beside B) the model, as run 1's                                                                       -
#   K  per serve.runs: llama-server -np N FLAGS, N closed-loop clients, rounds x N requests (client FLAGS)
#      (serve-k-NAME.json, serve-k-NAME.log); then per batched.runs llama-batched-bench -lv 4 FLAGS
#      (batched-NAME.log)                                                                                     ~90
#   O  test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} --test-file ops-cases.txt (llamacpp_mech.py
#      testfile, run 2's cases in run 2's order): ops.txt                                what is left of 555 s
# LLAMACPP_BIN (a built bin/ with the three binaries: no U, B), LLAMACPP_MODEL (a GGUF: no G), LLAMACPP_NGL,
# LLAMACPP_OPS_BACKEND and LLAMACPP_CASES run the same stages on the CPU machine (the check, README).
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run3.json
T_START=$(date +%s)  # the call's 570 s: O gets what is left of 555 (at least 15 s), the rest is --wait's tar
llamacpp_unpack ops
# test-backend-ops first on ninja's command line: its one large object starts among the first jobs
llamacpp_build_model 420 16 ON "test-backend-ops llama-server llama-batched-bench" llama-server llama-batched-bench

server() {  # server N NP LOG FLAGS..: llama-server in its own session, every layer on the GPU; waits up to N x 2 s
  local tries=$1 np=$2 log=$3; shift 3
  setsid $BIN/llama-server -m $MODEL -c $(C "c['serve']['c']") -np "$np" -ngl $NGL --host 127.0.0.1 --port $PORT \
    --seed 0 --metrics "$@" > "$log" 2>&1 &
  SPID=$!
  wait_healthy $SPID "$log" $PORT "$tries"
}

stage K
for spec in $(C "' '.join(f'{n}:{p}:{f}:{g}'.replace(' ', '+') for n, p, f, g in c['serve']['runs'])"); do
  IFS=: read -r name np flags cflags <<< "$spec"
  stage "K-$name"
  server 45 $np $R/serve-k-$name.log ${flags//+/ } || continue
  timeout 40 python3 $HERE/llamacpp_client.py $PORT $R/serve-k-$name.json --prompt $(C "c['serve']['prompt']") \
    --output $(C "c['serve']['output']") --requests $(( np * $(C "c['serve']['rounds']") )) \
    --seed $(C "c['serve']['seed']") --concurrency $np ${cflags//+/ }
  stop
done
for spec in $(C "' '.join(f'{n}:{f}' for n, f in c['batched']['runs'])"); do
  IFS=: read -r name flags <<< "$spec"
  stage "K-batched-$name"
  timeout 45 $BIN/llama-batched-bench -m $MODEL -ngl $NGL -c $(C "c['batched']['c']") -b 2048 -ub 512 -lv 4 $flags \
    -npp $(C "c['batched']['npp']") -ntg $(C "c['batched']['ntg']") -npl $(C "','.join(map(str, c['batched']['npl']))") \
    > $R/batched-$name.log 2>&1
  grep "^|" $R/batched-$name.log
done

llamacpp_ops 555 15
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
