#!/bin/bash
# llama.cpp run 14 on one H200: llama-server's own host work on a model of negligible GPU work (A), and timing
# mechanism 22 on llama-batched-bench's prompts (B). llamacpp_cases_run14.json; the prediction (llamacpp_host.py
# predict14) committed before the run; the detached driver (detach.sh), run 4's source payload (.payload/l0).
#   bash llamacpp_run14.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run14.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log):
#   U  unpack the source payload (sha256 checked)                                                               ~10
#   B  CUDA build of llama-server and llama-batched-bench, -j 16 (G, the F16 8B, beside it)                    <=480
#   T  the tiny model's GGUF (tiny.log)                                                                          ~15
#   A-V per tiny server variant V: closed loops of each concurrency (tiny-V-cN.json), then (host only) the lone
#      prompts one at a time (lone-P.json); the server's log (server-tiny-V.log.gz, -lv 4)                    ~60 each
#   D-V llama-batched-bench on the 8B per variant V (split, kvu), repeats (batched-V-K.log)                     ~40 each
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run14.json
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-server llama-batched-bench" llama-server llama-batched-bench

stage T
TINY=$HOME/models/tiny-llama-f16.gguf
(cd $ROOT && timeout 120 python3 -m validate.engines.llamacpp_model $SRC/gguf-py $SRC/models/ggml-vocab-llama-bpe.gguf \
   $TINY $(C "c['tiny']['model']")) > $R/tiny.log 2>&1 || fail T

T="c['tiny']"
BIG=$MODEL
MODEL=$TINY
for v in $(C "' '.join(x[0] for x in $T['servers'])"); do
  stage "A-$v"
  llamacpp_server 60 $R/server-tiny-$v.log -c $(C "$T['c']") -np $(C "$T['np']") \
    $(C "{x[0]: x[1] for x in $T['servers']}['$v']") || continue
  extra=$(C "{x[0]: x[2] for x in $T['servers']}['$v']")
  for n in $(C "' '.join(map(str, $T['concurrency']))"); do
    timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/tiny-$v-c$n.json --prompt $(C "$T['prompt']") \
      --output $(C "$T['output']") --requests $((n * $(C "$T['rounds']"))) --seed $n --concurrency $n $extra
  done
  if [ "$v" = host ]; then
    for p in $(C "' '.join(map(str, $T['lone_prompts']))"); do
      timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/lone-$p.json --prompt $p --output $(C "$T['lone_output']") \
        --requests $(C "$T['lone_repeats']") --seed $((100 + p)) --concurrency 1
    done
  fi
  sleep 1
  stop
  gzip -n -f $R/server-tiny-$v.log
done
MODEL=$BIG

llamacpp_batched_variants
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
