#!/bin/bash
# All-at-once bursts on the lent H200 (vLLM 0.24, dummy weights) that settle the open mechanisms of
# validate/notes/2026-11-28-public-misses.md: 1000 random 1024/128 requests sent at once (--request-rate inf)
# (1) against the A100's default limits (256 sequences, 2048 tokens a step), (2) against the H200's defaults,
# (3) against the defaults with synchronous scheduling (vLLM 0.10 / 0.11's default). serve.sh's conventions.
# Usage: public_burst.sh MODEL_DIR NAME RESDIR
M=$1; N=$2; R=$3
PORT=8000
run() {  # run TAG SERVER_FLAGS...
  TAG=$1; shift
  setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 4096 --port $PORT --seed 0 "$@" \
    > $R/$N-$TAG-server.log 2>&1 &
  SPID=$!
  for i in $(seq 1 150); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health',timeout=2)" 2>/dev/null && break
    kill -0 $SPID 2>/dev/null || { echo "$TAG: server died"; tail -30 $R/$N-$TAG-server.log; return 1; }
    sleep 2
  done
  timeout 300 vllm bench serve --backend vllm --model $M --port $PORT --dataset-name random --random-input-len 1024 \
    --random-output-len 128 --ignore-eos --num-prompts 1000 --request-rate inf --seed 7 \
    --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --save-result --result-dir $R \
    --result-filename $N-burst-$TAG.json > $R/$N-burst-$TAG.log 2>&1
  echo "$TAG: $(grep -E 'Output token throughput|Mean TPOT|Median TPOT' $R/$N-burst-$TAG.log | tr -s ' ' | tr '\n' ' ')"
  kill -- -$SPID 2>/dev/null; wait $SPID 2>/dev/null; sleep 5
}
run a100defaults --max-num-seqs 256 --max-num-batched-tokens 2048
run default
run sync --no-async-scheduling
