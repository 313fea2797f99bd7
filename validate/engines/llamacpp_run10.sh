#!/bin/bash
# llama.cpp run 10 on one H200: the graph rebuild a split step pays (LLAMA_GRAPH_REUSE_DISABLE=1 against reuse, in the
# server with pinned slots and in llama-batched-bench) and a traced server's lone prompts (llamacpp_cases_run10.json).
# The prediction committed before the run (h200-llamacpp-run10-predicted.json); the detached driver (detach.sh), run 4's
# source payload (.payload/l0 in ~/stash).
#   bash llamacpp_run10.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run10.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages: U unpack (~10), B llama-server + llama-batched-bench -j 16 (<=480, the model beside it),
#   N the server with LLAMA_GRAPH_REUSE_DISABLE=1: the pinned slot sets (set-noreuse-K.json, server-noreuse.log.gz) ~30
#   BB llama-batched-bench with reuse and without (batched-reuse.log, batched-noreuse.log)                          ~30
#   T the tracer; L a traced server's lone prompts (lone-P.json, trace-lone.tsv.xz, its summary at 1-row copies and
#     the gaps of its prompt steps)                                                                                 ~30
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
source "$(dirname "$0")/cupti_build.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run10.json
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-server llama-batched-bench" llama-server llama-batched-bench

S="c['serve']"
server_args() { echo -m $MODEL -ngl $NGL --host 127.0.0.1 --port $PORT --seed 0 --metrics -lv 4 \
  -c $(C "$S['c']") -np $(C "$S['np']") $(C "$S['flags']"); }

stage N
export LLAMA_GRAPH_REUSE_DISABLE=1
if llamacpp_server 60 $R/server-noreuse.log -c $(C "$S['c']") -np $(C "$S['np']") $(C "$S['flags']"); then
  llamacpp_slot_sets noreuse
  stop
fi
unset LLAMA_GRAPH_REUSE_DISABLE
gzip -n -f $R/server-noreuse.log

stage BB
bb() { timeout 120 $BIN/llama-batched-bench -m $MODEL -ngl $NGL -c $(C "c['batched']['c']") -b 2048 -ub 512 \
  -npp $(C "c['batched']['npp']") -ntg $(C "c['batched']['ntg']") -npl $(C "','.join(map(str, c['batched']['npl']))"); }
bb > $R/batched-reuse.log 2>&1
LLAMA_GRAPH_REUSE_DISABLE=1 bb > $R/batched-noreuse.log 2>&1
grep -E "^\|" $R/batched-reuse.log $R/batched-noreuse.log | grep -v -- "---"

stage T
TRACER=$HOME/lcpp/libcupti_trace.so
cupti_build $TRACER $R || fail T
stage L
CUDA_INJECTION64_PATH=$TRACER CUPTI_TRACE_OUT=$R/trace-lone.tsv setsid $BIN/llama-server $(server_args) \
  > $R/server-lone.log 2>&1 &
SPID=$!
if wait_healthy $SPID $R/server-lone.log $PORT 60; then
  for p in $(C "' '.join(map(str, $S['lone_prompts']))"); do
    timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/lone-$p.json --prompt $p --output $(C "$S['lone_output']") \
      --requests $(C "$S['lone_repeats']") --seed $p --concurrency 1
  done
fi
kill -INT -$SPID 2>/dev/null; sleep 8; kill -KILL -$SPID 2>/dev/null; sleep 1
gzip -n -f $R/server-lone.log
(cd $ROOT && python3 -m validate.engines.kernel_trace summary $R/trace-lone.tsv --bytes 513024 \
   --json $R/trace-lone-b1.json > /dev/null) || echo "summary failed"
(cd $ROOT && python3 -m validate.engines.kernel_trace gaps $R/trace-lone.tsv --bytes 513024 --min-kernels 700 \
   --steps 20 > $R/gaps-lone.json) || echo "gaps failed"
xz -T 8 -f $R/trace-lone.tsv
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
