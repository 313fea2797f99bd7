#!/bin/bash
# The API server's own costs, on the tiny model (GPU work negligible): TTFT of a short prompt at concurrency 1 is
# the server's per-request path (HTTP, tokenizer, scheduling, one step, detokenize, stream); TPOT is the server-mode
# engine step at that concurrency. Usage: serve_tiny.sh MODEL_DIR RESDIR [TAG]  (TAG names a second calibration of one
# run apart: tinyTAG-conc1.json; CONCS="1 16" runs fewer concurrencies than the default 1 16 64)
M=$1; R=$2; T=${3:-}; PORT=8001
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 4096 --port $PORT --seed 0 \
  > $R/tiny$T-server.log 2>&1 &
SPID=$!; trap "kill -TERM -$SPID 2>/dev/null" EXIT; trap "exit 1" TERM  # the server never outlives its calibration
for i in $(seq 1 200); do  # a fresh cache: run 20 K1 took 200 s to start (warm-up 100 s)
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health',timeout=2)" 2>/dev/null && break
  kill -0 $SPID 2>/dev/null || { echo "tiny server died"; tail -20 $R/tiny$T-server.log; exit 1; }
  sleep 2
done
COMMON="--backend vllm --model $M --port $PORT --dataset-name random --random-input-len 128 --random-output-len 64 --ignore-eos --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --save-result --result-dir $R --request-rate inf"
SEED=500
for C in ${CONCS:-1 16 64}; do
  SEED=$((SEED+1))
  timeout 60 vllm bench serve $COMMON --seed $SEED --num-prompts $((C < 16 ? 40 : 4 * C)) --max-concurrency $C \
    --result-filename tiny$T-conc$C.json > $R/tiny$T-bench-conc$C.log 2>&1
  echo "tiny$T conc $C: $(grep -E 'Median TTFT|Median TPOT' $R/tiny$T-bench-conc$C.log | tr -s ' ' | tr '\n' ' ')"
done
kill -TERM -$SPID; sleep 4; kill -KILL -$SPID 2>/dev/null; wait $SPID 2>/dev/null
echo "TINY_SERVE_DONE"
