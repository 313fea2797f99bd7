#!/bin/bash
# Run 19 on one H200 (session 25): a fresh vLLM server's first-use compiles of the fused-MoE Triton kernel in served
# traffic (roofline.engines.first_use; prediction h200-vllm-run19-predicted.json committed before, run19.py).
# Qwen3-30B-A3B (dummy weights) on `vllm serve` (max_model_len 4096, defaults otherwise), then two runs of
# `vllm bench serve --dataset-name random --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64
# --request-rate 4 --num-prompts 240 --ready-check-timeout-sec 0`: "cold" (seed 201), then "warm" (seed 202). The
# cubin files written during each run (find -newer a marker under $HOME and /tmp) count the kernels compiled then.
# After unpack_payload.sh:  bash run19.sh RESDIR   |   bash run19.sh RESDIR --wait S
set -u
R=$1; MODE=${2:-start}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
NAME=$(basename "$R")
pack() { [ -n "${OUT:-}" ] && [ -d "$R" ] && tar czf "$OUT/$NAME.tgz" -C "$(dirname "$R")" "$NAME" && ls -l "$OUT/$NAME.tgz"; }
status() { echo "== stages"; cat "$R/stages.log" 2>/dev/null; echo "== driver (tail)"; tail -30 "$R/driver.out" 2>/dev/null; }
case "$MODE" in
  start)
    mkdir -p "$R"
    ROOFLINE_RUN19=1 setsid nohup bash "$0" "$R" --main > "$R/driver.out" 2>&1 < /dev/null &
    echo $! > "$R/driver.pid"; echo "started $(cat "$R/driver.pid") -> $R"; exit 0 ;;
  --wait)
    T0=$(date +%s)
    while [ $(( $(date +%s) - T0 )) -lt "${3:-540}" ]; do
      grep -q "^ALL_DONE" "$R/stages.log" 2>/dev/null && break
      ! kill -0 "$(cat "$R/driver.pid")" 2>/dev/null && break
      sleep 5
    done
    status; pack; exit 0 ;;
  --main) [ "${ROOFLINE_RUN19:-}" = 1 ] || exit 2 ;;
  *) echo "usage: run19.sh RESDIR [--wait S]"; exit 2 ;;
esac
mkdir -p $HOME/models $HOME/bin
stage() { echo "$1 $(date -u +%T)" >> "$R/stages.log"; }
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
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Qwen3-30B-A3B) > $R/models.log 2>&1
M=$HOME/models/Qwen3-30B-A3B
PORT=8000
cubins() { find $HOME /tmp -xdev -name '*.cubin' -newer "$1" 2>/dev/null | wc -l; }
stage S
touch $R/.start-marker
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 4096 --port $PORT --seed 0 \
  > $R/server.log 2>&1 &
SPID=$!; T0=$(date +%s)
for i in $(seq 1 240); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/health',timeout=2)" 2>/dev/null && break
  kill -0 $SPID 2>/dev/null || { echo "server died"; tail -30 $R/server.log; break; }
  sleep 2
done
echo "server up after $(( $(date +%s) - T0 )) s, start-up cubins $(cubins $R/.start-marker)"
for pair in cold:201 warm:202; do
  run=${pair%%:*}; seed=${pair##*:}; stage $run
  touch $R/.$run-marker
  timeout 240 vllm bench serve --backend vllm --model $M --port $PORT --dataset-name random \
    --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64 --ignore-eos --request-rate 4 \
    --num-prompts 240 --seed $seed --ready-check-timeout-sec 0 --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --save-result --save-detailed --result-dir $R --result-filename $run.json \
    > $R/$run-bench.log 2>&1
  cubins $R/.$run-marker > $R/$run-cubins.txt
  echo "$run rc $?: cubins $(cat $R/$run-cubins.txt) $(grep -E 'Median TTFT|P99 TTFT|Median TPOT' $R/$run-bench.log | tr -s ' ' | tr '\n' ' ')"
done
kill -TERM -$SPID; sleep 5; kill -KILL -$SPID 2>/dev/null
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
