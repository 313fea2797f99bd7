#!/bin/bash
# Run 24 on one H200 (session 28): the API server's part of a TTFT while it streams other requests' tokens, on the
# tiny model (GPU work negligible). Run 23's /metrics split a served TTFT into the engine's queue and prefill and the
# API path (the API server's TTFT less both): 3-6 ms alone, 16 ms while it streamed 368 tokens a second, 20-27 ms at
# 722-772; the model charges a constant (api_request_s / S). This measures that growth apart from any served run.
#   K1: serve_tiny.sh (tiny-llama, concurrency 1): the host's speed.
#   A:  tiny-llama on `vllm serve` (max_model_len 16384); for N in 0 4 16 64: N background streams (64-token prompts,
#       12,000 outputs, --ignore-eos, all sent at once: none starts or ends during the probe), then after 6 s the probe
#       (20 prompts of 1,500 tokens, 4 outputs, concurrency 1), /metrics before and after the probe (stamped: its TTFT,
#       queue and prefill histograms' deltas are the probe's alone; generation_tokens_total's delta over the window is
#       the streamed tokens a second), then the background stopped.
# After unpack_payload.sh: bash run24.sh RESDIR (detached), then bash run24.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models tiny-llama) > $R/models.log 2>&1
stage K1
CONCS="1" timeout 450 bash $HERE/serve_tiny.sh $HOME/models/tiny-llama $R > $R/driver-K1.log 2>&1
M=$HOME/models/tiny-llama
PORT=8000
metrics() { date +%s.%N > $R/$1-metrics.txt; python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics',timeout=5).read().decode())" \
  2>/dev/null | grep '^vllm:' >> $R/$1-metrics.txt; }
bench() {  # bench NAME SEED LEN OUT N CONC: N prompts of LEN tokens, OUT outputs, at most CONC at once, all sent at once
  timeout 120 vllm bench serve --backend vllm --model $M --port $PORT --dataset-name random --random-input-len $3 \
    --random-range-ratio 0 --random-output-len $4 --ignore-eos --request-rate inf --max-concurrency $6 \
    --num-prompts $5 --seed $2 --ready-check-timeout-sec 0 --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --save-result --result-dir $R --result-filename $1.json > $R/$1-bench.log 2>&1
}
stage A
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 16384 --port $PORT --seed 0 \
  > $R/server.log 2>&1 &
SPID=$!; T0=$(date +%s)
wait_healthy $SPID $R/server.log $PORT 200
echo "server up after $(( $(date +%s) - T0 )) s"
bench warm 600 1500 4 8 1
for N in 0 4 16 64; do
  stage A$N
  BG=0
  if [ $N -gt 0 ]; then setsid bash -c "$(declare -f bench); M=$M PORT=$PORT R=$R bench bg$N $((700 + N)) 64 12000 $N $N" & BG=$!; sleep 6; fi
  metrics a$N-before
  bench p$N $((800 + N)) 1500 4 20 1
  metrics a$N-after
  [ $BG -gt 0 ] && { kill -TERM -$BG 2>/dev/null; sleep 3; kill -KILL -$BG 2>/dev/null; }
  echo "N $N: $(grep -E 'Median TTFT' $R/p$N-bench.log | tr -s ' ')"
done
kill -TERM -$SPID; sleep 4; kill -KILL -$SPID 2>/dev/null
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
