#!/bin/bash
# llama.cpp run 2 on one H200: the mechanisms' own microbenchmarks (run 1's note, "Mechanisms"; llamacpp_mech.py),
# the detached driver (detach.sh), one device call from a fresh machine. Payloads, both copied into ~/stash by the
# same call: .payload/l0/llamacpp-src.tar.xz (llamacpp_pack.sh) and .payload/l1/llamacpp-ops.tar.xz
# (llamacpp_pack_ops.sh: tests/test-backend-ops.cpp of the same tree).
#   bash llamacpp_run2.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run2.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log; budgets in seconds; the cases in llamacpp_cases_run2.json):
#   U  unpack both payloads (sha256 checked) into ~/lcpp/llama.cpp; tests/CMakeLists.txt of one target         ~10
#   B  CUDA build as run 1's plus test-backend-ops (build.log, build_s)                                      <=330
#   G  (beside B) the model, as run 1's                                                                       -
#   S  per -np in serve.np: llama-server -np N; N closed-loop clients, rounds x N requests, default sampler chain
#      then greedy (serve-npN-default.json, serve-npN-greedy.json; serve-npN.log)                       <=3 x 60
#   F  llama-bench -p fa_prefill -n 0 -r 3, -fa on then -fa off (bench-fa-on.json, bench-fa-off.json)       <=2 x 45
#   O  test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} --test-file ops-cases.txt (llamacpp_mech.py testfile): ops.txt      what is left of 540 s
# LLAMACPP_BIN (a built bin/ with the three binaries: no U, B), LLAMACPP_MODEL (a GGUF: no G), LLAMACPP_NGL,
# LLAMACPP_OPS_BACKEND (default CUDA0) and LLAMACPP_CASES run the same stages on the CPU machine (the check, README).
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_cuda.sh"
detach "$0" "$@"
SRC=$HOME/lcpp/llama.cpp; BUILD=$HOME/lcpp/build; BIN=${LLAMACPP_BIN:-$BUILD/bin}; PORT=8080
MODEL=${LLAMACPP_MODEL:-$HOME/models/llama31-8b-f16.gguf}; NGL=${LLAMACPP_NGL:-999}
CASES=$HERE/${LLAMACPP_CASES:-llamacpp_cases_run2.json}
C() { python3 -c "import json,sys; c=json.load(open('$CASES')); print(eval(sys.argv[1]))" "$1"; }
{ echo "== llama.cpp 0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36's vendor/llama.cpp)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  nvcc --version | tail -2; cmake --version | head -1; nproc; free -g | head -2
  lscpu | grep -E "Model name|^CPU\(s\)|MHz"; } > $R/env.log 2>&1
export PATH=/usr/local/cuda/bin:$PATH

T_START=$(date +%s)  # the call's 560 s: O gets what is left of 540 (left_s)
left_s() { local l=$(( T_START + 540 - $(date +%s) )); echo $(( l > 20 ? l : 20 )); }
mkdir -p $HOME/lcpp $HOME/models
fail() { stage "$1-FAILED"; echo "ALL_DONE" >> $R/stages.log; exit 1; }
if [ -z "${LLAMACPP_BIN:-}" ]; then
stage U
{ (cd ~/stash && sha256sum -c $HERE/llamacpp_payload.sha256 $HERE/llamacpp_ops_payload.sha256) &&
  for t in llamacpp-src llamacpp-ops; do
    python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" \
      ~/stash/$t.tar.xz $HOME/lcpp || exit 1; done; } > $R/unpack.log 2>&1 || fail U
printf '%s\n' "add_executable(test-backend-ops test-backend-ops.cpp)" \
  "target_link_libraries(test-backend-ops PRIVATE ggml)" "target_compile_features(test-backend-ops PRIVATE cxx_std_17)" \
  > $SRC/tests/CMakeLists.txt
fi
stage B
GPID=
if [ -z "${LLAMACPP_MODEL:-}" ]; then
  (cd $ROOT && timeout 600 python3 -m validate.engines.llamacpp_model $SRC/gguf-py \
     $SRC/models/ggml-vocab-llama-bpe.gguf $MODEL Llama-3.1-8B > $R/model.log 2>&1
   echo "model rc $? $(date -u +%T)" >> $R/model.log) &
  GPID=$!
fi
if [ -z "${LLAMACPP_BIN:-}" ]; then
T0=$(date +%s)
cuda_flags > $R/cuda_flags.log 2>&1 || { cat $R/cuda_flags.log; fail B; }
cat $R/cuda_flags.log
{ cmake -S $SRC -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF \
    "${CUDA_FLAGS[@]}" && timeout 330 cmake --build $BUILD -j "$(nproc)" --target llama-server llama-bench \
    test-backend-ops; } > $R/build.log 2>&1
echo "build rc $? $(( $(date +%s) - T0 )) s, $(grep -c '\.cu\.o' $R/build.log) .cu objects" > $R/build_s.txt
cat $R/build_s.txt
fi
[ -x $BIN/llama-server ] || { tail -40 $R/build.log; fail B; }
stage G
[ -n "$GPID" ] && wait $GPID
cat $R/model.log 2>/dev/null
[ -f $MODEL ] || fail G

server() {  # server N NP LOG: llama-server in its own session, every layer on the GPU; waits up to N x 2 s
  setsid $BIN/llama-server -m $MODEL -c $(C "c['serve']['c']") -np "$2" -ngl $NGL --host 127.0.0.1 --port $PORT \
    --seed 0 --metrics > "$3" 2>&1 &
  SPID=$!
  wait_healthy $SPID "$3" $PORT "$1"
}
stop() { kill -TERM -$SPID 2>/dev/null; sleep 3; kill -KILL -$SPID 2>/dev/null; sleep 1; }

stage S
for np in $(C "' '.join(map(str, c['serve']['np']))"); do
  server 60 $np $R/serve-np$np.log
  for mode in default greedy; do  # greedy's seed is one more: other prompts, no prompt-cache hit across the pair
    stage "S-np$np-$mode"; g=(); [ $mode = greedy ] && g=(--greedy)
    timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/serve-np$np-$mode.json --prompt $(C "c['serve']['prompt']") \
      --output $(C "c['serve']['output']") --requests $(( np * $(C "c['serve']['rounds']") )) \
      --seed $(( $(C "c['serve']['seed']") + ${#g[@]} )) --concurrency $np "${g[@]}"
  done
  stop
done

stage F
for fa in on off; do
  timeout 45 $BIN/llama-bench -m $MODEL -ngl $NGL -fa $fa -p $(C "','.join(map(str, c['fa_prefill']))") -n 0 -r 3 \
    -o json > $R/bench-fa-$fa.json 2> $R/bench-fa-$fa.log
done
grep -o '"avg_ts": [0-9.]*' $R/bench-fa-*.json

stage O
(cd $ROOT && python3 -m validate.engines.llamacpp_mech testfile $SRC/ggml/include/ggml.h $R/ops-cases.txt) || fail O
[ -x $BIN/test-backend-ops ] || { tail -20 $R/build.log; fail O; }
timeout $(left_s) $BIN/test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} --test-file $R/ops-cases.txt > $R/ops.txt 2> $R/ops.log
echo "test-backend-ops rc $?" >> $R/ops.log
grep -c "us/run" $R/ops.txt
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
