#!/usr/bin/env bash
# Every vLLM compare report under validate/results/engines/ regenerated on the model as it stands (their 'now'
# columns; 'before' is each run's committed prediction and does not move). Run from the repository root after any
# change to the vLLM profile or the model it feeds; commit the reports that move with the change.
# Usage: bash validate/engines/recompare.sh      (about ten CPU-minutes on two cores)
set -euo pipefail
R=validate/results/engines
cmp() {  # cases file, run folder suffix, predicted suffix (runs 6, 8, 10 served only: their results in serve/)
  local dir="$R/nvidia-h200-vllm-$2"
  [ -d "$dir/serve" ] && dir="$dir/serve"
  ROOFLINE_ENGINE_CASES="$1" python -m validate.engines.compare "$dir" \
    --predicted "$R/h200-vllm-$3-predicted.json" --out "$R/nvidia-h200-vllm-$2-compare.txt" > /dev/null
}
ROOFLINE_ENGINE_CASES=cases.json python -m validate.engines.compare "$R/nvidia-h200-vllm-2026-11-28" \
  --predicted "$R/h200-vllm-predicted.json" --out "$R/nvidia-h200-vllm-2026-11-28-compare.txt" > /dev/null
cmp cases-run2.json 2026-11-28-run2 run2
for n in 3 6 7 8 9 10 11; do cmp "cases-run$n.json" "2026-11-29-run$n" "run$n"; done
python -m validate.engines.compare_x2 > /dev/null
python -m validate.engines.run18 compare "$R/nvidia-h200-vllm-2026-11-30-run18" --predicted "$R/h200-vllm-run18-predicted.json" \
  --out "$R/nvidia-h200-vllm-2026-11-30-run18-compare.txt" > /dev/null
python -m validate.engines.run19 compare "$R/nvidia-h200-vllm-2026-11-30-run19" --predicted "$R/h200-vllm-run19-predicted.json" \
  --out "$R/nvidia-h200-vllm-2026-11-30-run19-compare.txt" > /dev/null
python -m validate.engines.run20 compare "$R/nvidia-h200-vllm-2026-11-30-run20" --predicted "$R/h200-vllm-run20-predicted.json" \
  --out "$R/nvidia-h200-vllm-2026-11-30-run20-compare.txt" > /dev/null
python -m validate.engines.public > /dev/null
python -m validate.engines.run22 compare "$R/nvidia-h200-vllm-2026-11-30-run22" --predicted "$R/h200-vllm-run22-predicted.json" \
  --out "$R/nvidia-h200-vllm-2026-11-30-run22-compare.txt" > /dev/null
python -m validate.engines.run23 compare "$R/nvidia-h200-vllm-2026-11-30-run23" --predicted "$R/h200-vllm-run23-predicted.json" \
  --out "$R/nvidia-h200-vllm-2026-11-30-run23-compare.txt" > /dev/null
for n in 26 27 30; do
  python -m validate.engines.run26 compare $n > "$R/nvidia-h200-vllm-2026-12-02-run$n-compare.txt"
done
python -m validate.engines.run26 report > "$R/nvidia-h200-vllm-2026-12-02-run26-report.txt"
python -m validate.engines.run26 repeat > "$R/nvidia-h200-vllm-2026-12-02-run26-27-30-repeat-report.txt"
python -m validate.engines.run29 compare "$R/nvidia-h200-vllm-2026-12-02-run29" --predicted "$R/h200-vllm-run29-predicted.json" \
  --out "$R/nvidia-h200-vllm-2026-12-02-run29-compare.txt" > /dev/null
