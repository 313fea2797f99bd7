#!/bin/bash
# llama.cpp run 1 on one H200: the detached driver (detach.sh). Before it, one device call copies the source payload
# (.payload/l0: llamacpp-src.tar.xz, llama.cpp 0c1e570 as vendored by llama-cpp-python 0.3.36) into ~/stash.
#   bash llamacpp_run.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log; budgets in seconds; the cases in llamacpp_cases.json):
#   U   unpack the payload (sha256 in llamacpp_payload.sha256) into ~/lcpp/llama.cpp                        ~10
#   B   CUDA build, sm_90a only, targets llama-server llama-bench llama-batched-bench (build.log, build_s)   <=840
#   G   (beside B) the model: Llama-3.1-8B, dummy F16 weights, the tree's Llama-3 vocab (llamacpp_model.py)  <=600
#   M   llama-server start-up at each (-c, -np) of "memory": its log mem-cC-npN.log (KV, compute buffers)   <=4x120
#   D   llama-batched-bench at "batched" (batched.log)                                                       <=300
#   P   llama-bench: prefill at "prefill" (-n 0), decode of tg.n tokens at depths tg.depth (bench-*.json)    <=300
#   S   llama-server -c serve.c -np serve.np, llamacpp_client.py per run of serve.runs (serve-RUN.json)     <=420
# LLAMACPP_BIN (a built bin/ folder: no U, B), LLAMACPP_MODEL (a GGUF: no G), LLAMACPP_CASES (another cases file of
# this folder), LLAMACPP_NGL (default 999) run the same stages elsewhere: the CPU check before the run (README).
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases.json
llamacpp_unpack
llamacpp_build_model 840 "" OFF "llama-server llama-bench llama-batched-bench" llama-server

# server N C NP LOG: llama-server on $MODEL in its own session, every layer on the GPU; waits up to N x 2 s. -lv 4:
# libllama's own INFO lines (buffers, cells) are verbosity 4 to the server's log (common/log.cpp common_log_get_verbosity)
server() {
  setsid $BIN/llama-server -m $MODEL -c "$2" -np "$3" -ngl $NGL --host 127.0.0.1 --port $PORT --seed 0 --metrics -lv 4 \
    > "$4" 2>&1 &
  SPID=$!
  wait_healthy $SPID "$4" $PORT "$1"
}

stage M
for cn in $(C "' '.join(f'{c}:{n}' for c, n in c['memory'])"); do
  IFS=: read -r c n <<< "$cn"
  server 60 $c $n $R/mem-c$c-np$n.log; stop
  grep -E "model buffer size|KV buffer size|llama_kv_cache: size|compute buffer size|n_ctx_seq|n_seq_max" \
    $R/mem-c$c-np$n.log | head -12
done

stage D
timeout 300 $BIN/llama-batched-bench -m $MODEL -ngl $NGL -c $(C "c['batched']['c']") -b 2048 -ub 512 \
  -npp $(C "','.join(map(str, c['batched']['npp']))") -ntg $(C "c['batched']['ntg']") \
  -npl $(C "','.join(map(str, c['batched']['npl']))") > $R/batched.log 2>&1
grep "^|" $R/batched.log

stage P
timeout 180 $BIN/llama-bench -m $MODEL -ngl $NGL -p $(C "','.join(map(str, c['prefill']))") -n 0 -r 3 -o json \
  > $R/bench-pp.json 2> $R/bench-pp.log
timeout 120 $BIN/llama-bench -m $MODEL -ngl $NGL -p 0 -n $(C "c['tg']['n']") \
  -d $(C "','.join(map(str, c['tg']['depth']))") -r 3 -o json > $R/bench-tg.json 2> $R/bench-tg.log
grep -o '"avg_ts": [0-9.]*' $R/bench-pp.json $R/bench-tg.json

stage S
server 60 $(C "c['serve']['c']") $(C "c['serve']['np']") $R/serve.log
llamacpp_serve_runs
stop
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
