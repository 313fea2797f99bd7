#!/bin/bash
# Run 5 on one H200, stages in order of value (validate/notes/2026-11-29-vllm-h200-run5.md):
#   A: lat.py on the narrow models of cases-run5.json (prefill 256 .. 4,096: the eager step's host cost per layer)
#   B: lat.py on Qwen3-30B-A3B at prefill 1,024 / 4,096 (cases-run5-comp.json: how the host cost composes with real
#      GPU work, at lengths no judged case uses)
#   C: spec_step.py: a draft pass's kernels by name (tiny target; Llama-3.2-1B draft K = 1, 3)
#   D: prof.py of tiny-qwen3moe-48's prefills (GPU kernel time and kernel count beside the wall)
# Usage: run5.sh RESDIR  (detached: setsid nohup bash validate/engines/run5.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $HOME/models
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
NARROW="tiny-llama tiny-llama-32 tiny-qwen3moe-48 tiny-dsv2-27"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models $NARROW Qwen3-30B-A3B Llama-3.1-8B \
  Llama-3.2-1B) > $R/models.log 2>&1
echo "A $(date -u +%T)" > $R/stages.log
mkdir -p $R/narrow $R/comp $R/spec
SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 ROOFLINE_ENGINE_CASES=cases-run5.json bash $HERE/run.sh $R/narrow $NARROW
echo "B $(date -u +%T)" >> $R/stages.log
SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 ROOFLINE_ENGINE_CASES=cases-run5-comp.json bash $HERE/run.sh $R/comp Qwen3-30B-A3B
echo "C $(date -u +%T)" >> $R/stages.log
SKIP_MODELS=1 SPEC_TIMEOUT=420 SPEC_CONFIGS=tiny-llama:-:0,tiny-llama:Llama-3.2-1B:1,tiny-llama:Llama-3.2-1B:3 \
  bash $HERE/run_mech.sh $R/spec spec
echo "D $(date -u +%T)" >> $R/stages.log
VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random VLLM_ENABLE_V1_MULTIPROCESSING=0 PROF_MAX_MODEL_LEN=8192 \
  PROF_PREFILL=256,1024,2048,4096 setsid timeout 200 python3 $HERE/prof.py $HOME/models/tiny-qwen3moe-48 \
  $R/narrow/tiny-qwen3moe-48-prof.json > $R/narrow/tiny-qwen3moe-48-prof.log 2>&1
echo "RUN5_DONE $(date -u +%T)" >> $R/stages.log
