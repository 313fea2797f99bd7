#!/usr/bin/env bash
# Every SGLang report under validate/results/engines/ regenerated: the 'now' predictions (h200-sglang-RUN-now.json,
# the model as it stands) and their reports (...-RUN-now-summary.txt), and the reports against the predictions
# committed before each run (...-RUN-summary.txt, which move only with compare_sglang itself). The commands are the
# notes' (2026-11-30-sglang-h200-run1/2/3.md, -sglang-27.md). Run from the repository root after any change to
# roofline/engines/profiles/sglang.json or the model it feeds; commit the files that move with the change.
# Usage: bash validate/engines/recompare_sglang.sh      (about one CPU-minute)
set -euo pipefail
R=validate/results/engines
export PYTHONPATH=.:app
now() {  # run, then predict_sglang's arguments
  local run="$1"; shift
  python -m validate.engines.predict_sglang "$R/h200-sglang-$run-now.json" "$@"
  python -m validate.engines.compare_sglang "$R/nvidia-h200-sglang-2026-11-30-$run" \
    --predicted "$R/h200-sglang-$run-now.json" --out "$R/nvidia-h200-sglang-2026-11-30-$run-now-summary.txt" > /dev/null
}
now run1 --results "$R/nvidia-h200-sglang-2026-11-30-run1"
now run2 --cases cases-sglang-run2.json --steps-only
now run3 --cases cases-sglang-run3.json --results "$R/nvidia-h200-sglang-2026-11-30-run3"
now run3b --cases cases-sglang-run3b.json --steps-only
for run in run1 run2 run3 run3b; do
  python -m validate.engines.compare_sglang "$R/nvidia-h200-sglang-2026-11-30-$run" \
    --predicted "$R/h200-sglang-$run-predicted.json" --out "$R/nvidia-h200-sglang-2026-11-30-$run-summary.txt" > /dev/null
done
