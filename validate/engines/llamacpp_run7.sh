#!/bin/bash
# llama.cpp run 7 on one H200: llama-server traced (cupti_trace.c through CUDA_INJECTION64_PATH), run 1's closed loop of
# 4 clients on 8 slots with the host prompt cache off and on (llamacpp_cases_run7.json): run 6 found the cache-off
# server's decode steps ~5 ms longer while idle slots hold a finished request's KV. The prediction committed before the
# run (h200-llamacpp-run7-predicted.json); the detached driver (detach.sh), run 4's source payload (.payload/l0).
#   bash llamacpp_run7.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run7.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages: U unpack (~10), B llama-server's CUDA build -j 16 (<=480, the model beside it), T the tracer (~2),
#   S-VARIANT a traced server per variant, the cases' runs against it (serve-VARIANT-RUN.json, serve-VARIANT.log.gz,
#   trace-VARIANT.tsv.xz), then kernel_trace.py's summary at the steps of 4 outputs (trace-VARIANT-b4.json)      ~40 each
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
source "$(dirname "$0")/cupti_build.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run7.json  # LLAMACPP_CASES=llamacpp_cases_run8.json: run 8
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-server" llama-server

stage T
TRACER=$HOME/lcpp/libcupti_trace.so
cupti_build $TRACER $R || fail T

for spec in $(C "' '.join(f'{n}:{f}'.replace(' ', '+') for n, f in c['serve']['variants'])"); do
  IFS=: read -r v flags <<< "$spec"
  stage "S-$v"
  CUDA_INJECTION64_PATH=$TRACER CUPTI_TRACE_OUT=$R/trace-$v.tsv setsid $BIN/llama-server -m $MODEL -ngl $NGL \
    --host 127.0.0.1 --port $PORT --seed 0 --metrics -lv 4 -c $(C "c['serve']['c']") -np $(C "c['serve']['np']") \
    ${flags//+/ } > $R/serve-$v.log 2>&1 &
  SPID=$!
  wait_healthy $SPID $R/serve-$v.log $PORT 60 || continue
  for run in $(C "' '.join(':'.join(map(str, r)) for r in c['serve']['runs'])"); do
    IFS=: read -r name rate conc n seed <<< "$run"
    mode=(--rate "$rate"); [ "$conc" != 0 ] && mode=(--concurrency "$conc")
    timeout 150 python3 $HERE/llamacpp_client.py $PORT $R/serve-$v-$name.json --prompt $(C "c['serve']['prompt']") \
      --output $(C "c['serve']['output']") --requests "$n" --seed "$seed" "${mode[@]}"
  done
  kill -INT -$SPID 2>/dev/null; sleep 8; kill -KILL -$SPID 2>/dev/null; sleep 1
  gzip -n -f $R/serve-$v.log
  ls -la $R/trace-$v.tsv 2>/dev/null
  (cd $ROOT && python3 -m validate.engines.kernel_trace summary $R/trace-$v.tsv --bytes $(( 4 * 513024 )) \
     --json $R/trace-$v-b4.json > /dev/null) || echo "summary $v failed"
  (cd $ROOT && python3 -m validate.engines.kernel_trace gaps $R/trace-$v.tsv --bytes $(( 4 * 513024 )) \
     --min-kernels 600 --steps 400 > $R/gaps-$v-b4.json) || echo "gaps $v failed"
  # the device-to-host copies by size (a step's logits: rows x 513,024 bytes), then a summary per row count seen
  awk -F'\t' '$1 == "M" && $7 == 2 {n[$6]++} END {for (b in n) print b, n[b]}' $R/trace-$v.tsv | sort -n \
    > $R/copies-$v.txt
  for rows in $(awk '$1 % 513024 == 0 && $2 >= 20 {print $1 / 513024}' $R/copies-$v.txt); do
    [ -f $R/trace-$v-b$rows.json ] && continue
    (cd $ROOT && python3 -m validate.engines.kernel_trace summary $R/trace-$v.tsv --bytes $(( rows * 513024 )) \
       --json $R/trace-$v-b$rows.json > /dev/null) || echo "summary $v b$rows failed"
  done
  if [ "$(C "c.get('keep_traces', True)")" = True ]; then xz -T 8 -f $R/trace-$v.tsv; else rm -f $R/trace-$v.tsv; fi
done
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
