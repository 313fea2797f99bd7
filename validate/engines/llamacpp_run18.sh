#!/bin/bash
# llama.cpp run 18 on one H200 (one short call, no llama.cpp build): a fresh process's first cuBLAS GEMM against its
# steady ones (cublas_first_call.cu), three fresh processes with CUDA's default lazy module loading and one with
# CUDA_MODULE_LOADING=EAGER; the prediction h200-llamacpp-run18-predicted.json committed before.
#   bash validate/engines/llamacpp_run18.sh RESDIR       (writes RESDIR/first-call-*.json, env.log; tars into $OUT)
#   bash validate/engines/llamacpp_run18.sh RESDIR ggml  (run 18b: three fresh processes of the program's ggml mode,
#                                                         first-call-ggml-K.json; h200-llamacpp-run18b-predicted.json)
set -u
R=$1; mkdir -p $R
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH=/usr/local/cuda/bin:$PATH
{ echo "== $(date -u +%FT%TZ) sha $(cat $HERE/../../.sha 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; nvcc --version | tail -2; } \
  > $R/env.log 2>&1
nvcc -O2 -arch=sm_90a -o $R/cublas_first_call $HERE/cublas_first_call.cu -lcublas > $R/build.log 2>&1 \
  || { cat $R/build.log; exit 1; }
if [ "${2:-}" = ggml ]; then
  for i in 1 2 3; do timeout 60 $R/cublas_first_call ggml > $R/first-call-ggml-$i.json 2>> $R/run.log; done
else
  for i in 1 2 3; do timeout 60 $R/cublas_first_call > $R/first-call-lazy-$i.json 2>> $R/run.log; done
  CUDA_MODULE_LOADING=EAGER timeout 60 $R/cublas_first_call > $R/first-call-eager-1.json 2>> $R/run.log
fi
rm -f $R/cublas_first_call
cat $R/first-call-*.json
[ -n "${OUT:-}" ] && tar czf $OUT/$(basename $R).tgz -C $(dirname $R) $(basename $R)
