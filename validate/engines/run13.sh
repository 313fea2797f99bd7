#!/bin/bash
# Run 13 on two H200s of one host (session 19; cases-run13.json, prediction h200x2-vllm-run13-predicted.json committed
# before it): A: ar_probe.py (vLLM's custom all-reduce and NCCL's in CUDA graphs); X: serve_pd.sh at 2,048 in / 128
# out, rates 2 / 8 / 12.
# Usage: run13.sh RESDIR  (detached: setsid nohup bash validate/engines/run13.sh RES > /dev/null 2>&1 &)
set -u
R=$1; HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $HOME/models $HOME/bin
echo "start $(date -u +%T) pid $$" > $R/stages.log
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1 VLLM_ALLREDUCE_USE_SYMM_MEM=0 VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm
export ROOFLINE_ENGINE_CASES=cases-run13.json
{
echo "== env $(date -u +%FT%TZ) sha $(cat $ROOT/.sha 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__, 'gpus', torch.cuda.device_count())"
} > $R/env.log 2>&1
(cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models Llama-3.1-8B) > $R/models.log 2>&1
echo "X $(date -u +%T)" >> $R/stages.log
setsid timeout 480 bash $HERE/serve_pd.sh $HOME/models/Llama-3.1-8B Llama-3.1-8B $R > $R/driver-X.log 2>&1
echo "A $(date -u +%T)" >> $R/stages.log
timeout 200 python3 $HERE/ar_probe.py $R/ar_probe.json > $R/ar_probe.log 2>&1
echo "RUN13_DONE $(date -u +%T)" >> $R/stages.log
