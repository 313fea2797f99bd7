#!/bin/bash
# Run 24 on one H200 (session 28): the API server's part of a TTFT while it streams other requests' tokens, on the
# tiny model (GPU work negligible). Run 23's /metrics split a served TTFT into the engine's queue and prefill and the
# API path (the API server's TTFT less both): 3-6 ms alone, 16 ms while it streamed 368 tokens a second, 20-27 ms at
# 722-772; the model charges a constant (api_request_s / S). This measures that growth apart from any served run.
#   K1: serve_tiny.sh (tiny-llama, concurrency 1): the host's speed.
#   A:  tiny-llama on `vllm serve` (max_model_len 16384); for N in 0 4 16 64: N background streams (64-token prompts,
#       12,000 outputs, --ignore-eos, all sent at once: none starts or ends during the probe), then after 6 s the probe
#       (20 prompts of 1,500 tokens, 4 outputs, concurrency 1), /metrics before and after the probe (stamped: its TTFT,
#       queue and prefill histograms' deltas are the probe's alone; generation_tokens_total's delta over the window is
#       the streamed tokens a second), then the background stopped.
# After unpack_payload.sh: bash run24.sh RESDIR (detached), then bash run24.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models tiny-llama) > $R/models.log 2>&1
stage K1
CONCS="1" timeout 450 bash $HERE/serve_tiny.sh $HOME/models/tiny-llama $R > $R/driver-K1.log 2>&1
M=$HOME/models/tiny-llama
PORT=8000
# metrics, bench: detach.sh
stage A
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 16384 --port $PORT --seed 0 \
  > $R/server.log 2>&1 &
SPID=$!; T0=$(date +%s)
wait_healthy $SPID $R/server.log $PORT 200
echo "server up after $(( $(date +%s) - T0 )) s"
bench warm 600 1500 4 8 1
for N in 0 4 16 64; do
  probe $N
  probe_end
  echo "N $N: $(grep -E 'Median TTFT' $R/p$N-bench.log | tr -s ' ')"
done
kill -TERM -$SPID; sleep 4; kill -KILL -$SPID 2>/dev/null
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
