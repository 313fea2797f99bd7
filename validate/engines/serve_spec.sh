#!/bin/bash
# Speculative decoding on a real vLLM: `vllm serve` with a draft model (method draft_model, the "speculative" entry of
# the cases file: draft, tokens K), `vllm bench serve` closed loop at each (max_concurrency, prompts), then /metrics:
# vllm:spec_decode_num_drafts / num_draft_tokens / num_accepted_tokens(_per_pos), the acceptance per draft position
# the simulation takes as its input. Usage: serve_spec.sh MODEL_DIR NAME RESDIR (draft folder: ../DRAFT beside MODEL_DIR)
M=$1; N=$2; R=$3
HERE=$(dirname "$0")
S() { python3 -c "import json,sys; c=json.load(open('$HERE/${ROOFLINE_ENGINE_CASES:-cases.json}'))['serve']; print(eval(sys.argv[1]))" "$1"; }
L=$(S "c['max_model_len']"); U=$(S "c['gpu_memory_utilization']")
D=$(dirname $M)/$(S "c['speculative']['draft']"); K=$(S "c['speculative']['tokens']")
IN=$(S "c['speculative']['input_len']"); OUTL=$(S "c['speculative']['output_len']")
PORT=8002
SPEC="{\"method\": \"draft_model\", \"model\": \"$D\", \"num_speculative_tokens\": $K}"
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len $L --gpu-memory-utilization $U \
  --port $PORT --seed 0 --speculative-config "$SPEC" > $R/$N-spec-server.log 2>&1 &
SPID=$!
T0=$(date +%s)
for i in $(seq 1 150); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health',timeout=2)" 2>/dev/null && break
  kill -0 $SPID 2>/dev/null || { echo "spec server died"; tail -30 $R/$N-spec-server.log; exit 1; }
  sleep 2
done
echo "spec server up after $(( $(date +%s) - T0 )) s"
COMMON="--backend vllm --model $M --port $PORT --dataset-name random --random-input-len $IN --random-output-len $OUTL --ignore-eos --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --save-result --save-detailed --result-dir $R"
SEED=300
for pair in $(S "' '.join(f'{c_}:{n}' for c_, n in c['speculative']['runs'])"); do
  mc=${pair%%:*}; np=${pair##*:}; SEED=$((SEED+1))
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics',timeout=5).read().decode())" \
    | grep -E "^vllm:spec_decode" > $R/$N-spec-metrics-before-conc$mc.txt
  timeout 150 vllm bench serve $COMMON --seed $SEED --num-prompts $np --request-rate inf --max-concurrency $mc \
    --result-filename $N-spec-conc$mc.json > $R/$N-bench-spec-conc$mc.log 2>&1
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics',timeout=5).read().decode())" \
    | grep -E "^vllm:spec_decode" > $R/$N-spec-metrics-conc$mc.txt
  echo "spec conc $mc: $(grep -E 'Output token throughput|Median TPOT|Acceptance' $R/$N-bench-spec-conc$mc.log | tr -s ' ' | tr '\n' ' ')"
done
kill -TERM -$SPID; sleep 6; kill -KILL -$SPID 2>/dev/null; wait $SPID 2>/dev/null
echo "SPEC_DONE $N"
