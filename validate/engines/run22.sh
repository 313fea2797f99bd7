#!/bin/bash
# Run 22 on one H200 (session 27): vLLM's served Qwen3-30B-A3B at rates run 20 did not serve, judged on the model after
# the one-call replay's fixed cost left the FA3 decode and fused-MoE laws. Prediction h200-vllm-run22-predicted.json
# committed before (run22.py).
#   K1: serve_tiny.sh (tiny-llama, concurrency 1): this host's speed, before.
#   S:  Qwen3-30B-A3B (dummy weights) on `vllm serve` (max_model_len 4096, defaults otherwise), `vllm bench serve
#       --dataset-name random --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64 --ignore-eos
#       --num-prompts 240`: cold (seed 201, 6 req/s: the first traffic, compiles), r6 (203, 6 req/s), r12 (204,
#       12 req/s), c16 (205, --max-concurrency 16, rate inf).
# After unpack_payload.sh: bash run22.sh RESDIR (detached), then bash run22.sh RESDIR --wait S (detach.sh)
set -u
source "$(dirname "$0")/detach.sh"
detach "$0" "$@"
qwen3_k1
stage S
serve_model 400
served_runs cold:201:6:0 r6:203:6:0 r12:204:12:0 c16:205:inf:16
kill -TERM -$SPID; sleep 5; kill -KILL -$SPID 2>/dev/null
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
