#!/bin/bash
# Run 12 on two H200s of one host (session 19; cases-run12.json, prediction h200x2-vllm-run12-predicted.json committed
# before it):
#   L: link_probe.py (the peer copy and NCCL all-reduce by themselves).
#   T: lat.py at tp 2 on Llama-3.1-8B and Llama-3.3-70B (run.sh; the engine's custom all-reduce, symmetric-memory
#      all-reduce off: it needs NVLink multicast, which this machine keeps off).
#   X: serve_pd.sh: disaggregated prefill (GPU 0) / decode (GPU 1) through the NixlConnector, run 2's served shape.
# Usage: run12.sh RESDIR  (detached: setsid nohup bash validate/engines/run12.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $HOME/models $HOME/bin
echo "start $(date -u +%T) pid $$" > $R/stages.log
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1 VLLM_ALLREDUCE_USE_SYMM_MEM=0 VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm
export ROOFLINE_ENGINE_CASES=cases-run12.json
{
echo "== env $(date -u +%FT%TZ) sha $(cat $ROOT/.sha 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
nvidia-smi topo -m
python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__, 'gpus', torch.cuda.device_count())"
python3 -c "import nixl._api as a; print('nixl', a.nixl_agent)" 2>&1 | tail -1
lscpu | grep -E "Model name|^CPU\(s\)"
} > $R/env.log 2>&1
echo "L $(date -u +%T)" >> $R/stages.log
timeout 150 python3 $HERE/link_probe.py $R/link_probe.json > $R/link_probe.log 2>&1
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Llama-3.1-8B Llama-3.3-70B) > $R/models.log 2>&1
echo "T $(date -u +%T)" >> $R/stages.log
SKIP_MODELS=1 SKIP_MICRO=1 SKIP_SERVE=1 bash $HERE/run.sh $R Llama-3.1-8B Llama-3.3-70B > $R/driver-T.log 2>&1
echo "X $(date -u +%T)" >> $R/stages.log
setsid timeout 600 bash $HERE/serve_pd.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R > $R/driver-X.log 2>&1
echo "RUN12_DONE $(date -u +%T)" >> $R/stages.log
