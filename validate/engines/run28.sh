#!/bin/bash
# Run 28 on two H200s of one host (session 39; cases-run28.json; prediction h200x2-vllm-run28-predicted.json and the
# hypotheses of validate/notes/2026-12-02-run28-pp.md committed before it): pipeline parallelism in a real vLLM.
#   A: lat.py at pp 2: tiny-llama-32 (the host's step), then Llama-3.1-8B (decode B 1 .. 256, prefill 256 / 2,048).
#   S: serve.sh, Llama-3.1-8B --pipeline-parallel-size 2: Poisson 12 / 24 and --max-concurrency 32, with the iteration
#      log (vLLM's --enable-logging-iteration-details: each step's generation requests) and /metrics around each rate.
# Usage (the payload unpacked as for run 26): STAGE=A|S BUDGET=S bash validate/engines/run28.sh. Results: $OUT/run28-STAGE.tgz
set -u
cd "$(dirname "$0")/../.."
t0=$SECONDS; STAGE=${STAGE:-A}
R=$HOME/run28-$STAGE; rm -rf $R
# the payload copied to ~/stash by the calls before (vllm_pack.sh's parts, as for run 26): unpacked once, env.txt
source validate/engines/api_loop_host.sh
[ -d $HOME/site/vllm ] || unpack_and_record
source validate/engines/x2_env.sh
finish() { (cd $HOME && tar czf "$OUT/run28-$STAGE.tgz" run28-$STAGE) && ls -l "$OUT"; }
trap finish EXIT
export ROOFLINE_ENGINE_CASES=cases-run28.json
env_log $R/env.log
[ -d $HOME/models/Llama-3.1-8B ] && [ -d $HOME/models/tiny-llama-32 ] || \
  (PYTHONPATH=$ROOT:$HOME/site python3 -m validate.engines.models $HOME/models Llama-3.1-8B tiny-llama-32) > $R/models.log 2>&1
left() { echo $(( ${BUDGET:-560} - (SECONDS - t0) - 15 )); }
if [ "$STAGE" = A ]; then
  for N in tiny-llama-32 Llama-3.1-8B; do
    echo "A $N $(date -u +%T)" >> $R/stages.log
    TO=$(python3 -c "import json; print(json.load(open('$HERE/cases-run28.json'))['models']['$N']['timeout_s'])")
    [ $(left) -lt $TO ] && TO=$(left)
    [ $TO -gt 30 ] || break
    setsid timeout $TO python3 $HERE/lat.py $HOME/models/$N $N $R/$N-lat.json > $R/$N-lat.log 2>&1
    echo "lat $N rc $? after $((SECONDS - t0)) s" >> $R/stages.log
    pkill -f "lat.py" 2>/dev/null; sleep 3
  done
else
  echo "S $(date -u +%T)" >> $R/stages.log
  export PYTHONPATH=$HOME/site METRICS_EACH=1 SAMPLE_CLOCKS=1 VLLM_LOGGING_CONFIG_PATH=$HERE/logging-iter.json \
    SERVE_EXTRA="--pipeline-parallel-size 2 --enable-logging-iteration-details"
  timeout $(left) bash $HERE/serve.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R > $R/serve-driver.log 2>&1
  echo "serve.sh rc $? after $((SECONDS - t0)) s" >> $R/stages.log
  cat $R/serve-driver.log
fi
echo "RUN28_$STAGE $(date -u +%T)" >> $R/stages.log
cat $R/stages.log
