#!/bin/bash
# Run 22 on one H200 (session 27): vLLM's served Qwen3-30B-A3B at rates run 20 did not serve, judged on the model after
# the one-call replay's fixed cost left the FA3 decode and fused-MoE laws. Prediction h200-vllm-run22-predicted.json
# committed before (run22.py).
#   K1: serve_tiny.sh (tiny-llama, concurrency 1): this host's speed, before.
#   S:  Qwen3-30B-A3B (dummy weights) on `vllm serve` (max_model_len 4096, defaults otherwise), `vllm bench serve
#       --dataset-name random --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64 --ignore-eos
#       --num-prompts 240`: cold (seed 201, 6 req/s: the first traffic, compiles), r6 (203, 6 req/s), r12 (204,
#       12 req/s), c16 (205, --max-concurrency 16, rate inf).
# After unpack_payload.sh: bash run22.sh RESDIR (detached), then bash run22.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
qwen3_k1
stage S
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 4096 --port $PORT --seed 0 \
  > $R/server.log 2>&1 &
SPID=$!; T0=$(date +%s)
wait_healthy $SPID $R/server.log $PORT 400
echo "server up after $(( $(date +%s) - T0 )) s"
for spec in cold:201:6:0 r6:203:6:0 r12:204:12:0 c16:205:inf:16; do
  IFS=: read -r run seed rate conc <<< "$spec"; stage $run
  touch $R/.$run-marker
  extra=(); [ "$conc" != 0 ] && extra=(--max-concurrency "$conc")
  bench_random $run $seed $rate 240 "${extra[@]}"
  cubins $R/.$run-marker > $R/$run-cubins.txt
  echo "$run: cubins $(cat $R/$run-cubins.txt) $(grep -E 'Median TTFT|P99 TTFT|Median TPOT' $R/$run-bench.log | tr -s ' ' | tr '\n' ' ')"
done
kill -TERM -$SPID; sleep 5; kill -KILL -$SPID 2>/dev/null
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
