#!/bin/bash
# llama.cpp run 3 on one H200: why the served step at -np 8 (15.0 ms, run 2) is twice batched-bench's (7.8 ms), and
# run 2's stage O, which its build budget left unrun. The detached driver (detach.sh), one device call from a fresh
# machine; payloads as run 2's (.payload/l0 llamacpp-src.tar.xz, .payload/l1 llamacpp-ops.tar.xz, in ~/stash).
#   bash llamacpp_run3.sh RESDIR            starts the run in its own session and returns at once
#   bash llamacpp_run3.sh RESDIR --wait S   waits up to S s for ALL_DONE, prints the stages, tars RESDIR into $OUT
# Stages (each a line in stages.log; budgets in seconds; the cases in llamacpp_cases_run3.json):
#   U  unpack both payloads (sha256 checked) into ~/lcpp/llama.cpp; tests/CMakeLists.txt of one target         ~10
#   B  CUDA build of llama-server, llama-batched-bench, test-backend-ops only, -j 16 (build.log, build_s)     <=420
#   G  (beside B) the model, as run 1's                                                                       -
#   K  per serve.runs: llama-server -np N FLAGS, N closed-loop clients, rounds x N requests (client FLAGS)
#      (serve-k-NAME.json, serve-k-NAME.log); then per batched.runs llama-batched-bench -lv 4 FLAGS
#      (batched-NAME.log)                                                                                     ~90
#   O  test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} --test-file ops-cases.txt (llamacpp_mech.py
#      testfile, run 2's cases in run 2's order): ops.txt                                what is left of 555 s
# LLAMACPP_BIN (a built bin/ with the three binaries: no U, B), LLAMACPP_MODEL (a GGUF: no G), LLAMACPP_NGL,
# LLAMACPP_OPS_BACKEND and LLAMACPP_CASES run the same stages on the CPU machine (the check, README).
# Stop this run only: kill -- -$(cat RESDIR/driver.pid)
set -u
source "$(dirname "$0")/detach.sh"
source "$(dirname "$0")/llamacpp_cuda.sh"
detach "$0" "$@"
SRC=$HOME/lcpp/llama.cpp; BUILD=$HOME/lcpp/build; BIN=${LLAMACPP_BIN:-$BUILD/bin}; PORT=8080
MODEL=${LLAMACPP_MODEL:-$HOME/models/llama31-8b-f16.gguf}; NGL=${LLAMACPP_NGL:-999}
CASES=$HERE/${LLAMACPP_CASES:-llamacpp_cases_run3.json}
C() { python3 -c "import json,sys; c=json.load(open('$CASES')); print(eval(sys.argv[1]))" "$1"; }
{ echo "== llama.cpp 0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36's vendor/llama.cpp)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  nvcc --version | tail -2; cmake --version | head -1; nproc; free -g | head -2
  lscpu | grep -E "Model name|^CPU\(s\)|MHz"; } > $R/env.log 2>&1
export PATH=/usr/local/cuda/bin:$PATH

T_START=$(date +%s)  # the call's 570 s: O gets what is left of 555 (left_s), the rest is --wait's tar
left_s() { local l=$(( T_START + 555 - $(date +%s) )); echo $(( l > 15 ? l : 15 )); }
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
# test-backend-ops first on ninja's command line: its one large object starts among the first jobs
{ cmake -S $SRC -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF \
    "${CUDA_FLAGS[@]}" && timeout 420 cmake --build $BUILD -j 16 --target test-backend-ops llama-server \
    llama-batched-bench; } > $R/build.log 2>&1
echo "build rc $? $(( $(date +%s) - T0 )) s, $(grep -c '\.cu\.o' $R/build.log) .cu objects" > $R/build_s.txt
cat $R/build_s.txt
fi
[ -x $BIN/llama-server ] && [ -x $BIN/llama-batched-bench ] || { tail -40 $R/build.log; fail B; }
stage G
[ -n "$GPID" ] && wait $GPID
cat $R/model.log 2>/dev/null
[ -f $MODEL ] || fail G

server() {  # server N NP LOG FLAGS..: llama-server in its own session, every layer on the GPU; waits up to N x 2 s
  local tries=$1 np=$2 log=$3; shift 3
  setsid $BIN/llama-server -m $MODEL -c $(C "c['serve']['c']") -np "$np" -ngl $NGL --host 127.0.0.1 --port $PORT \
    --seed 0 --metrics "$@" > "$log" 2>&1 &
  SPID=$!
  wait_healthy $SPID "$log" $PORT "$tries"
}
stop() { kill -TERM -$SPID 2>/dev/null; sleep 3; kill -KILL -$SPID 2>/dev/null; sleep 1; }

stage K
for spec in $(C "' '.join(f'{n}:{p}:{f}:{g}'.replace(' ', '+') for n, p, f, g in c['serve']['runs'])"); do
  IFS=: read -r name np flags cflags <<< "$spec"
  stage "K-$name"
  server 45 $np $R/serve-k-$name.log ${flags//+/ } || continue
  timeout 40 python3 $HERE/llamacpp_client.py $PORT $R/serve-k-$name.json --prompt $(C "c['serve']['prompt']") \
    --output $(C "c['serve']['output']") --requests $(( np * $(C "c['serve']['rounds']") )) \
    --seed $(C "c['serve']['seed']") --concurrency $np ${cflags//+/ }
  stop
done
for spec in $(C "' '.join(f'{n}:{f}' for n, f in c['batched']['runs'])"); do
  IFS=: read -r name flags <<< "$spec"
  stage "K-batched-$name"
  timeout 45 $BIN/llama-batched-bench -m $MODEL -ngl $NGL -c $(C "c['batched']['c']") -b 2048 -ub 512 -lv 4 $flags \
    -npp $(C "c['batched']['npp']") -ntg $(C "c['batched']['ntg']") -npl $(C "','.join(map(str, c['batched']['npl']))") \
    > $R/batched-$name.log 2>&1
  grep "^|" $R/batched-$name.log
done

stage O
(cd $ROOT && python3 -m validate.engines.llamacpp_mech testfile $SRC/ggml/include/ggml.h $R/ops-cases.txt) || fail O
[ -x $BIN/test-backend-ops ] || { tail -20 $R/build.log; fail O; }
timeout $(left_s) $BIN/test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} --test-file $R/ops-cases.txt > $R/ops.txt 2> $R/ops.log
echo "test-backend-ops rc $?" >> $R/ops.log
grep -c "us/run" $R/ops.txt
echo "ALL_DONE $(date -u +%T)" >> $R/stages.log
