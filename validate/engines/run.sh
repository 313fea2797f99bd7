#!/bin/bash
# Driver, run detached on the GPU machine (setsid): env, model folders, kernel microbenchmarks, offline timing of
# each model in ORDER, the serving runs after the first model. vLLM unpacked in $SITE (default ~/site).
# Usage: run.sh RESDIR MODEL...     Writes RESDIR/driver.log and one file per stage. On a machine of several GPUs
# one driver per GPU (CUDA_VISIBLE_DEVICES) runs its own models; SKIP_MICRO=1 / SKIP_SERVE=1 leave those stages out.
# ROOFLINE_ENGINE_CASES names the cases file (default cases.json); MICRO2=1 adds micro2.py (GEMMs alone), MICRO3=1 micro3.py, PROF=MODEL[,MODEL]
# adds prof.py (one decode step by kernel; PROF_PREFILL=P1,P2 one prefill each instead) on that model, worker_memory_log in the cases file prints the worker's
# memory profile (logging-worker.json), EXTRA_MODELS writes more model folders (a draft model), SKIP_MODELS=1 writes none (another driver did).
set -u
R=$1; shift
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
SITE=${SITE:-$HOME/site}
mkdir -p $R $HOME/bin $HOME/models
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PYTHONPATH=$SITE PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export ROOFLINE_ENGINE_CASES=${ROOFLINE_ENGINE_CASES:-cases.json}
CASES=$HERE/$ROOFLINE_ENGINE_CASES
SERVE=$(python3 -c "import json; print(json.load(open('$CASES')).get('serve', {}).get('model', ''))")
ROUTING=$(python3 -c "import json; print(json.load(open('$CASES')).get('routing', ''))")
[ -n "$ROUTING" ] && export VLLM_MOE_ROUTING_SIMULATION_STRATEGY=$ROUTING
WLOG=$(python3 -c "import json; print(int(json.load(open('$CASES')).get('worker_memory_log', False)))")
[ "$WLOG" = 1 ] && export VLLM_LOGGING_CONFIG_PATH=$HERE/logging-worker.json
{
echo "== env $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import torch, vllm, triton; print('torch', torch.__version__, 'vllm', vllm.__version__, 'triton', triton.__version__)"
echo "routing simulation: ${VLLM_MOE_ROUTING_SIMULATION_STRATEGY:-off}"
echo "host probe: $(python3 $HERE/host_probe.py)"; lscpu | grep -E "Model name"
[ "${SKIP_MODELS:-0}" = 1 ] || (cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models "$@" ${EXTRA_MODELS:-})
if [ "${SKIP_MICRO:-0}" != 1 ]; then
  echo "== micro $(date -u +%T)"
  timeout 150 python3 $HERE/micro.py $R/micro.json > $R/micro.log 2>&1; echo "micro rc $?"; tail -3 $R/micro.log
fi
if [ "${MICRO2:-0}" = 1 ]; then
  echo "== micro2 $(date -u +%T)"
  timeout 200 python3 $HERE/micro2.py $R/micro2.json > $R/micro2.log 2>&1; echo "micro2 rc $?"; tail -12 $R/micro2.log
fi
if [ "${MICRO3:-0}" = 1 ]; then
  echo "== micro3 $(date -u +%T)"
  (cd $HERE && timeout 200 python3 micro3.py $R/micro3.json > $R/micro3.log 2>&1); echo "micro3 rc $?"; tail -30 $R/micro3.log
fi
for N in "$@"; do
  TO=$(python3 -c "import json; print(json.load(open('$CASES'))['models'].get('$N', {}).get('timeout_s', 330))")
  echo "== lat $N $(date -u +%T)"
  setsid timeout $TO python3 $HERE/lat.py $HOME/models/$N $N $R/$N-lat.json > $R/$N-lat.log 2>&1 &
  LP=$!; wait $LP; echo "lat rc $?"; kill -KILL -$LP 2>/dev/null; sleep 2
  grep -E "ENGINE|Memory profiling takes|CUDA graph memory|step=|prefill P=|KV cache|concurrency|Error|backend" $R/$N-lat.log | cut -c1-300 | tail -24
  if [ "$N" = tiny-llama ] && [ "${SKIP_SERVE:-0}" != 1 ]; then
    echo "== serve tiny $(date -u +%T)"; bash $HERE/serve_tiny.sh $HOME/models/$N $R
  fi
  if [ "$N" = "$SERVE" ] && [ "${SKIP_SERVE:-0}" != 1 ]; then
    echo "== serve $N $(date -u +%T)"; bash $HERE/serve.sh $HOME/models/$N $N $R
  fi
done
PROFS=${PROF:-}
for PM in ${PROFS//,/ }; do  # PROF: one model or a comma list
  echo "== prof $PM $(date -u +%T)"
  VLLM_ENABLE_V1_MULTIPROCESSING=0 PROF_MAX_MODEL_LEN=${PROF_MAX_MODEL_LEN:-4096} PROF_PREFILL=${PROF_PREFILL:-} setsid timeout 300 python3 $HERE/prof.py $HOME/models/$PM $R/$PM-prof.json \
    > $R/$PM-prof.log 2>&1 &
  PP=$!; wait $PP; echo "prof rc $?"; kill -KILL -$PP 2>/dev/null; sleep 2
  grep -E "^PROF|^  " $R/$PM-prof.log | head -60
done
echo "ALL_DONE $(date -u +%T)"
} > $R/driver.log 2>&1
