# Sourced by a detached vLLM driver (run18.sh .. run21.sh): `detach "$0" "$@"` runs the driver's modes
#   DRIVER RESDIR            starts the driver in its own session (setsid nohup) and returns at once
#   DRIVER RESDIR --wait S   waits up to S s for "ALL_DONE" in RESDIR/stages.log or the driver's end, then prints
#                            the stage log and the driver's tail and tars RESDIR into $OUT
# and returns only in the detached driver itself (mode --main), after setting up vLLM's environment (the payload in
# ~/site, a `vllm` command), `stage NAME` (a line in stages.log) and RESDIR/env.log (GPU, driver, versions, host,
# the checkout's .sha). Sets R, HERE, ROOT for the driver.
detach() {
  local self=$1; R=$2; local mode=${3:-start}
  HERE=$(cd "$(dirname "$self")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
  local name; name=$(basename "$R")
  case "$mode" in
    start)
      mkdir -p "$R"
      ROOFLINE_DETACHED=1 setsid nohup bash "$self" "$R" --main > "$R/driver.out" 2>&1 < /dev/null &
      echo $! > "$R/driver.pid"; echo "started $(cat "$R/driver.pid") -> $R"; exit 0 ;;
    --wait)
      local t0; t0=$(date +%s)
      while [ $(( $(date +%s) - t0 )) -lt "${4:-540}" ]; do
        grep -q "^ALL_DONE" "$R/stages.log" 2>/dev/null && break
        ! kill -0 "$(cat "$R/driver.pid")" 2>/dev/null && break
        sleep 5
      done
      echo "== stages"; cat "$R/stages.log" 2>/dev/null; echo "== driver (tail)"; tail -30 "$R/driver.out" 2>/dev/null
      [ -n "${OUT:-}" ] && [ -d "$R" ] && tar czf "$OUT/$name.tgz" -C "$(dirname "$R")" "$name" && ls -l "$OUT/$name.tgz"
      exit 0 ;;
    --main) [ "${ROOFLINE_DETACHED:-}" = 1 ] || exit 2 ;;
    *) echo "usage: $(basename "$self") RESDIR [--wait S]"; exit 2 ;;
  esac
  mkdir -p $HOME/models $HOME/bin
  printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
  export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
  stage E
  {
  echo "== env $(date -u +%FT%TZ) sha $(cat $ROOT/.sha 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch, vllm, triton; print('torch', torch.__version__, 'vllm', vllm.__version__, 'triton', triton.__version__)"
  lscpu | grep -E "Model name|^CPU\(s\)|MHz|NUMA"
  } > $R/env.log 2>&1
}
stage() { echo "$1 $(date -u +%T)" >> "$R/stages.log"; }
# wait_healthy PID LOG PORT TRIES: poll the server's /health every 2 s up to TRIES times; 1 (with LOG's tail) if the
# server's process ended first
wait_healthy() {
  local i
  for i in $(seq 1 "$4"); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$3/health',timeout=2)" 2>/dev/null \
      && return 0
    kill -0 "$1" 2>/dev/null || { echo "server died"; tail -30 "$2"; return 1; }
    sleep 2
  done
}
# bench_random RUN SEED RATE TIMEOUT [ARGS...]: runs 19-21's client, `vllm bench serve --dataset-name random` with
# prompts of 300-2,700 tokens and 12-116 outputs, 240 requests at RATE (ARGS: e.g. --max-concurrency 32) against the
# server of $M on $PORT; the result RESDIR/RUN.json (--save-detailed), the log RESDIR/RUN-bench.log
bench_random() {
  local run=$1 seed=$2 rate=$3 limit=$4; shift 4
  timeout "$limit" vllm bench serve --backend vllm --model $M --port $PORT --dataset-name random \
    --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64 --ignore-eos --request-rate "$rate" "$@" \
    --num-prompts 240 --seed "$seed" --ready-check-timeout-sec 0 --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --save-result --save-detailed --result-dir $R --result-filename $run.json \
    > $R/$run-bench.log 2>&1
}
# qwen3_k1: runs 22-23's opening: model folders (Qwen3-30B-A3B, tiny-llama), stage K1 (serve_tiny.sh at concurrency
# 1: the host's speed), then M and PORT for the served model and `cubins MARKER` (the Triton cubins written since)
qwen3_k1() {
  (cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Qwen3-30B-A3B tiny-llama) \
    > $R/models.log 2>&1
  stage K1
  CONCS="1" timeout 450 bash $HERE/serve_tiny.sh $HOME/models/tiny-llama $R > $R/driver-K1.log 2>&1
  M=$HOME/models/Qwen3-30B-A3B
  PORT=8000
}
cubins() { find $HOME /tmp -xdev -name '*.cubin' -newer "$1" 2>/dev/null | wc -l; }
# serve_model TRIES [ARGS...]: `vllm serve $M` (dummy weights, max_model_len 4096, port $PORT, ARGS added) in its own
# session, its log RESDIR/server.log; waits up to TRIES x 2 s for /health; SPID the server's session
serve_model() {
  local tries=$1; shift
  setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 4096 --port $PORT --seed 0 "$@" \
    > $R/server.log 2>&1 &
  SPID=$!; local t0; t0=$(date +%s)
  wait_healthy $SPID $R/server.log $PORT "$tries"
  echo "server up after $(( $(date +%s) - t0 )) s"
}
# served_run RUN SEED RATE CONC: bench_random at RATE (CONC > 0: --max-concurrency CONC), then the cubins written
# since RESDIR/.RUN-marker (touched before) and the run's headline figures on the driver's log
served_run() {
  local run=$1 seed=$2 rate=$3 conc=$4 extra=()
  [ "$conc" != 0 ] && extra=(--max-concurrency "$conc")
  bench_random $run $seed $rate 240 "${extra[@]}"
}
run_done() {
  cubins $R/.$1-marker > $R/$1-cubins.txt
  echo "$1: cubins $(cat $R/$1-cubins.txt) $(grep -E 'Median TTFT|P99 TTFT|Median TPOT' $R/$1-bench.log | tr -s ' ' | tr '\n' ' ')"
}
# served_runs SPEC...: each RUN:SEED:RATE:CONC a stage of its own: marker, served_run, run_done
served_runs() {
  local spec run seed rate conc
  for spec in "$@"; do
    IFS=: read -r run seed rate conc <<< "$spec"; stage $run
    touch $R/.$run-marker
    served_run $run $seed $rate $conc
    run_done $run
  done
}
# run 24's probe kit (run24.sh, run26.sh), against the server of $M on $PORT, files in $R:
# metrics NAME: every vllm: line of /metrics after an epoch stamp, RESDIR/NAME-metrics.txt
metrics() { date +%s.%N > $R/$1-metrics.txt; python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics',timeout=5).read().decode())" \
  2>/dev/null | grep '^vllm:' >> $R/$1-metrics.txt; }
bench() {  # bench NAME SEED LEN OUT N CONC: N prompts of LEN tokens, OUT outputs, at most CONC at once, all sent at once
  timeout 120 vllm bench serve --backend vllm --model $M --port $PORT --dataset-name random --random-input-len $3 \
    --random-range-ratio 0 --random-output-len $4 --ignore-eos --request-rate inf --max-concurrency $6 \
    --num-prompts $5 --seed $2 --ready-check-timeout-sec 0 --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --save-result --result-dir $R --result-filename $1.json > $R/$1-bench.log 2>&1
}
# probe N: run 24's phase at N background streams: stage AN; N streams of 64-token prompts and 12,000 outputs all
# sent at once (BG their client's session), 6 s, /metrics, the probe's 20 prompts of 1,500 tokens one at a time,
# /metrics; the background is left streaming (probe_end stops it)
probe() {
  stage A$1
  BG=0
  if [ $1 -gt 0 ]; then setsid bash -c "$(declare -f bench); M=$M PORT=$PORT R=$R bench bg$1 $((700 + $1)) 64 12000 $1 $1" & BG=$!; sleep 6; fi
  metrics a$1-before
  bench p$1 $((800 + $1)) 1500 4 20 1
  metrics a$1-after
}
probe_end() { [ $BG -gt 0 ] && { kill -TERM -$BG 2>/dev/null; sleep 3; kill -KILL -$BG 2>/dev/null; }; return 0; }
