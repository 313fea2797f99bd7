#!/bin/bash
# Run 30, call A (one H200 lease; session 39): K1, the host's speed as a user calibrates it (serve_tiny.sh at
# concurrency 1: tiny-llama's median TTFT; --host-speed = 16.63 ms / it), on the lease that then serves Llama-3.1-8B
# at runs 26 / 27's settings (call B: RUN=run30b bash validate/engines/run26b.sh). Issue 29's open item: a third lease
# of the dense served runs with its host speed recorded. Prediction h200-vllm-run30-predicted.json committed first.
# After the payload parts were copied to ~/stash: bash validate/engines/run30.sh. Results: $OUT/run30k.tgz, env.txt.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD; HERE=$ROOT/validate/engines
source validate/engines/api_loop_host.sh
[ -d $HOME/site/vllm ] || unpack_and_record
mkdir -p $HOME/models $HOME/bin
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PYTHONPATH=$HOME/site PATH=$HOME/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
R=$HOME/run30k; rm -rf $R; mkdir -p $R
finish() { cp "$OUT/env.txt" $R/ 2>/dev/null; (cd $HOME && tar czf "$OUT/run30k.tgz" run30k) && ls -l "$OUT"; }
trap finish EXIT
(PYTHONPATH=$ROOT:$HOME/site python3 -m validate.engines.models $HOME/models tiny-llama Llama-3.1-8B) > $R/models.log 2>&1
echo "K1 $(date -u +%T)" > $R/stages.log
CONCS="1" timeout 450 bash $HERE/serve_tiny.sh $HOME/models/tiny-llama $R > $R/driver-K1.log 2>&1
echo "K1_DONE $(date -u +%T)" >> $R/stages.log
cat $R/driver-K1.log $R/stages.log
