#!/bin/bash
# Run 26, call B (the same lease, right after run26.sh): Llama-3.1-8B (dummy weights) served as in run 1 / run 9
# (serve.sh: max_model_len 16384, gpu_memory_utilization 0.85, random prompts 1,024 in / 256 out) at Poisson rates
# 12 and 24 and one --max-concurrency 32 client (cases-run26.json), with --enable-logging-iteration-details
# (millisecond stamps: logging-iter.json), /metrics before and after each rate (METRICS_EACH), loop_lag.py's monitors
# in every process, and `py-spy record --nonblocking` of the API server for 8 s inside the rate-24 run. Issue 29's
# open item: after timing mechanism 24 the model's TTFT p50 reads under on these runs (run 1 rate12 -32 %, rate24
# -37 %; run 9 rate24 -13 %); this splits a served TTFT into the client's, the API server's and the engine's parts.
# Usage: BUDGET=S bash validate/engines/run26b.sh. Results: $OUT/run26b.tgz.
set -u
cd "$(dirname "$0")/../.."
t0=$SECONDS; ROOT=$PWD; HERE=$ROOT/validate/engines
export PATH=$HOME/bin:$HOME/pyspy/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
RUN=${RUN:-run26b}; R=$HOME/$RUN; rm -rf $R; mkdir -p $R  # run 27: RUN=run27b (a repetition on a second lease)
finish() { (cd $HOME && tar czf "$OUT/$RUN.tgz" $RUN) && ls -l "$OUT"; }
trap finish EXIT
{ date -u +%FT%TZ; echo "checkout $(cat .sha 2>/dev/null)"; uptime; } > $R/env.txt
[ -d $HOME/models/Llama-3.1-8B ] || (PYTHONPATH=$ROOT:$HOME/site python3 -m validate.engines.models $HOME/models Llama-3.1-8B) > $R/models.log 2>&1
export PYTHONPATH=$HERE/looplag_site:$HOME/site LOOPLAG_DIR=$R/lag ROOFLINE_ENGINE_CASES=cases-run26.json METRICS_EACH=1 \
  SAMPLE_CLOCKS=1 SERVE_EXTRA=--enable-logging-iteration-details VLLM_LOGGING_CONFIG_PATH=$HERE/logging-iter.json
# py-spy inside the rate-24 run: 8 s from 6 s after its mark
( for i in $(seq 1 400); do grep -q "^rate24 " $R/Llama-3.1-8B-marks.txt 2>/dev/null && break; sleep 1; done
  sleep 6; APID=$(pgrep -f "vllm.entrypoints.cli.main serve" | head -1)
  command -v py-spy > /dev/null && [ -n "$APID" ] && timeout 30 py-spy record --pid $APID --nonblocking --rate 200 \
    --duration 8 --format raw -o $R/pyspy-rate24.txt > $R/pyspy-rate24.log 2>&1 ) &
timeout $(( ${BUDGET:-540} - 20 )) bash $HERE/serve.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R > $R/serve-driver.log 2>&1
echo "serve.sh rc $? after $((SECONDS - t0)) s" >> $R/serve-driver.log
cat $R/serve-driver.log
