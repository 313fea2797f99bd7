#!/bin/bash
# `python -m sglang.launch_server` (dummy weights) and bench_sglang.py (sglang.bench_serving, random-ids dataset:
# exact input/output lengths sent as token ids, ignore_eos, greedy) at the Poisson rates and --max-concurrency runs
# of the cases file's KEY entry (and its "prefix" run: a shared prefix before every prompt); then /server_info (the
# resolved memory and scheduler settings) and /metrics.
# A distinct --seed per run, and --flush-cache after the benchmark's one warm-up request, so no run reuses another's
# prefixes. $ROOFLINE_SGLANG_ATTN, when set, names the attention backend. Exit status 3: the server did not come up.
# Usage: serve_sglang.sh MODEL_DIR NAME KEY RESDIR   (KEY: serve | serve2 | serve_tiny; cases: $ROOFLINE_SGLANG_CASES)
M=$1; N=$2; K=$3; R=$4
HERE=$(cd "$(dirname "$0")" && pwd)
S() { python3 -c "import json,sys; c=json.load(open('$HERE/${ROOFLINE_SGLANG_CASES:-cases-sglang.json}'))['$K']; print(eval(sys.argv[1]))" "$1"; }
CTX=$(S "c.get('context_length') or ''"); IN=$(S "c['input_len']"); OUTL=$(S "c['output_len']")
START_TO=$(S "c.get('start_timeout_s', 360)"); RUN_TO=$(S "c.get('run_timeout_s', 150)")
PORT=${ROOFLINE_SGLANG_PORT:-30000}
ARGS="--model-path $M --load-format dummy --dtype bfloat16 --port $PORT --random-seed 0 --enable-metrics --log-level info"
[ -n "$CTX" ] && ARGS="$ARGS --context-length $CTX"
[ -n "${ROOFLINE_SGLANG_ATTN:-}" ] && ARGS="$ARGS --attention-backend $ROOFLINE_SGLANG_ATTN"
echo "launch_server $ARGS" > $R/$N-server.cmd
setsid python3 -m sglang.launch_server $ARGS > $R/$N-server.log 2>&1 &
SPID=$!
echo $SPID > $R/$N-server.pid  # the server's process group, for the driver to end if this script is cut short
T0=$(date +%s)
up=0
while [ $(( $(date +%s) - T0 )) -lt $START_TO ]; do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2)" 2>/dev/null && { up=1; break; }
  kill -0 $SPID 2>/dev/null || break
  sleep 2
done
echo "server $N up=$up after $(( $(date +%s) - T0 )) s"
if [ $up != 1 ]; then
  tail -40 $R/$N-server.log
  kill -TERM -$SPID 2>/dev/null; sleep 5; kill -KILL -$SPID 2>/dev/null; wait $SPID 2>/dev/null
  exit 3
fi
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/server_info', timeout=30).read().decode())" \
  > $R/$N-server-info.json 2>&1
python3 $HERE/sglang_summary.py $R/$N-server-info.json $R/$N-server.log > $R/$N-startup.json 2>&1
cat $R/$N-startup.json
COMMON="--backend sglang --host 127.0.0.1 --port $PORT --model $M --tokenizer $M --dataset-name random-ids --tokenize-prompt
  --random-input-len $IN --random-output-len $OUTL --random-range-ratio 1.0 --flush-cache --output-details --disable-tqdm"
SEED=100
bench() {  # bench TAG NUM_PROMPTS EXTRA...
  local tag=$1 np=$2; shift 2; SEED=$((SEED+1))
  echo "$tag $(date +%s.%N)" >> $R/$N-marks.txt
  ROOFLINE_SGLANG_SENDS=$R/$N-$tag-sends.json timeout $RUN_TO python3 $HERE/bench_sglang.py $COMMON --seed $SEED --num-prompts $np \
    --output-file $R/$N-$tag.jsonl "$@" > $R/$N-bench-$tag.log 2>&1
  echo "$tag rc $?: $(grep -E 'Output token throughput|Median TTFT|Median TPOT' $R/$N-bench-$tag.log | tr -s ' ' | tr '\n' ' ')"
}
for pair in $(S "' '.join(f'{r}:{n}' for r, n in c.get('rates', []))"); do
  bench rate${pair%%:*} ${pair##*:} --request-rate ${pair%%:*}
done
if [ "$(S "'prefix' in c")" = True ]; then  # one fixed shared prefix before every prompt (bench_sglang.py), radix cache on
  export ROOFLINE_SGLANG_PREFIX_LEN=$(S "c['prefix']['prefix_len']")
  bench prefix $(S "c['prefix']['prompts']") --request-rate $(S "c['prefix']['rate']")
  unset ROOFLINE_SGLANG_PREFIX_LEN
fi
for pair in $(S "' '.join(f'{m}:{n}' for m, n in ([[c['concurrency']['max_concurrency'], c['concurrency']['prompts']]] if isinstance(c.get('concurrency'), dict) else c.get('concurrency', [])))"); do
  bench conc${pair%%:*} ${pair##*:} --request-rate inf --max-concurrency ${pair%%:*}
done
echo "end $(date +%s.%N)" >> $R/$N-marks.txt
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics', timeout=10).read().decode())" \
  | grep -E "^sglang:" > $R/$N-metrics.txt
kill -TERM -$SPID; sleep 6; kill -KILL -$SPID 2>/dev/null; wait $SPID 2>/dev/null
echo "SERVE_DONE $N"
