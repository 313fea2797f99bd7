#!/bin/bash
# Run 19 on one H200 (session 25): a fresh vLLM server's first-use compiles of the fused-MoE Triton kernel in served
# traffic (roofline.engines.first_use; prediction h200-vllm-run19-predicted.json committed before, run19.py).
# Qwen3-30B-A3B (dummy weights) on `vllm serve` (max_model_len 4096, defaults otherwise), then two runs of
# `vllm bench serve --dataset-name random --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64
# --request-rate 4 --num-prompts 240 --ready-check-timeout-sec 0`: "cold" (seed 201), then "warm" (seed 202). The
# cubin files written during each run (find -newer a marker under $HOME and /tmp) count the kernels compiled then.
# After unpack_payload.sh: bash run19.sh RESDIR (detached), then bash run19.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Qwen3-30B-A3B) > $R/models.log 2>&1
M=$HOME/models/Qwen3-30B-A3B
PORT=8000
stage S
touch $R/.start-marker
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 4096 --port $PORT --seed 0 \
  > $R/server.log 2>&1 &
SPID=$!; T0=$(date +%s)
wait_healthy $SPID $R/server.log $PORT 240
echo "server up after $(( $(date +%s) - T0 )) s, start-up cubins $(cubins $R/.start-marker)"
for pair in cold:201 warm:202; do
  run=${pair%%:*}; seed=${pair##*:}; stage $run
  touch $R/.$run-marker
  bench_random $run $seed 4 240
  cubins $R/.$run-marker > $R/$run-cubins.txt
  echo "$run rc $?: cubins $(cat $R/$run-cubins.txt) $(grep -E 'Median TTFT|P99 TTFT|Median TPOT' $R/$run-bench.log | tr -s ' ' | tr '\n' ' ')"
done
kill -TERM -$SPID; sleep 5; kill -KILL -$SPID 2>/dev/null
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
