#!/bin/bash
# llama.cpp run 13 on one H200: timing mechanism 22 (a one-stream server's attention spans every cell the stream holds)
# judged before the run. llamacpp_cases_run13.json; the prediction (llamacpp_slots.py predict13) committed before the
# run; the detached driver (detach.sh), run 4's source payload (.payload/l0 llamacpp-src.tar.xz in ~/stash).
#   bash llamacpp_run13.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run13.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log):
#   U  unpack the source payload (sha256 checked)                                                               ~10
#   B  CUDA build of llama-server, -j 16 (G, the F16 model, beside it)                                        <=480
#   P-V per server variant V (kvu: -np 4 -kvu --cache-ram 0; split: -np 4 --cache-ram 0), per phase F (fill prompt
#      length): slots 0-2 filled by one long prompt each (fill-V-F.json), the lone prompts in slot 3 one at a time
#      (lone-V-F.json), the decoding streams in slot 3 one at a time (dec-V-F.json); the server's log
#      (server-V.log.gz: -lv 4)                                                                                ~40 each
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run13.json
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-server" llama-server

S="c['serve']"
CLIENT="python3 $HERE/llamacpp_client.py"
phases() {
  local v=$1 phase name fill
  for phase in $(C "' '.join(f'{n}:{p}' for n, p in $S['phases'])"); do
    IFS=: read -r name fill <<< "$phase"
    timeout 60 $CLIENT $PORT $R/fill-$v-$name.json --prompt $fill --output $(C "$S['output_fill']") --requests 3 \
      --seed $fill --concurrency 3 --slots $(C "','.join(map(str, $S['fill_slots']))")
    timeout 60 $CLIENT $PORT $R/lone-$v-$name.json --prompt $(C "$S['lone']['prompt']") \
      --output $(C "$S['lone']['output']") --requests $(C "$S['lone']['repeats']") --seed $((11 + fill)) --concurrency 1 \
      --slots $(C "$S['probe_slot']")
    timeout 60 $CLIENT $PORT $R/dec-$v-$name.json --prompt $(C "$S['decode']['prompt']") \
      --output $(C "$S['decode']['output']") --requests $(C "$S['decode']['repeats']") --seed $((13 + fill)) --concurrency 1 \
      --slots $(C "$S['probe_slot']")
  done
  sleep 1
}
llamacpp_each_server phases
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
