# Sourced by the two-GPU drivers (run12.sh, run13.sh, run14.sh) after R is set: the results folder, the stage log,
# a `vllm` entry point for the carried payload (~/site), and the environment every two-GPU run keeps (NVLink
# multicast off: NCCL's NVLS, torch's and NVSHMEM's multicast, vLLM's symmetric-memory all-reduce).
HERE=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
mkdir -p $R $HOME/models $HOME/bin
echo "start $(date -u +%T) pid $$" > $R/stages.log
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
  NVSHMEM_DISABLE_NVLS=1 VLLM_ALLREDUCE_USE_SYMM_MEM=0 VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm
env_log() {  # the machine, the engine and NIXL, to $1
  { echo "== env $(date -u +%FT%TZ) sha $(cat $ROOT/.sha 2>/dev/null)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    nvidia-smi topo -m
    python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__, 'gpus', torch.cuda.device_count())"
    python3 -c "import nixl._api as a; print('nixl', a.nixl_agent)" 2>&1 | tail -1
    echo "host probe: $(python3 $HERE/host_probe.py)"; lscpu | grep -E "Model name|^CPU\(s\)"
  } > $1 2>&1
}
