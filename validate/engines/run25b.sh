#!/bin/bash
# Run 25b (one H200 lease, no GPU used): run 25's measurements again, after every payload part (vllm_pack.sh's
# .payload/v0..v4, vf0, vf1) was copied to ~/stash by the calls before. gil_convoy.py first (~15 s; the image's
# transformers, no vLLM), then api_loop_bench.py all into $OUT/rep-2 (and rep-3 while the call has time).
# Prediction: validate/results/engines/h200-api-loop-run25b-predicted.json.   Usage: BUDGET=S bash run25b.sh
set -e
cd "$(dirname "$0")/../.."
t0=$SECONDS
source validate/engines/api_loop_host.sh
unpack_and_record
timeout 120 python3 validate/engines/gil_convoy.py "$OUT/gil-convoy.json" > "$OUT/gil-convoy.log" 2>&1 || echo "gil rc $?"
tail -50 "$OUT/gil-convoy.log" | grep -v Warning
for rep in 2 3; do
  left=$((${BUDGET:-570} - (SECONDS - t0)))
  if [ $left -lt 260 ]; then echo "no time for rep-$rep ($left s left)"; break; fi
  r0=$SECONDS
  timeout $((left - 10)) python3 validate/engines/api_loop_bench.py all "$OUT/rep-$rep" > "$OUT/rep-$rep.log" 2>&1 \
    || echo "rep-$rep rc $?"
  echo "rep-$rep took $((SECONDS - r0)) s"
done
# a call returns at most 8 files from $OUT (device/README.md): the repetitions go back as one tarball
(cd "$OUT" && tar czf reps.tgz rep-* && rm -rf rep-*) && ls -R "$OUT"
