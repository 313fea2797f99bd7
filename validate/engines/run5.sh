#!/bin/bash
# Run 5 on a 4 x H200 box, one driver per GPU (validate/notes/2026-11-29-vllm-h200-run5.md):
#   gpu0: lat.py on the narrow models of cases-run5.json (prefill 256 .. 4,096: the eager step's host cost per layer)
#   gpu1: prof.py of the same narrow models' prefills (GPU kernel time and kernel count beside the wall)
#   gpu2: spec_step.py: a draft pass's kernels by name (tiny target, Llama-3.2-1B draft K = 1, 3), then the 8B pair
#   gpu3: prof.py of Qwen3-30B-A3B prefill at 1,024 / 4,096 and Llama-3.1-8B at 1,024 / 2,048 (composition of the
#         eager host cost with real GPU work, at lengths no judged case uses), then admission.py
# Usage: run5.sh RESDIR  (detached: setsid nohup bash validate/engines/run5.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R/gpu0 $R/gpu1 $R/gpu2 $R/gpu3 $HOME/models
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
NARROW="tiny-llama tiny-llama-32 tiny-qwen3moe-48 tiny-dsv2-27"
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models $NARROW Qwen3-30B-A3B Llama-3.1-8B \
  Llama-3.2-1B) > $R/models.log 2>&1
prof() {  # GPU MODEL PREFILLS MAXLEN OUT
  CUDA_VISIBLE_DEVICES=$1 VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random VLLM_ENABLE_V1_MULTIPROCESSING=0 \
    PROF_MAX_MODEL_LEN=$4 PROF_PREFILL=$3 setsid timeout 300 python3 $HERE/prof.py $HOME/models/$2 $5/$2-prof.json \
    > $5/$2-prof.log 2>&1
  echo "prof $2 rc $? $(date -u +%T)"; grep -E "^PROF" $5/$2-prof.log
}
( CUDA_VISIBLE_DEVICES=0 SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 ROOFLINE_ENGINE_CASES=cases-run5.json bash $HERE/run.sh $R/gpu0 $NARROW
  echo "GPU0_DONE" >> $R/gpu0/driver.log ) &
( for M in tiny-qwen3moe-48 tiny-llama-32 tiny-dsv2-27; do prof 1 $M 256,1024,2048,4096 8192 $R/gpu1; done
  echo GPU1_DONE ) > $R/gpu1/driver.log 2>&1 &
( CUDA_VISIBLE_DEVICES=2 SKIP_MODELS=1 SPEC_TIMEOUT=560 \
    SPEC_CONFIGS=tiny-llama:-:0,tiny-llama:Llama-3.2-1B:1,tiny-llama:Llama-3.2-1B:3,Llama-3.1-8B:Llama-3.2-1B:3 \
    bash $HERE/run_mech.sh $R/gpu2 spec; echo GPU2_DONE >> $R/gpu2/mech-driver.log ) &
( { prof 3 Qwen3-30B-A3B 1024,4096 8192 $R/gpu3; prof 3 Llama-3.1-8B 1024,2048 8192 $R/gpu3; } > $R/gpu3/driver.log 2>&1
  CUDA_VISIBLE_DEVICES=3 SKIP_MODELS=1 bash $HERE/run_mech.sh $R/gpu3 admission; echo GPU3_DONE >> $R/gpu3/driver.log ) &
wait
echo "RUN5_DONE $(date -u +%T)" > $R/done
