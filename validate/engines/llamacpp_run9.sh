#!/bin/bash
# llama.cpp run 9 on one H200: timing mechanism 20 (llama-server's slots, one KV stream each) judged out of sample, and
# the server's own prompt time for lone prompts (mechanism 19). llamacpp_cases_run9.json; the prediction
# (llamacpp_slots.py predict9) committed before the run; the detached driver (detach.sh), run 4's source payload
# (.payload/l0 llamacpp-src.tar.xz in ~/stash).
#   bash llamacpp_run9.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run9.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log):
#   U  unpack the source payload (sha256 checked)                                                               ~10
#   B  CUDA build of llama-server, -j 16 (G, the F16 model, beside it)                                        <=480
#   P-V per server variant V (split: -np 8, one stream a slot; kvu: -np 8 -kvu): the slot sets, 4 clients pinned by
#      id_slot (set-V-K.json), then (split only) the lone prompts one at a time (lone-V-P.json); the server's log
#      (server-V.log.gz: -lv 4, each task's slot and its own prompt and decode times)                       ~60 each
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run9.json
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-server" llama-server

S="c['serve']"
sets_and_lone() {
  local v=$1 p
  llamacpp_slot_sets $v
  if [ "$v" = split ]; then
    for p in $(C "' '.join(map(str, $S['lone_prompts']))"); do
      timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/lone-$v-$p.json --prompt $p \
        --output $(C "$S['lone_output']") --requests $(C "$S['lone_repeats']") --seed $p --concurrency 1
    done
  fi
  sleep 1
}
llamacpp_each_server sets_and_lone
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
