#!/bin/bash
# llama.cpp run 5 on one H200: a kernel timeline of decode steps and prompts (cupti_trace.c, CUPTI's activity API
# through CUDA_INJECTION64_PATH: the machine has no Nsight Systems). llamacpp_cases_run5.json; llamacpp_trace.py
# predicts (before the run) and compares. The detached driver (detach.sh), run 4's source payload (.payload/l0
# llamacpp-src.tar.xz in ~/stash).
#   bash llamacpp_run5.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run5.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log):
#   U  unpack the source payload (sha256 checked)                                                               ~10
#   B  CUDA build of the cases' targets, -j 16 (G, the F16 model, beside it)                                  <=420
#   T  the tracer (cupti_build.sh: gcc against the machine's CUPTI, its newest CUpti_ActivityKernelN)             ~2
#   Q  per type but F16: llama-quantize from the F16 GGUF, 16 threads                                            ~30
#   D  per type: llama-batched-bench at the cases' decode (batched-TYPE.log, untraced), then the same traced
#      (trace-TYPE-dec.tsv.xz) and, F16 only, traced with GGML_CUDA_DISABLE_GRAPHS=1 (nograph-TYPE-dec.tsv.xz)   ~40
#   P  per type: llama-bench -p the cases' prefill -n 0 -r prefill_reps, untraced (bench-TYPE.json) and traced  ~30
#   S  kernel_trace.py summary of each trace per batch size (its logits copy: B x 128,256 x 4 bytes)              ~20
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
source "$(dirname "$0")/cupti_build.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run5.json  # LLAMACPP_CASES=llamacpp_cases_run5b.json: run 5b
llamacpp_unpack
llamacpp_build_model 420 16 OFF "$(C "' '.join(c['targets'])")" llama-quantize llama-batched-bench llama-bench

stage T
TRACER=$HOME/lcpp/libcupti_trace.so
cupti_build $TRACER $R || fail T

NPL=$(C "','.join(map(str, c['decode']['npl']))")
PP=$(C "','.join(map(str, c['prefill']))")
bb() { timeout 150 $BIN/llama-batched-bench -m $1 -ngl $NGL -c $(C "c['decode']['c']") -b 2048 -ub 512 \
  -npp $(C "c['decode']['npp']") -ntg $(C "c['decode']['ntg']") -npl $NPL; }
lb() { timeout 150 $BIN/llama-bench -m $1 -ngl $NGL -p $PP -n 0 -r $(C "c['prefill_reps']") -o json; }
traced() { local out=$1; shift; CUDA_INJECTION64_PATH=$TRACER CUPTI_TRACE_OUT=$out "$@"; xz -T 4 -f $out; }

for q in $(C "' '.join(c['quants'])"); do
  QM=$HOME/models/llama31-8b-$q.gguf
  if [ $q = F16 ]; then QM=$MODEL; else
    stage "Q-$q"
    timeout 240 $BIN/llama-quantize $MODEL $QM $q 16 > $R/quant-$q.log 2>&1
    tail -2 $R/quant-$q.log
    [ -f $QM ] || continue
  fi
  stage "D-$q"
  bb $QM > $R/batched-$q.log 2>&1
  traced $R/trace-$q-dec.tsv bb $QM > $R/batched-$q-traced.log 2>&1
  [ $q = F16 ] && [ "$(C "c.get('nograph', True)")" = True ] && \
    GGML_CUDA_DISABLE_GRAPHS=1 traced $R/nograph-$q-dec.tsv bb $QM > $R/batched-$q-nograph.log 2>&1
  grep -E "^\|" $R/batched-$q.log $R/batched-$q-traced.log $R/batched-$q-nograph.log 2>/dev/null | grep -v -- "---"
  if [ -n "$PP" ]; then
    stage "P-$q"
    lb $QM > $R/bench-$q.json 2> $R/bench-$q.log
    traced $R/trace-$q-pp.tsv lb $QM > $R/bench-$q-traced.json 2> $R/bench-$q-traced.log
    grep -o '"avg_ts": [0-9.]*' $R/bench-$q.json $R/bench-$q-traced.json
  fi
  [ $q = F16 ] || rm -f $QM
  stage "S-$q"
  for b in $(C "' '.join(map(str, c['decode']['npl']))"); do
    for v in trace nograph; do
      [ -f $R/$v-$q-dec.tsv.xz ] || continue
      (cd $ROOT && python3 -m validate.engines.kernel_trace summary $R/$v-$q-dec.tsv.xz --bytes $(( b * 513024 )) \
         --json $R/$v-$q-b$b.json > /dev/null) || echo "summary $v $q B $b failed"
    done
  done
  [ -z "$PP" ] || (cd $ROOT && python3 -m validate.engines.kernel_trace summary $R/trace-$q-pp.tsv.xz --bytes 513024 \
     --skip 1 --json $R/trace-$q-pp.json > /dev/null) || echo "summary pp $q failed"
done
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
