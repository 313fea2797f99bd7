#!/bin/bash
# SGLang 0.5.17 on one H200: the detached driver. After unpack_sglang.sh (payload in $ROOFLINE_SGLANG_SITE, default
# ~/sglang-site):
#   bash run_sglang.sh RESDIR            starts the run in its own session (setsid nohup) and returns at once
#   bash run_sglang.sh RESDIR --wait S   waits up to S seconds for the run's end, then as --poll
#   bash run_sglang.sh RESDIR --poll     prints the stage log and the driver log's tail; tars RESDIR into $OUT
# Stages (each under its own timeout; stages.log gets a line per start and end):
#   E env header (versions, GPU, driver, nvcc, host probe) and model folders (models.py: tiny-llama, Llama-3.1-8B)
#   F FA3 smoke test (sglang_smoke.py); on failure every later stage runs with ROOFLINE_SGLANG_ATTN=flashinfer
#   T launch_server on tiny-llama: start-up log, /server_info, bench at concurrency 1 / 16 / 64 (the server's own costs)
#   S launch_server on Llama-3.1-8B: start-up log, /server_info, Poisson rates and a --max-concurrency run, /metrics
#   S2 launch_server on the cases file's "serve2" model (run 3: Qwen3-30B-A3B), as S
#   L lat_sglang.py on each model of the cases file's "lat_models" (default: the served model; offline Engine: decode
#     steps, prefills, and a case's "profile" census under SGLang's profiler)
#   M micro_sglang.py (FA3 decode alone on pages of 1 and 16 tokens; the greedy sampler)
#   X micro_sglang.py extend (the served prefill step's kernels alone, micro-sglang-extend.json; <= 120 s): the
#     prediction is h200-sglang-run4-micro-predicted.json, `python -m validate.engines.sglang_prefill compare`
#   t lat_sglang.py tiny-llama (the engine's own step cost)
#   O (only when STAGES names it) python -m sglang.bench_one_batch on Llama-3.1-8B: the model's step, no scheduler
# STAGES (default "T S L t") picks and orders the stages; E and F always run. Expected ~10-12 minutes, the first
# start paying SGLang's JIT kernels (nvcc) and CUDA-graph captures. Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
R=$1; MODE=${2:-start}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
NAME=$(basename "$R")

pack() {  # the results folder into $OUT (at most 16 MiB a file comes back)
  [ -n "${OUT:-}" ] && [ -d "$R" ] && tar czf "$OUT/$NAME.tgz" -C "$(dirname "$R")" "$NAME" && ls -l "$OUT/$NAME.tgz"
}
status() {
  echo "== stages"; cat "$R/stages.log" 2>/dev/null
  echo "== driver.log (tail)"; tail -40 "$R/driver.log" 2>/dev/null
}
case "$MODE" in
  start)
    mkdir -p "$R"
    if [ -f "$R/driver.pid" ] && kill -0 "$(cat "$R/driver.pid")" 2>/dev/null; then echo "already running"; exit 0; fi
    ROOFLINE_SGLANG_DRIVER=1 setsid nohup bash "$0" "$R" --main > "$R/driver.out" 2>&1 < /dev/null &
    echo $! > "$R/driver.pid"; echo "started $(cat "$R/driver.pid") -> $R"; exit 0 ;;
  --poll) status; pack; exit 0 ;;
  --wait)
    T0=$(date +%s)
    while [ $(( $(date +%s) - T0 )) -lt "${3:-540}" ]; do
      grep -q "^ALL_DONE" "$R/stages.log" 2>/dev/null && break
      [ -f "$R/driver.pid" ] && ! kill -0 "$(cat "$R/driver.pid")" 2>/dev/null && break
      sleep 10
    done
    status; pack; exit 0 ;;
  --main) [ "${ROOFLINE_SGLANG_DRIVER:-}" = 1 ] || { echo "use: run_sglang.sh RESDIR"; exit 2; } ;;
  *) echo "usage: run_sglang.sh RESDIR [--wait S | --poll]"; exit 2 ;;
esac

