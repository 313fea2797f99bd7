#!/bin/bash
# llama.cpp run 11 on one H200: mechanisms 19-21 on Q4_K_M weights (llamacpp_cases_run11.json), judged before the run
# (h200-llamacpp-run11-predicted.json). The detached driver (detach.sh), run 4's source payload (.payload/l0).
#   bash llamacpp_run11.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run11.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages: U unpack (~10), B llama-server + llama-quantize -j 16 (<=480, the F16 model beside it), Q the Q4_K_M file
#   (~60), P the server (-np 8, one KV stream a slot, --cache-ram 0): the pinned sets (set-split-K.json), the lone
#   prompts (lone-split-P.json), run 1's r8 (serve-r8.json); its log server-split.log.gz                                              ~60
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run11.json
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-server llama-quantize" llama-server llama-quantize

stage Q
QM=$HOME/models/llama31-8b-$(C "c['quant']").gguf
timeout 240 $BIN/llama-quantize $MODEL $QM $(C "c['quant']") 16 > $R/quant.log 2>&1
tail -2 $R/quant.log
[ -f $QM ] || fail Q

S="c['serve']"
stage P
MODEL=$QM  # the server serves the quantized file
if llamacpp_server 60 $R/server-split.log -c $(C "$S['c']") -np $(C "$S['np']") $(C "dict($S['servers'])['split']"); then
  llamacpp_slot_sets split
  for p in $(C "' '.join(map(str, $S['lone_prompts']))"); do
    timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/lone-split-$p.json --prompt $p --output $(C "$S['lone_output']") \
      --requests $(C "$S['lone_repeats']") --seed $p --concurrency 1
  done
  llamacpp_serve_runs
  stop
fi
gzip -n -f $R/server-split.log
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
