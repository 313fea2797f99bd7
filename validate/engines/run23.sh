#!/bin/bash
# Run 23 on one H200 (session 28): vLLM's served Qwen3-30B-A3B again at run 22's sends, with the engine's own view of
# its steps. Prediction h200-vllm-run23-predicted.json committed before (run23.py).
#   K1: serve_tiny.sh (tiny-llama, concurrency 1): the host's speed as a user calibrates it (run 22's stage).
#   S:  Qwen3-30B-A3B (dummy weights) on `vllm serve --max-model-len 4096 --enable-logging-iteration-details` with
#       millisecond log stamps (logging-iter.json): every engine step's context / generation requests and tokens
#       (EngineCore.log_iteration_details, vllm/v1/engine/core.py@v0.24.0:434-472). Runs: cold (seed 201, 6 req/s: the
#       first traffic, compiles), P2k and P256 (the in-situ probes: 12 prompts of exactly 2,048 / 256 tokens, 4 outputs,
#       --max-concurrency 1: one eager prefill, one graphed prefill, nothing queued), then run 22's judged runs at the
#       same seeds: r6 (203, 6 req/s), r12 (204, 12 req/s), c16 (205, --max-concurrency 16). /metrics after each run.
#       A run's steps are those stamped between its stages.log line and the next (iter_log.windows; a marker appended
#       to server.log is lost: the server writes through its own offset).
#   H:  handshake_probe.py (helper hs28's; NIXL carried in .payload/n1, n2): NIXL's first handshake at several pool
#       sizes, one GPU. Run 23 ran it by hand after the driver (run23h), as below.
# After unpack_payload.sh: bash run23.sh RESDIR (detached), then bash run23.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
qwen3_k1
metrics() { python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$PORT/metrics',timeout=5).read().decode())" \
  2>/dev/null | grep '^vllm:' > $R/$1-metrics.txt; }
probe() {  # probe RUN LEN SEED: 12 prompts of exactly LEN tokens, 4 outputs, one at a time
  timeout 120 vllm bench serve --backend vllm --model $M --port $PORT --dataset-name random --random-input-len $2 \
    --random-range-ratio 0 --random-output-len 4 --ignore-eos --request-rate inf --max-concurrency 1 \
    --num-prompts 12 --seed $3 --ready-check-timeout-sec 0 --percentile-metrics ttft,tpot,itl,e2el \
    --metric-percentiles 50,90,99 --save-result --save-detailed --result-dir $R --result-filename $1.json \
    > $R/$1-bench.log 2>&1
}
stage S
VLLM_LOGGING_CONFIG_PATH=$HERE/logging-iter.json serve_model 400 --enable-logging-iteration-details
metrics start
for spec in cold:201:6:0 P2k:2048:301 P256:256:302 r6:203:6:0 r12:204:12:0 c16:205:inf:16; do
  IFS=: read -r run seed rate conc <<< "$spec"; stage $run
  touch $R/.$run-marker
  if [ "${run:0:1}" = P ]; then
    probe $run $seed $rate
  else
    served_run $run $seed $rate $conc
  fi
  metrics $run
  run_done $run
done
kill -TERM -$SPID; sleep 5; kill -KILL -$SPID 2>/dev/null
grep -c "Iteration(" $R/server.log > $R/iterations.txt
if PYTHONPATH=$HOME/site python3 -c 'import nixl' 2>/dev/null; then
  stage H
  (cd $ROOT && PYTHONPATH=$ROOT:$HOME/site HS_REPS=5 HS_BUDGET_S=100 timeout 130 \
    python3 -m validate.engines.handshake_probe $R/handshake-probe.json) > $R/driver-H.log 2>&1
fi
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
