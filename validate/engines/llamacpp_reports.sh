#!/bin/bash
# Regenerates llama.cpp's "now" predictions and reports after a change to the model or its profile (the trust line
# reads the run 1 now-report and the quant report's last block). The blocks written before a run (predictions
# committed before it, "as it stood") are kept as they are; each report's last block, the model now, is replaced.
#   bash validate/engines/llamacpp_reports.sh        (from the repository root; ~3 min)
set -euo pipefail
E=validate/results/engines
D=nvidia-h200-llamacpp-2026-11-30
py() { python -m "$@"; }

py validate.engines.llamacpp_predict $E/h200-llamacpp-run1-now.json --now > /dev/null
py validate.engines.llamacpp_compare $E/$D-run1 --predicted $E/h200-llamacpp-run1-now.json \
  > $E/$D-run1-now-report.txt

for c in 4 4b 4c; do
  py validate.engines.llamacpp_quant predict $E/h200-llamacpp-run$c-now.json --cases llamacpp_cases_run$c.json \
    > /dev/null
done
# run 4 (llama-bench): the blocks up to "== now", then the model now
R4=$E/$D-run4-report.txt
head -n $(( $(grep -n "^== now" $R4 | cut -d: -f1) - 1 )) $R4 > $R4.tmp
{ echo "== now (timing mechanisms 16 and 17; judged on llama-bench, never fitted to it): h200-llamacpp-run4-now.json"
  py validate.engines.llamacpp_quant compare $E/$D-run4 --predicted $E/h200-llamacpp-run4-now.json; } >> $R4.tmp
mv $R4.tmp $R4
# runs 4b + 4c pooled: the blocks up to "== runs 4b + 4c pooled", then the model now
RQ=$E/$D-run4b-quant-report.txt
head -n $(( $(grep -n "^== runs 4b + 4c pooled" $RQ | cut -d: -f1) - 1 )) $RQ > $RQ.tmp
{ echo "== runs 4b + 4c pooled, the model now (h200-llamacpp-run4b-now.json, -run4c-now.json: mechanisms 16 and 17)"
  python - <<'EOF'
from pathlib import Path
import json
from validate.engines import llamacpp_quant as q
E = Path("validate/results/engines")
rows = []
for c in ("4b", "4c"):
    rows += q.compare(E / f"nvidia-h200-llamacpp-2026-11-30-run{c}", json.loads((E / f"h200-llamacpp-run{c}-now.json").read_text()))
q._show([r for r in rows if not r["family"].startswith("op-")])
EOF
} >> $RQ.tmp
mv $RQ.tmp $RQ

# run 5 (the kernel timeline): before the run and now
py validate.engines.llamacpp_trace predict $E/h200-llamacpp-run5-now.json > /dev/null
{ echo "llama.cpp run 5 (H200, the kernel timeline: cupti_trace.c, kernel_trace.py; results $E/$D-run5)"
  echo "engine: the untimed step (batched-bench T_TG / TG; llama-bench's mean, its first rep included); traced: the"
  echo "timeline's median step; busy / idle: the GPU's; categories: the kernels' exclusive time against the model's ops"
  echo
  echo "== the prediction committed before the run (c1cf37b): h200-llamacpp-run5-predicted.json"
  py validate.engines.llamacpp_trace compare $E/$D-run5 --predicted $E/h200-llamacpp-run5-predicted.json
  echo
  echo "== the model now (mechanism 17 from this run's timeline: step_s, eager_layer_s 0, the logits' copy; MMVQ and the"
  echo "   F16 laws refit on runs 3 and 4's ops): h200-llamacpp-run5-now.json"
  py validate.engines.llamacpp_trace compare $E/$D-run5 --predicted $E/h200-llamacpp-run5-now.json
  py validate.engines.llamacpp_trace predict $E/h200-llamacpp-run5b-now.json --cases llamacpp_cases_run5b.json \
    > /dev/null
  echo
  echo "== run 5b ($E/$D-run5b: B 16 / 64 at npp 512), the prediction committed before the run (76de148):"
  echo "   h200-llamacpp-run5b-predicted.json"
  py validate.engines.llamacpp_trace compare $E/$D-run5b --predicted $E/h200-llamacpp-run5b-predicted.json
  echo
  echo "== run 5b, the model now (its logits' copies are in the copy law's fit): h200-llamacpp-run5b-now.json"
  py validate.engines.llamacpp_trace compare $E/$D-run5b --predicted $E/h200-llamacpp-run5b-now.json; } \
  > $E/$D-run5-report.txt
