#!/bin/bash
# llama.cpp run 4 on one H200: GGUF-quantized weights. llama-quantize turns run 1's dummy F16 Llama-3.1-8B into each
# file type of llamacpp_cases_run4.json; per type the start-up log's buffers (CUDA0 / CPU_Mapped model buffer, KV,
# compute), batched-bench's decode and prefill steps, llama-bench's pp and tg; then test-backend-ops on MUL_MAT with
# quantized weights and the small ops of a decode step (llamacpp_quant.py testfile). The detached driver (detach.sh),
# payloads as run 2's (.payload/l0 llamacpp-src.tar.xz, .payload/l1 llamacpp-ops.tar.xz, in ~/stash).
#   bash llamacpp_run4.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run4.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log; budgets in seconds):
#   U  unpack both payloads (sha256 checked) into ~/lcpp/llama.cpp; tests/CMakeLists.txt of one target         ~10
#   B  CUDA build of llama-quantize, llama-bench, llama-batched-bench, test-backend-ops (the cases' `targets`
#      where given: run 4b's llama-quantize and llama-batched-bench alone), -j 16                          <=420
#   G  (beside B) the F16 model, as run 1's                                                                   -
#   Q  per type: llama-quantize F16 -> TYPE, 16 threads (quant-TYPE.log: every tensor's type and size)    ~30-90
#   D  per type: llama-batched-bench -lv 4 (batched-TYPE.log: buffers and the steps)                          ~30
#   P  per type: llama-bench pp and tg, -r 3, JSON (bench-TYPE-pp.json, bench-TYPE-tg.json), where the cases
#      have `prefill` and llama-bench is built                                                                 ~30
#   O  (where the cases have `ops`) test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} --test-file ops-cases.txt (llamacpp_quant.py
#      testfile): ops.txt                                       what is left of ${LLAMACPP_OPS_LIMIT:-950} s
# LLAMACPP_BIN (a built bin/: no U, B), LLAMACPP_MODEL (an F16 GGUF: no G), LLAMACPP_NGL, LLAMACPP_OPS_BACKEND and
# LLAMACPP_CASES run the same stages on the CPU machine (the check, README).
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run4.json
T_START=$(date +%s)
llamacpp_unpack ops
# the cases' targets (run 4b: llama-quantize and llama-batched-bench alone); P and O run where their tools are built
TARGETS=$(C "' '.join(c.get('targets', ['test-backend-ops', 'llama-quantize', 'llama-bench', 'llama-batched-bench']))")
llamacpp_build_model 420 16 ON "$TARGETS" llama-quantize llama-batched-bench

for q in $(C "' '.join(c['quants'])"); do
  QM=$HOME/models/llama31-8b-$q.gguf
  stage "Q-$q"
  timeout 240 $BIN/llama-quantize $MODEL $QM $q 16 > $R/quant-$q.log 2>&1
  tail -3 $R/quant-$q.log
  [ -f $QM ] || continue
  stage "D-$q"
  timeout 120 $BIN/llama-batched-bench -m $QM -ngl $NGL -c $(C "c['batched']['c']") -b 2048 -ub 512 -lv 4 \
    -npp $(C "c['batched']['npp']") -ntg $(C "c['batched']['ntg']") \
    -npl $(C "','.join(map(str, c['batched']['npl']))") > $R/batched-$q.log 2>&1
  grep -E "model buffer size|^\|" $R/batched-$q.log
  [ -x $BIN/llama-bench ] && [ "$(C "'prefill' in c")" = True ] || { rm -f $QM; continue; }
  stage "P-$q"
  timeout 120 $BIN/llama-bench -m $QM -ngl $NGL -p $(C "','.join(map(str, c['prefill']))") -n 0 -r 3 -o json \
    > $R/bench-$q-pp.json 2> $R/bench-$q-pp.log
  timeout 90 $BIN/llama-bench -m $QM -ngl $NGL -p 0 -n $(C "c['tg']['n']") \
    -d $(C "','.join(map(str, c['tg']['depth']))") -r 3 -o json > $R/bench-$q-tg.json 2> $R/bench-$q-tg.log
  grep -o '"avg_ts": [0-9.]*' $R/bench-$q-pp.json $R/bench-$q-tg.json
  rm -f $QM
done

[ "$(C "'ops' in c")" = True ] || { echo "ALL_DONE $(date -u +%T)" >> $R/stages.log; exit 0; }
stage O
(cd $ROOT && python3 -m validate.engines.llamacpp_quant testfile $SRC/ggml/include/ggml.h $R/ops-cases.txt \
  --cases $(basename $CASES)) || fail O
[ -x $BIN/test-backend-ops ] || { tail -20 $R/build.log; fail O; }
left=$(( T_START + ${LLAMACPP_OPS_LIMIT:-950} - $(date +%s) ))
timeout $(( left > 30 ? left : 30 )) $BIN/test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} \
  --test-file $R/ops-cases.txt > $R/ops.txt 2> $R/ops.log
echo "test-backend-ops rc $?" >> $R/ops.log
grep -c "us/run" $R/ops.txt
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
