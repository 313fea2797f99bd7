#!/bin/bash
# Run 12: vLLM's disaggregated prefill / decode on one host of two GPUs: a prefill server on GPU 0 and a decode server
# on GPU 1, each `vllm serve` with the NixlConnector (kv_role kv_both; the KV read by the decode side over UCX), behind
# pd_proxy.py; `vllm bench serve` through the proxy at the Poisson rates of the cases file's
# "disagg" entry, then both servers' /metrics (the connector's transfer histograms included).
# Per-rate legs (validate/notes/2026-11-30-disagg-decode-leg.md; validate/engines/pd_legs.py reads them):
#   PD_WARMUP=N       N requests through the proxy before the first rate (mark "pd-warmup"), so the pair's ~2.2 s
#                     first handshake falls outside every rate and its metrics (default 0: as runs 12-14)
#   PD_LOG_INTERVAL=S the servers' stats lines (the decode server's "KV Transfer metrics" windows) every S seconds
#                     (VLLM_LOG_STATS_INTERVAL, default 10 as runs 12-14)
#   both servers' /metrics are also kept before the first rate and after each one ($N-pd-metrics-SIDE-LABEL.txt):
#   a rate's histogram sums are the difference of two of them.
# Usage: serve_pd.sh MODEL_DIR NAME RESDIR   (cases file: $ROOFLINE_ENGINE_CASES)
M=$1; N=$2; R=$3
HERE=$(cd "$(dirname "$0")" && pwd)
S() { python3 -c "import json,sys; c=json.load(open('$HERE/${ROOFLINE_ENGINE_CASES:-cases.json}'))['disagg']; print(eval(sys.argv[1]))" "$1"; }
L=$(S "c['max_model_len']"); U=$(S "c['gpu_memory_utilization']")
IN=$(S "c['input_len']"); OUTL=$(S "c['output_len']")
KVT='{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
export VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 VLLM_LOG_STATS_INTERVAL=${PD_LOG_INTERVAL:-10}
METRICS="^vllm:(nixl|kv_transfer|prefix_cache|num_preemptions|prompt_tokens_total|generation_tokens_total|request_success|time_to_first|request_prefill_time|request_queue_time|request_decode_time|request_inference_time|e2e_request_latency|inter_token_latency)"
scrape() {  # both servers' /metrics to $R/$N-pd-metrics-SIDE$1.txt
  for side in prefill:8100 decode:8200; do
    python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${side#*:}/metrics',timeout=5).read().decode())" \
      | grep -E "$METRICS" > $R/$N-pd-metrics-${side%%:*}$1.txt
  done
}
env | grep -E "^(UCX|NCCL|TORCH_SYMM|NVSHMEM|VLLM_)" | sort > $R/$N-pd-env.txt
CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 setsid vllm serve $M --load-format dummy --dtype bfloat16 \
  --max-model-len $L --gpu-memory-utilization $U --port 8100 --seed 0 --kv-transfer-config "$KVT" \
  > $R/$N-pd-prefill.log 2>&1 &
PP=$!
CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 setsid vllm serve $M --load-format dummy --dtype bfloat16 \
  --max-model-len $L --gpu-memory-utilization $U --port 8200 --seed 0 --kv-transfer-config "$KVT" \
  > $R/$N-pd-decode.log 2>&1 &
DP=$!
setsid python3 $HERE/pd_proxy.py 8000 8100 8200 > $R/$N-pd-proxy.log 2> $R/$N-pd-proxy-requests.jsonl &
XP=$!
stop() { kill -TERM -$PP -$DP -$XP 2>/dev/null; sleep 6; kill -KILL -$PP -$DP -$XP 2>/dev/null; }
T0=$(date +%s)
up() { python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/health',timeout=2)" 2>/dev/null; }
for i in $(seq 1 120); do
  up 8100 && up 8200 && up 8000 && break
  kill -0 $PP 2>/dev/null && kill -0 $DP 2>/dev/null || { echo "pd server died"; tail -20 $R/$N-pd-prefill.log; tail -20 $R/$N-pd-decode.log; stop; exit 1; }
  sleep 2
done
echo "pd servers up after $(( $(date +%s) - T0 )) s"
grep -iE "nixl|ucx|KV cache|concurrency" $R/$N-pd-decode.log | cut -c1-250 | head -12
COMMON="--backend vllm --model $M --port 8000 --dataset-name random --random-input-len $IN --random-output-len $OUTL --ignore-eos --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --save-result --save-detailed --result-dir $R"
SEED=$(S "c['seed0']")
if [ "${PD_WARMUP:-0}" -gt 0 ]; then
  echo "pd-warmup $(date +%s.%N)" >> $R/$N-pd-marks.txt
  timeout 60 vllm bench serve $COMMON --seed 1 --num-prompts $PD_WARMUP --request-rate 1 \
    --result-filename $N-pd-warmup.json > $R/$N-pd-bench-warmup.log 2>&1
  sleep 2
fi
scrape -before
for pair in $(S "' '.join(f'{r}:{n}' for r, n in c['rates'])"); do
  rate=${pair%%:*}; np=${pair##*:}; SEED=$((SEED+1))
  echo "pd-rate$rate $(date +%s.%N)" >> $R/$N-pd-marks.txt
  timeout 150 vllm bench serve $COMMON --seed $SEED --num-prompts $np --request-rate $rate \
    --result-filename $N-pd-rate$rate.json > $R/$N-pd-bench-rate$rate.log 2>&1
  echo "pd rate $rate: $(grep -E 'Successful|Output token throughput|Median TTFT|Median TPOT' $R/$N-pd-bench-rate$rate.log | tr -s ' ' | tr '\n' ' ')"
  sleep 2
  scrape -rate$rate
done
scrape ""
stop
echo "PD_DONE $N"
