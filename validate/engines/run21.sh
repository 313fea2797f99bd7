#!/bin/bash
# Run 21 on one H200 (session 26): run 20's warm run (Qwen3-30B-A3B, seed 202, 4 req/s) on a server whose fused MoE
# routes uniformly (VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random, as lat.py's offline runs; runs 19 and 20
# served the dummy weights' own routing). Question: is run 20's TPOT miss at its calibrated host the dummy routing?
# Prediction h200-vllm-run21-predicted.json committed before. No cold pass (445 s of device time left): the first
# traffic compiles its fused-MoE keys; the judged figure is the decode steps between prefills (ITLs under 25 ms),
# which a compile does not touch.
# After unpack_payload.sh: bash run21.sh RESDIR (detached), then bash run21.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Qwen3-30B-A3B) > $R/models.log 2>&1
M=$HOME/models/Qwen3-30B-A3B
PORT=8000
stage S
VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random setsid vllm serve $M --load-format dummy --dtype bfloat16 \
  --max-model-len 4096 --port $PORT --seed 0 > $R/server.log 2>&1 &
SPID=$!; T0=$(date +%s)
wait_healthy $SPID $R/server.log $PORT 240
echo "server up after $(( $(date +%s) - T0 )) s"
for spec in uwarm:202:4 ur16:204:16; do
  IFS=: read -r run seed rate <<< "$spec"; stage $run
  bench_random $run $seed $rate 150
  echo "$run: $(grep -E 'Median TTFT|Median TPOT' $R/$run-bench.log | tr -s ' ' | tr '\n' ' ')"
done
kill -TERM -$SPID; sleep 5; kill -KILL -$SPID 2>/dev/null
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