SITE=${ROOFLINE_SGLANG_SITE:-$HOME/sglang-site}
export PYTHONPATH=$SITE HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 \
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 CUDA_MODULE_LOADING=LAZY DO_NOT_TRACK=1
export ROOFLINE_SGLANG_CASES=${ROOFLINE_SGLANG_CASES:-cases-sglang.json}
# SGLang's JIT kernels (sglang.kernels.jit, through tvm-ffi) and FlashInfer build with the image's nvcc
[ -x /usr/local/cuda/bin/nvcc ] && export CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH
STAGES=${STAGES:-T S L t}
CASES=$HERE/$ROOFLINE_SGLANG_CASES
C() { python3 -c "import json,sys; c=json.load(open('$CASES')); print(eval(sys.argv[1]))" "$1"; }
SERVE=$(C "c['serve']['model']"); TINY=$(C "c['serve_tiny']['model']"); SERVE2=$(C "c.get('serve2', {}).get('model', '')")
stage() { echo "$1 $(date -u +%T)" >> "$R/stages.log"; }
end_server() {  # end_server NAME: the process group serve_sglang.sh recorded, in case its own end was cut short
  [ -f "$R/$1-server.pid" ] && kill -KILL -"$(cat "$R/$1-server.pid")" 2>/dev/null; sleep 2
}
LAT=$(C "' '.join(c.get('lat_models', [c['serve']['model']]))")
DIRS=$(C "' '.join(sorted({c['models'][m].get('dir', m) for m in c.get('lat_models', [])} | {c['serve']['model'], c['serve_tiny']['model']} | ({c['serve2']['model']} if 'serve2' in c else set())))")
run_lat() {  # run_lat NAME
  local to dir; to=$(C "c['models']['$1'].get('timeout_s', 360)"); dir=$(C "c['models']['$1'].get('dir', '$1')")
  setsid timeout "$to" python3 "$HERE/lat_sglang.py" "$HOME/models/$dir" "$1" "$R/$1-lat.json" > "$R/$1-lat.log" 2>&1 &
  local p=$!; wait $p; echo "lat $1 rc $?"; kill -KILL -$p 2>/dev/null; sleep 3
  grep -E "SERVER_INFO|step=|prefill P=|profile B=|KV Cache|max_total_num_tokens|Error|error" "$R/$1-lat.log" | cut -c1-300 | tail -20
}
{
stage "start pid $$"
stage E
{ echo "== env $(date -u +%FT%TZ) sha $(cat "$ROOT/.sha" 2>/dev/null || git -C "$ROOT" rev-parse HEAD 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  for m in torch triton transformers tokenizers sglang sgl_kernel flashinfer xgrammar tvm_ffi; do
    python3 -W ignore -c "import $m; print('$m', $m.__version__)" 2>&1 | tail -1
  done
  python3 -c "import sys, torch; print('python', sys.version.split()[0], 'cuda', torch.version.cuda)"
  echo "nvcc: $(command -v nvcc) $(nvcc --version 2>/dev/null | tail -2 | tr '\n' ' ')"
  echo "ninja: $(command -v ninja) c++: $(command -v c++)"
  echo "CUDA_HOME=${CUDA_HOME:-unset} ROOFLINE_SGLANG_SITE=$SITE"
  cat ~/stash-sgl/check_reqs.log 2>/dev/null | grep -E "FAIL|failures"
  echo "host probe: $(python3 "$HERE/host_probe.py")"; lscpu | grep -E "Model name|^CPU\(s\)"; free -g | head -2
} > "$R/env.log" 2>&1
cat "$R/env.log"
mkdir -p "$HOME/models"
(cd "$ROOT" && PYTHONPATH=$ROOT python3 -m validate.engines.models "$HOME/models" $DIRS)
stage F
timeout 180 python3 "$HERE/sglang_smoke.py" > "$R/fa3-smoke.log" 2>&1
cat "$R/fa3-smoke.log"
if ! grep -q FA3_OK "$R/fa3-smoke.log" && [ -z "${ROOFLINE_SGLANG_ATTN:-}" ]; then
  export ROOFLINE_SGLANG_ATTN=flashinfer; stage "F fallback flashinfer"
  echo "FA3 smoke test failed: ROOFLINE_SGLANG_ATTN=flashinfer from here on"
fi
for s in $STAGES; do
  stage "$s begin"
  case $s in
    T) ROOFLINE_SGLANG_PORT=30001 timeout 600 bash "$HERE/serve_sglang.sh" "$HOME/models/$TINY" "$TINY" serve_tiny "$R"
       rc=$?; echo "serve $TINY rc $rc"
       # the server never came up on SGLang's default backend (FA3): once more on FlashInfer
       if [ $rc = 3 ] && [ -z "${ROOFLINE_SGLANG_ATTN:-}" ]; then
         export ROOFLINE_SGLANG_ATTN=flashinfer; stage "T retry flashinfer"
         mv "$R/$TINY-server.log" "$R/$TINY-server-fa3.log"
         end_server "$TINY"
         ROOFLINE_SGLANG_PORT=30001 timeout 600 bash "$HERE/serve_sglang.sh" "$HOME/models/$TINY" "$TINY" serve_tiny "$R"
       fi
       end_server "$TINY" ;;
    t) run_lat "$TINY" ;;
    S) timeout 900 bash "$HERE/serve_sglang.sh" "$HOME/models/$SERVE" "$SERVE" serve "$R"; echo "serve $SERVE rc $?"
       end_server "$SERVE" ;;
    S2) [ -n "$SERVE2" ] || { echo "S2: the cases file has no serve2"; continue; }
        ROOFLINE_SGLANG_PORT=30002 timeout 900 bash "$HERE/serve_sglang.sh" "$HOME/models/$SERVE2" "$SERVE2" serve2 "$R"
        echo "serve $SERVE2 rc $?"; end_server "$SERVE2" ;;
    L) for m in $LAT; do stage "L $m"; run_lat "$m"; done ;;
    M) setsid timeout 300 python3 "$HERE/micro_sglang.py" "$R/micro.json" > "$R/micro.log" 2>&1 &
       p=$!; wait $p; echo "micro rc $?"; kill -KILL -$p 2>/dev/null; tail -40 "$R/micro.log" ;;
    X) setsid timeout 120 python3 "$HERE/micro_sglang.py" "$R/micro-extend.json" extend > "$R/micro-extend.log" 2>&1 &
       p=$!; wait $p; echo "micro extend rc $?"; kill -KILL -$p 2>/dev/null; tail -60 "$R/micro-extend.log" ;;
    O) setsid timeout 420 python3 -m sglang.bench_one_batch --model-path "$HOME/models/$SERVE" --load-format dummy \
         --dtype bfloat16 ${ROOFLINE_SGLANG_ATTN:+--attention-backend $ROOFLINE_SGLANG_ATTN} \
         --batch-size 1 16 64 256 --input-len 1024 --output-len 64 --result-filename "$R/$SERVE-one-batch.jsonl" \
         > "$R/$SERVE-one-batch.log" 2>&1 &
       p=$!; wait $p; echo "one_batch rc $?"; kill -KILL -$p 2>/dev/null; tail -20 "$R/$SERVE-one-batch.log" ;;
  esac
  stage "$s end"
done
stage "ALL_DONE attention=${ROOFLINE_SGLANG_ATTN:-default}"
} > "$R/driver.log" 2>&1