# run 6 (the saves and the cache-off served runs): the blocks up to "== the model now", then the model now
D6=nvidia-h200-llamacpp-2026-12-01
py validate.engines.llamacpp_cache predict $E/h200-llamacpp-run6-now.json --now > /dev/null
R6=$E/$D6-run6-report.txt
head -n $(( $(grep -n "^== the model now" $R6 | cut -d: -f1) - 1 )) $R6 > $R6.tmp
{ echo "== the model now (timing mechanism 18's save law from this run's saves: in-sample for them; served with" \
       "--cache-ram 0, judged): h200-llamacpp-run6-now.json"
  py validate.engines.llamacpp_cache compare $E/$D6-run6 --predicted $E/h200-llamacpp-run6-now.json | tail -n +4; } \
  >> $R6.tmp
mv $R6.tmp $R6
# run 7 (c4 on a fresh traced server, the cache off and on): the prediction before the run, then the model now
py validate.engines.llamacpp_cache now7 $E/h200-llamacpp-run7-now.json
R7=$E/$D6-run7-report.txt
{ py validate.engines.llamacpp_cache compare7 $E/$D6-run7 --predicted $E/h200-llamacpp-run7-predicted.json
  echo
  echo "== the model now: h200-llamacpp-run7-now.json"
  py validate.engines.llamacpp_cache compare7 $E/$D6-run7 --predicted $E/h200-llamacpp-run7-now.json | tail -n +3; } \
  > $R7
# run 9 (pinned slots, one KV stream a slot or -kvu; lone prompts): the prediction before the run, then the model now
python -m validate.engines.llamacpp_slots predict9 $E/h200-llamacpp-run9-now.json --now
{ python -m validate.engines.llamacpp_slots compare9 $E/$D6-run9 $E/h200-llamacpp-run9-predicted.json
  echo; echo "== the model now: h200-llamacpp-run9-now.json"
  python -m validate.engines.llamacpp_slots compare9 $E/$D6-run9 $E/h200-llamacpp-run9-now.json | tail -n +3; } \
  > $E/$D6-run9-report.txt
# run 12 (-np 16 split vs -kvu, 120 Poisson sends): the prediction before the run, then the model now
{ python -m validate.engines.llamacpp_slots compare12 $E/$D6-run12 $E/h200-llamacpp-run12-predicted.json
  echo; python -m validate.engines.llamacpp_slots now12 $E/$D6-run12; } > $E/$D6-run12-report.txt
# run 13 (timing 22: one stream's attention over every cell it holds, slots 0-2 filled): the prediction before the run
python -m validate.engines.llamacpp_slots predict13 $E/h200-llamacpp-run13-now.json --now
{ python -m validate.engines.llamacpp_slots compare13 $E/$D6-run13 $E/h200-llamacpp-run13-predicted.json
  echo; echo "== the model now: h200-llamacpp-run13-now.json"
  python -m validate.engines.llamacpp_slots compare13 $E/$D6-run13 $E/h200-llamacpp-run13-now.json | tail -n +3; } \
  > $E/$D6-run13-report.txt
# run 14 (the server's host work on a tiny model; 22 on batched-bench's prompts): the prediction before the run
for n in 14 15; do
  python -m validate.engines.llamacpp_host predict$n $E/h200-llamacpp-run$n-now.json --now
  { python -m validate.engines.llamacpp_host compare$n $E/$D6-run$n $E/h200-llamacpp-run$n-predicted.json
    echo; echo "== the model now: h200-llamacpp-run$n-now.json"
    python -m validate.engines.llamacpp_host compare$n $E/$D6-run$n $E/h200-llamacpp-run$n-now.json | tail -n +3; } \
    > $E/$D6-run$n-report.txt
done
python -m validate.engines.llamacpp_slots chain > $E/nvidia-h200-llamacpp-slots-chain.txt
grep -E "median" $E/$D-run1-now-report.txt $RQ | tail -8
