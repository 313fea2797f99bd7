#!/bin/bash
# llama.cpp run 12 on one H200: the same Poisson sends on an -np 16 server with one KV stream a slot and with -kvu
# (llamacpp_cases_run12.json), predicted before the run (h200-llamacpp-run12-predicted.json). The detached driver
# (detach.sh), run 4's source payload (.payload/l0 in ~/stash).
#   bash llamacpp_run12.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run12.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages: U unpack (~10), B llama-server -j 16 (<=480, the F16 model beside it), P-V per server variant: the run's
#   sends (serve-V.json), the server's log (server-V.log.gz)                                                    ~50 each
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run12.json
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-server" llama-server

S="c['serve']"
sends() {
  IFS=: read -r run rate conc n seed <<< "$(C "':'.join(map(str, $S['run']))")"
  timeout 90 python3 $HERE/llamacpp_client.py $PORT $R/serve-$1.json --prompt $(C "$S['prompt']") \
    --output $(C "$S['output']") --requests "$n" --seed "$seed" --rate "$rate"
}
llamacpp_each_server sends
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
