#!/bin/bash
# Run 20 on one H200 (session 26): does the host calibration a user does (serve_tiny.sh: the tiny server's TTFT at
# concurrency 1, timing mechanism 11's --host-speed) carry vLLM's served MoE, whose prefills past 512 tokens run
# eagerly on the host (mechanism 8's eager law)? Prediction h200-vllm-run20-predicted.json committed before (run20.py).
#   K1: serve_tiny.sh (tiny-llama, concurrency 1 and 16) and host_probe.py: this host's speed, before.
#   S:  Qwen3-30B-A3B (dummy weights) on `vllm serve` (max_model_len 4096, defaults otherwise), then `vllm bench serve
#       --dataset-name random --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64 --ignore-eos
#       --num-prompts 240`: cold (seed 201, 4 req/s: the first traffic, compiles), warm (202, 4 req/s: run 19's warm
#       run again), r8 (203, 8 req/s), r16 (204, 16 req/s), c32 (205, --max-concurrency 32, rate inf).
#   K2: serve_tiny.sh again (tag 2): the host's speed after.
#   E:  lat.py on tiny-qwen3moe-48 (cases-run20.json: prefill 256-4,096): the eager law's own narrow input on this host.
# After unpack_payload.sh: bash run20.sh RESDIR (detached), then bash run20.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Qwen3-30B-A3B tiny-llama \
  tiny-qwen3moe-48) > $R/models.log 2>&1
probe() { python3 $HERE/host_probe.py >> $R/host-probe.jsonl 2>&1; }
stage K1; probe
CONCS="1 16" timeout 450 bash $HERE/serve_tiny.sh $HOME/models/tiny-llama $R > $R/driver-K1.log 2>&1; probe
M=$HOME/models/Qwen3-30B-A3B
PORT=8000
stage S
serve_model 240
served_runs cold:201:4:0 warm:202:4:0 r8:203:8:0 r16:204:16:0 c32:205:inf:32
kill -TERM -$SPID; sleep 5; kill -KILL -$SPID 2>/dev/null
stage K2; probe
CONCS="1 16" timeout 450 bash $HERE/serve_tiny.sh $HOME/models/tiny-llama $R 2 > $R/driver-K2.log 2>&1; probe
stage E
VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random ROOFLINE_ENGINE_CASES=cases-run20.json timeout 300 python3 $HERE/lat.py $HOME/models/tiny-qwen3moe-48 \
  tiny-qwen3moe-48 $R/tiny-qwen3moe-48-lat.json > $R/tiny-qwen3moe-48-lat.log 2>&1; probe
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
