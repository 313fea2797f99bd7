#!/bin/bash
# llama.cpp run 6 on one H200: llama-server's host prompt cache. Before a new task the server saves every idle slot's
# state (its prompt + output tokens' KV) to host memory (--cache-ram, 8192 MiB by default; run 1's log: "saving idle slot
# to prompt cache", 79.9 MiB in ~48 ms, the whole server loop waiting). llamacpp_cases_run6.json; the prediction
# (llamacpp_cache.py predict) committed before the run; the detached driver (detach.sh), run 4's source payload
# (.payload/l0 llamacpp-src.tar.xz in ~/stash).
#   bash llamacpp_run6.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run6.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log):
#   U  unpack the source payload (sha256 checked)                                                               ~10
#   B  CUDA build of llama-server, -j 16 (G, the F16 model, beside it)                                        <=480
#   V  per KV type: llama-server -np 1 -lv 4 -ctk T -ctv T, the save cases one after another (save-T.json,
#      save-T.log: the server's own timestamps of each save)                                                      ~40
#   S  run 1's served runs with --cache-ram 0 (serve-RUN.json, serve.log)                                          ~90
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run6.json
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-server" llama-server

for t in $(C "' '.join(c['save']['kv_types'])"); do
  stage "V-$t"
  llamacpp_server 60 $R/save-$t.log -c $(C "c['save']['c']") -np $(C "c['save']['np']") -ctk $t -ctv $t || continue
  i=0
  for p in $(C "' '.join(map(str, c['save']['prompts']))"); do
    i=$((i + 1))
    timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/save-$t-$i-p$p.json --prompt $p \
      --output $(C "c['save']['output']") --requests 1 --seed $i --concurrency 1 > /dev/null
  done
  sleep 1
  stop
  grep -c "saving idle slot" $R/save-$t.log
done

stage S
llamacpp_server 60 $R/serve.log -c $(C "c['serve']['c']") -np $(C "c['serve']['np']") $(C "c['serve']['flags']") || fail S
llamacpp_serve_runs
stop
gzip -n -f $R/serve.log
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
