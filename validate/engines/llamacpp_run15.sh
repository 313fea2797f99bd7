#!/bin/bash
# llama.cpp run 15 on one H200: mechanism 22's decode past one query tile (llama-batched-bench -kvu against a stream a
# sequence). llamacpp_cases_run15.json; the prediction (llamacpp_host.py predict15) committed before the run; the
# detached driver (detach.sh), run 4's source payload (.payload/l0 llamacpp-src.tar.xz in ~/stash).
#   bash llamacpp_run15.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run15.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages: U unpack (~10), B llama-batched-bench -j 16 (<=480, the F16 8B beside it), D-V per variant (split, kvu),
#   repeats (batched-V-K.log)                                                                                 ~40 each
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_common.sh"
detach "$0" "$@"
llamacpp_env llamacpp_cases_run15.json
llamacpp_unpack
llamacpp_build_model 480 16 OFF "llama-batched-bench" llama-batched-bench

llamacpp_batched_variants
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
