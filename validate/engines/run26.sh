#!/bin/bash
# Run 26, call A (one H200 lease; session 38): run 24's probe again (tiny-llama on `vllm serve`, N = 0 / 16 / 64
# background streams, the probe's 20 prompts of 1,500 tokens), now with loop_lag.py's monitors in every Python
# process (the API server, the engine core, the clients: LOOPLAG_DIR, looplag_site/sitecustomize.py) and, at N 64
# after the probe (the background still streaming), `py-spy dump` and `py-spy record --nonblocking --subprocesses`
# of the server. Issue 33's open item: run 24's N 64 API-side excess (68-72 ms against loop()'s 10-17).
# After every payload part (vllm_pack.sh's .payload/v0..v4, vf0, vf1; vf1 also carries extra/py_spy-*.whl) was copied
# to ~/stash by the calls before: BUDGET=S bash validate/engines/run26.sh. Results: $OUT/env.txt, $OUT/run26a.tgz.
# Call B (run26b.sh) follows on the same machine. Run 27 (a second lease): RUN=run27a NS="0 64", the same kit with
# py-spy in its own folder and two more records at N 64 (--gil: the GIL's holder; --idle: every thread's state). Prediction: validate/results/engines/h200-vllm-run26-predicted.json.
set -u
cd "$(dirname "$0")/../.."
t0=$SECONDS; ROOT=$PWD; HERE=$ROOT/validate/engines
source validate/engines/api_loop_host.sh
source validate/engines/detach.sh  # wait_healthy, stage
unpack_and_record
# py-spy into a folder of its own (run 26: pip --target ~/site skipped its bin/, ~/site/bin being there already)
ls ~/stash/extra/*.whl > /dev/null 2>&1 && python3 -m pip install -q --no-deps --no-index --target ~/pyspy ~/stash/extra/*.whl
mkdir -p $HOME/models $HOME/bin
printf '#!/bin/sh\nexec python3 -m vllm.entrypoints.cli.main "$@"\n' > $HOME/bin/vllm; chmod +x $HOME/bin/vllm
export PATH=$HOME/bin:$HOME/pyspy/bin:$PATH VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
# RUN (default run26a): the results' folder name; NS (default "0 16 64"): the background stream counts
RUN=${RUN:-run26a}; R=$HOME/$RUN; rm -rf $R; mkdir -p $R
finish() { cp "$OUT/env.txt" $R/ 2>/dev/null; (cd $HOME && tar czf "$OUT/$RUN.tgz" $RUN) && ls -l "$OUT"; }
trap finish EXIT
echo "py-spy: $(py-spy --version 2>&1)" >> $R/stages.log
(PYTHONPATH=$ROOT:$HOME/site python3 -m validate.engines.models $HOME/models tiny-llama Llama-3.1-8B) > $R/models.log 2>&1
export PYTHONPATH=$HERE/looplag_site:$HOME/site LOOPLAG_DIR=$R/lag
M=$HOME/models/tiny-llama; PORT=8000
# metrics, bench: detach.sh
stage A
setsid vllm serve $M --load-format dummy --dtype bfloat16 --max-model-len 16384 --port $PORT --seed 0 \
  > $R/server.log 2>&1 &
SPID=$!; T0=$(date +%s)
wait_healthy $SPID $R/server.log $PORT 150 || exit 1
echo "server up after $(( $(date +%s) - T0 )) s (pid $SPID)" | tee -a $R/stages.log
bench warm 600 1500 4 8 1
for N in ${NS:-0 16 64}; do
  probe $N
  if [ $N = 64 ] && command -v py-spy > /dev/null; then
    stage S64
    # the background streams end ~15 s after the probe: the GIL's holder first (--gil samples only the thread that
    # holds it; run 27), then every thread's state (--idle), then the engine core beside it (--subprocesses; run 26)
    timeout 20 py-spy record --pid $SPID --gil --threads --nonblocking --rate 200 --duration 5 --format raw \
      -o $R/pyspy-64-gil.txt > $R/pyspy-64-gil.log 2>&1
    timeout 20 py-spy record --pid $SPID --threads --idle --nonblocking --rate 200 --duration 4 --format raw \
      -o $R/pyspy-64-idle.txt > $R/pyspy-64-idle.log 2>&1
    timeout 20 py-spy dump --pid $SPID --nonblocking > $R/pyspy-dump-64.txt 2>&1
    timeout 30 py-spy record --pid $SPID --subprocesses --nonblocking --rate 200 --duration 4 --format raw \
      -o $R/pyspy-64.txt > $R/pyspy-64.log 2>&1
    stage S64-end
  fi
  probe_end
  echo "N $N: $(grep -E 'Median TTFT' $R/p$N-bench.log | tr -s ' ')" | tee -a $R/stages.log
done
kill -TERM -$SPID; sleep 4; kill -KILL -$SPID 2>/dev/null
echo "ALL_DONE $(date -u +%T) after $((SECONDS - t0)) s" >> $R/stages.log
cat $R/stages.log
