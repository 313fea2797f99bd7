#!/bin/bash
# `vllm serve` (dummy weights) and `vllm bench serve` at the Poisson rates of cases.json, one run with a shared
# prefix (prefix caching on: vLLM's default), one closed-loop --max-concurrency run, then /metrics.
# A distinct --seed per run, so no run re-sends another's prompts. --save-detailed keeps each request's send time
# (start_times), so the simulation replays the client's own arrivals. With a "burst" entry, one all-at-once run
# (--request-rate inf); with a "speculative" entry, a second server with a draft model (serve_spec.sh).
# Usage: serve.sh MODEL_DIR NAME RESDIR   (cases file: $ROOFLINE_ENGINE_CASES, default cases.json)
# Optional (run 26): SERVE_EXTRA (more `vllm serve` flags); METRICS_EACH=1 (every vllm: line of /metrics, stamped,
# before and after each Poisson run: $N-RUN-before-metrics.txt / -after-; the TTFT's split per run)
M=$1; N=$2; R=$3
HERE=$(dirname "$0")
S() { python3 -c "import json,sys; c=json.load(open('$HERE/${ROOFLINE_ENGINE_CASES:-cases.json}'))['serve']; print(eval(sys.argv[1]))" "$1"; }
L=$(S "c['max_model_len']"); U=$(S "c['gpu_memory_utilization']")
IN=$(S "c['input_len']"); OUTL=$(S "c['output_len']")
PORT=8000
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len $L --gpu-memory-utilization $U \
  --port $PORT --seed 0 ${SERVE_EXTRA:-} > $R/$N-server.log 2>&1 &
SPID=$!
T0=$(date +%s)
for i in $(seq 1 150); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health',timeout=2)" 2>/dev/null && break
  kill -0 $SPID 2>/dev/null || { echo "server died"; tail -30 $R/$N-server.log; exit 1; }
  sleep 2
done
echo "server up after $(( $(date +%s) - T0 )) s"
# SAMPLE_CLOCKS=1 (run 9): the GPU's SM clock, power and utilisation every 50 ms while the clients run, and each
# run's start / end (epoch s) in $N-marks.txt, so a run's prefills can be read against the board's clock
mark() { echo "$1 $(date +%s.%N)" >> $R/$N-marks.txt; }
snap() {  # snap FILE: every vllm: line of /metrics after a stamp line (METRICS_EACH=1 only)
  [ "${METRICS_EACH:-0}" = 1 ] || return 0
  date +%s.%N > "$1"
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics',timeout=5).read().decode())" \
    2>/dev/null | grep '^vllm:' >> "$1"
}
if [ "${SAMPLE_CLOCKS:-0}" = 1 ]; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu \
    --format=csv,nounits -lms 50 > $R/$N-clocks.csv 2>&1 &
  SMI=$!
fi
COMMON="--backend vllm --model $M --port $PORT --dataset-name random --random-input-len $IN --random-output-len $OUTL --ignore-eos --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --save-result --save-detailed --result-dir $R"
SEED=100
for pair in $(S "' '.join(f'{r}:{n}' for r, n in c['rates'])"); do
  rate=${pair%%:*}; np=${pair##*:}; SEED=$((SEED+1)); snap $R/$N-rate$rate-before-metrics.txt; mark rate$rate
  timeout 150 vllm bench serve $COMMON --seed $SEED --num-prompts $np --request-rate $rate \
    --result-filename $N-rate$rate.json > $R/$N-bench-rate$rate.log 2>&1
  mark rate$rate-end; snap $R/$N-rate$rate-after-metrics.txt
  echo "rate $rate: $(grep -E 'Output token throughput|Median TPOT' $R/$N-bench-rate$rate.log | tr -s ' ' | tr '\n' ' ')"
done
if [ "$(S "'prefix' in c")" = True ]; then
PR=$(S "c['prefix']['rate']"); PN=$(S "c['prefix']['prompts']"); PL=$(S "c['prefix']['prefix_len']")
SEED=$((SEED+1)); mark prefix
timeout 120 vllm bench serve $COMMON --seed $SEED --num-prompts $PN --request-rate $PR --random-prefix-len $PL \
  --result-filename $N-prefix.json > $R/$N-bench-prefix.log 2>&1
echo "prefix: $(grep -E 'Output token throughput|Median TTFT' $R/$N-bench-prefix.log | tr -s ' ' | tr '\n' ' ')"
fi
MC=$(S "c['concurrency']['max_concurrency']"); MN=$(S "c['concurrency']['prompts']")
SEED=$((SEED+1)); mark conc$MC
timeout 150 vllm bench serve $COMMON --seed $SEED --num-prompts $MN --request-rate inf --max-concurrency $MC \
  --result-filename $N-conc$MC.json > $R/$N-bench-conc.log 2>&1
echo "conc $MC: $(grep -E 'Output token throughput|Median TPOT' $R/$N-bench-conc.log | tr -s ' ' | tr '\n' ' ')"
if [ "$(S "'burst' in c")" = True ]; then
  BN=$(S "c['burst']['prompts']"); BI=$(S "c['burst']['input_len']"); BO=$(S "c['burst']['output_len']")
  SEED=$((SEED+1)); mark burst
  timeout 150 vllm bench serve $COMMON --seed $SEED --num-prompts $BN --request-rate inf --random-input-len $BI \
    --random-output-len $BO --result-filename $N-burst.json > $R/$N-bench-burst.log 2>&1
  echo "burst $BN: $(grep -E 'Output token throughput|Median TPOT|Median TTFT' $R/$N-bench-burst.log | tr -s ' ' | tr '\n' ' ')"
fi
mark end; [ -n "${SMI:-}" ] && kill $SMI
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics',timeout=5).read().decode())" \
  | grep -E "^vllm:(prefix_cache|num_preemptions|kv_cache_usage|cache_config_info|prompt_tokens_total|generation_tokens_total|num_requests)" > $R/$N-metrics.txt
kill -TERM -$SPID; sleep 6; kill -KILL -$SPID 2>/dev/null; wait $SPID 2>/dev/null
echo "SERVE_DONE $N"
[ "$(S "'speculative' in c")" = True ] && bash $HERE/serve_spec.sh $M $N $R
