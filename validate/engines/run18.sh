#!/bin/bash
# Run 18 on one H200 (session 25): vLLM's prefix cache when the pool binds. Llama-3.1-8B (dummy weights) served with
# --kv-cache-memory-bytes 8 GiB (4,096 blocks of 16 tokens: 65,536 tokens), Mooncake traces of a retrieval workload
# (prefix_trace.py; files in traces-run18/, committed with the prediction h200-vllm-run18-predicted.json) replayed by
# `vllm bench serve --dataset-name timed_trace` at their own timestamps:
#   A trace a (3 req/s, 480 requests), B trace b (6 req/s, 600), C trace c (10 req/s, 600), prefix caching on (default)
#   O trace a again on a server started with --no-enable-prefix-caching
# /metrics before and after each run (prompt_tokens, prompt_tokens_cached, prefix_cache_queries / hits, preemptions).
#   J first (jit_probe.py): vLLM's fused-MoE Triton kernel's first calls at new specialisations in a fresh Triton
#     cache (the JIT compile SGLang run 3 stalled on), then a second process on the warm cache
# After unpack_payload.sh: bash run18.sh RESDIR (detached), then bash run18.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Llama-3.1-8B) > $R/models.log 2>&1
M=$HOME/models/Llama-3.1-8B
T=$HERE/traces-run18
PORT=8000
metrics() {  # metrics FILE: the counters a run is read by
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics',timeout=5).read().decode())" \
    | grep -E "^vllm:(prefix_cache|prompt_tokens|num_preemptions|generation_tokens|request_success|kv_cache_usage|cache_config_info)" > "$1"
}
server() {  # server TAG EXTRA...: start vllm serve, wait for /health
  local tag=$1; shift
  setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 8192 \
    --kv-cache-memory-bytes 8589934592 --port $PORT --seed 0 "$@" > $R/$tag-server.log 2>&1 &
  SPID=$!; local t0=$(date +%s)
  wait_healthy $SPID $R/$tag-server.log $PORT 200 || return 1
  echo "server $tag up after $(( $(date +%s) - t0 )) s"
}
stop() { kill -TERM -$SPID; sleep 6; kill -KILL -$SPID 2>/dev/null; wait $SPID 2>/dev/null; }
bench() {  # bench RUN TRACE N
  metrics $R/$1-metrics-before.txt
  timeout 400 vllm bench serve --backend vllm --model $M --port $PORT --dataset-name timed_trace \
    --dataset-path $T/$2.jsonl --timed-trace-chunk-hash-size 512 --timed-trace-sec-multiplier 0.001 \
    --num-prompts $3 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
    --save-result --save-detailed --result-dir $R --result-filename $1.json > $R/$1-bench.log 2>&1
  echo "$1 rc $?: $(grep -E 'Output token throughput|Median TTFT|Median TPOT' $R/$1-bench.log | tr -s ' ' | tr '\n' ' ')"
  metrics $R/$1-metrics.txt
}
stage J
(cd $HERE && timeout 240 python3 jit_probe.py $R/jit-cold.json > $R/jit.log 2>&1
 D=$(grep JIT_PROBE_DONE $R/jit.log | awk '{print $2}')
 [ -n "$D" ] && TRITON_CACHE_DIR=$D timeout 120 python3 jit_probe.py $R/jit-warm.json --warm >> $R/jit.log 2>&1)
tail -3 $R/jit.log
stage S
server on && { bench a a 480; bench b b 600; bench c c 600; }
stop
stage O
server off --no-enable-prefix-caching && bench off-a a 480
stop
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
