#!/bin/bash
# The three mechanism microbenchmarks of validate/notes/2026-11-29-ttft-spec.md, on the GPU machine with the vLLM
# payload unpacked in $SITE (default ~/site, as run.sh): model folders (tiny-llama, Llama-3.1-8B, Llama-3.2-1B),
# then admission.py (async admission lag), mixed_step.py (a mixed step against its parts), spec_step.py (a draft
# model's step taken apart). Usage: run_mech.sh RESDIR [STAGES] (STAGES: any of admission,mixed,spec; default all).
# Each stage has its own timeout (admission 200 s, mixed 200 s, spec 330 s) and writes RESDIR/<stage>.json + .log;
# RESDIR/mech-driver.log has the summary lines. SPEC_CONFIGS: spec_step.py's CONFIGS (its default when unset).
set -u
R=$1; STAGES=${2:-admission,mixed,spec}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
SITE=${SITE:-$HOME/site}
mkdir -p $R $HOME/bin $HOME/models
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PYTHONPATH=$SITE PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
{
echo "== env $(date -u +%FT%TZ) $(cd $ROOT && git rev-parse HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import torch, vllm; print('torch', torch.__version__, 'vllm', vllm.__version__)"
[ "${SKIP_MODELS:-0}" = 1 ] || (cd $ROOT && PYTHONPATH=$ROOT python3 -m validate.engines.models $HOME/models tiny-llama Llama-3.1-8B Llama-3.2-1B)
M=$HOME/models
case ",$STAGES," in *,admission,*)
  echo "== admission $(date -u +%T)"
  setsid timeout 200 python3 $HERE/admission.py $M/Llama-3.1-8B $R/admission.json 64 16 40 > $R/admission.log 2>&1
  echo "admission rc $?"; grep -E '^\{|ADMISSION_DONE' $R/admission.log | cut -c1-400;;
esac
case ",$STAGES," in *,mixed,*)
  echo "== mixed $(date -u +%T)"
  VLLM_ENABLE_V1_MULTIPROCESSING=0 setsid timeout 200 python3 $HERE/mixed_step.py $M/Llama-3.1-8B $R/mixed_step.json \
    > $R/mixed_step.log 2>&1
  echo "mixed rc $?"; grep -E '^MIXED' $R/mixed_step.log;;
esac
case ",$STAGES," in *,spec,*)
  echo "== spec $(date -u +%T)"
  setsid timeout ${SPEC_TIMEOUT:-330} python3 $HERE/spec_step.py $M $R/spec_step.json ${SPEC_CONFIGS:-} > $R/spec_step.log 2>&1
  echo "spec rc $?"; grep -E '^SPEC' $R/spec_step.log | cut -c1-400;;
esac
echo "MECH_DONE $(date -u +%T)"
} > $R/mech-driver.log 2>&1
