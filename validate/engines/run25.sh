#!/bin/bash
# Run 25 (one H200 lease, no GPU used), the last of its calls: every payload part (vllm_pack.sh's .payload/v0..v4 and
# vf0, vf1..) was copied to ~/stash by the calls before, back to back. Unpacks the payload, records the host, then
# api_loop_bench.py all into $OUT/rep-1 and, while the call has time, rep-2 (each ~3.5 min on the dev CPU).
# Prediction: validate/results/engines/h200-api-loop-run25-predicted.json.   Usage: bash validate/engines/run25.sh
set -e
cd "$(dirname "$0")/../.."
t0=$SECONDS
source validate/engines/api_loop_host.sh
unpack_and_record
echo "unpacked in $((SECONDS - t0)) s"
for rep in 1 2; do
  left=$((${BUDGET:-570} - (SECONDS - t0)))
  if [ $rep = 2 ] && [ $left -lt 260 ]; then echo "no time for rep-2 ($left s left)"; break; fi
  r0=$SECONDS
  timeout $((left - 10)) python3 validate/engines/api_loop_bench.py all "$OUT/rep-$rep" || echo "rep-$rep rc $?"
  echo "rep-$rep took $((SECONDS - r0)) s"
done
# a call returns at most 8 files from $OUT (device/README.md): the repetitions go back as one tarball
(cd "$OUT" && tar czf reps.tgz rep-* && rm -rf rep-*) && ls -R "$OUT"
