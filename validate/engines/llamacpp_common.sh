# Sourced by the llama.cpp drivers (llamacpp_run.sh, llamacpp_run2.sh, llamacpp_run3.sh) after detach.sh, whose
# `detach` sets R, HERE, ROOT and whose `stage` logs a stage: the stages and helpers the three share, once.
#   llamacpp_env CASES        SRC BUILD BIN PORT MODEL NGL, CASES (this folder's LLAMACPP_CASES, else CASES) for `C`,
#                             RESDIR/env.log (llama.cpp's commit, GPU, nvcc, cmake, host), the CUDA toolkit on PATH
#   llamacpp_unpack [ops]     ~/lcpp and ~/models; stage U unless LLAMACPP_BIN: the source payload (with ops: also the
#                             test-backend-ops payload and a tests/CMakeLists.txt of that one target), sha256 checked
#   llamacpp_build_model BUDGET JOBS TESTS "TARGET.." NEED..
#                             stage B: the model (llamacpp_model.py) written beside the CUDA build unless
#                             LLAMACPP_MODEL; the build unless LLAMACPP_BIN: LLAMA_BUILD_TESTS=TESTS, `cmake --build
#                             -j JOBS ('' nproc) --target TARGET..` under timeout BUDGET s; each NEED a binary of BIN;
#                             then stage G: the model's end, the GGUF there
#   llamacpp_ops LIMIT FLOOR [MODULE]
#                             stage O: test-backend-ops perf on MODULE's test file (validate.engines.MODULE testfile;
#                             default llamacpp_mech), its timeout what is left of LIMIT s since the driver's T_START
#                             (FLOOR s at the least)
#   llamacpp_serve_runs       stage S-RUN per the cases' serve.runs: llamacpp_client.py against the server on PORT
#                             (a Poisson rate or a closed loop of clients), RESDIR/serve-RUN.json
#   llamacpp_server TRIES LOG FLAGS..
#                             llama-server in its own session (SPID), every layer on the GPU, -lv 4 (run 1's), FLAGS
#                             after; 1 if /health is not up within TRIES x 2 s
#   llamacpp_serve_variant V  llamacpp_server for the cases' serve.servers variant V (its flags), -c and -np the
#                             cases', log RESDIR/server-V.log
#   llamacpp_each_server BODY stage P-V per the cases' serve.servers variant V: llamacpp_serve_variant V, then BODY V
#                             (a function of the kit), the server stopped and its log gzipped (RESDIR/server-V.log.gz)
#   llamacpp_slot_sets TAG    the cases' serve.slot_sets, four closed-loop clients each asking for its set's slots
#                             (llamacpp_client --slots), RESDIR/set-TAG-K.json
#   llamacpp_batched_variants stage D-V per the cases' batched.runs variant V: llama-batched-bench with its flags,
#                             batched.repeats times (RESDIR/batched-V-K.log), each under a 150 s timeout
#   C EXPR (EXPR of the cases c, printed), fail STAGE (STAGE-FAILED, ALL_DONE, exit 1), stop (the server's session)
source "$(dirname "${BASH_SOURCE[0]}")/llamacpp_cuda.sh"

C() { python3 -c "import json,sys; c=json.load(open('$CASES')); print(eval(sys.argv[1]))" "$1"; }
fail() { stage "$1-FAILED"; echo "ALL_DONE" >> $R/stages.log; exit 1; }
stop() { kill -TERM -$SPID 2>/dev/null; sleep 3; kill -KILL -$SPID 2>/dev/null; sleep 1; }

llamacpp_env() {
  SRC=$HOME/lcpp/llama.cpp; BUILD=$HOME/lcpp/build; BIN=${LLAMACPP_BIN:-$BUILD/bin}; PORT=8080
  MODEL=${LLAMACPP_MODEL:-$HOME/models/llama31-8b-f16.gguf}; NGL=${LLAMACPP_NGL:-999}
  CASES=$HERE/${LLAMACPP_CASES:-$1}
  { echo "== llama.cpp 0c1e57098bba43ac29e6e3b677cdceebdd22334f (llama-cpp-python 0.3.36's vendor/llama.cpp)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
    nvcc --version | tail -2; cmake --version | head -1; nproc; free -g | head -2
    lscpu | grep -E "Model name|^CPU\(s\)|MHz"; } > $R/env.log 2>&1
  export PATH=/usr/local/cuda/bin:$PATH
}

# llamacpp_untar NAME..: ~/stash/NAME.tar.xz into ~/lcpp, each; 1 at the first that fails
llamacpp_untar() {
  local t
  for t; do
    python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" \
      ~/stash/$t.tar.xz $HOME/lcpp || return 1
  done
}

llamacpp_unpack() {
  mkdir -p $HOME/lcpp $HOME/models
  [ -z "${LLAMACPP_BIN:-}" ] || return 0
  local sums=($HERE/llamacpp_payload.sha256) tars=(llamacpp-src)
  [ "${1:-}" = ops ] && { sums+=($HERE/llamacpp_ops_payload.sha256); tars+=(llamacpp-ops); }
  stage U
  { (cd ~/stash && sha256sum -c "${sums[@]}") && llamacpp_untar "${tars[@]}"; } > $R/unpack.log 2>&1 || fail U
  [ "${1:-}" = ops ] || return 0
  printf '%s\n' "add_executable(test-backend-ops test-backend-ops.cpp)" \
    "target_link_libraries(test-backend-ops PRIVATE ggml)" "target_compile_features(test-backend-ops PRIVATE cxx_std_17)" \
    > $SRC/tests/CMakeLists.txt
}

llamacpp_build_model() {
  local budget=$1 jobs=$2 tests=$3 targets=$4 need; shift 4
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
        -DLLAMA_BUILD_TESTS=$tests -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF \
        "${CUDA_FLAGS[@]}" && timeout $budget cmake --build $BUILD -j "${jobs:-$(nproc)}" --target $targets; } \
      > $R/build.log 2>&1
    echo "build rc $? $(( $(date +%s) - T0 )) s, $(grep -c '\.cu\.o' $R/build.log) .cu objects" > $R/build_s.txt
    cat $R/build_s.txt
  fi
  for need; do [ -x $BIN/$need ] || { tail -40 $R/build.log; fail B; }; done
  stage G
  [ -n "$GPID" ] && wait $GPID
  cat $R/model.log 2>/dev/null
  [ -f $MODEL ] || fail G
}

llamacpp_ops() {
  stage O
  (cd $ROOT && python3 -m validate.engines.${3:-llamacpp_mech} testfile $SRC/ggml/include/ggml.h $R/ops-cases.txt) || fail O
  [ -x $BIN/test-backend-ops ] || { tail -20 $R/build.log; fail O; }
  local left=$(( T_START + $1 - $(date +%s) ))
  timeout $(( left > $2 ? left : $2 )) stdbuf -oL $BIN/test-backend-ops perf -b ${LLAMACPP_OPS_BACKEND:-CUDA0} \
    --test-file $R/ops-cases.txt > $R/ops.txt 2> $R/ops.log
  echo "test-backend-ops rc $?" >> $R/ops.log
  grep -c "us/run" $R/ops.txt
}

llamacpp_serve_runs() {
  for spec in $(C "' '.join(':'.join(map(str, r)) for r in c['serve']['runs'])"); do
    IFS=: read -r run rate conc n seed <<< "$spec"; stage "S-$run"
    mode=(--rate "$rate"); [ "$conc" != 0 ] && mode=(--concurrency "$conc")
    timeout 150 python3 $HERE/llamacpp_client.py $PORT $R/serve-$run.json --prompt $(C "c['serve']['prompt']") \
      --output $(C "c['serve']['output']") --requests "$n" --seed "$seed" "${mode[@]}"
  done
}

llamacpp_server() {
  local tries=$1 log=$2; shift 2
  setsid $BIN/llama-server -m $MODEL -ngl $NGL --host 127.0.0.1 --port $PORT --seed 0 --metrics -lv 4 "$@" \
    > "$log" 2>&1 &
  SPID=$!
  wait_healthy $SPID "$log" $PORT "$tries"
}

llamacpp_serve_variant() {
  llamacpp_server 60 $R/server-$1.log -c $(C "c['serve']['c']") -np $(C "c['serve']['np']") \
    $(C "dict(c['serve']['servers'])['$1']")
}

llamacpp_each_server() {
  local body=$1 v
  for v in $(C "' '.join(x[0] for x in c['serve']['servers'])"); do
    stage "P-$v"
    llamacpp_serve_variant $v || continue
    $body $v
    stop
    gzip -n -f $R/server-$v.log
  done
}

llamacpp_slot_sets() {
  local k=0 set
  for set in $(C "' '.join(','.join(map(str, s)) for s in c['serve']['slot_sets'])"); do
    k=$((k + 1))
    timeout 60 python3 $HERE/llamacpp_client.py $PORT $R/set-$1-$k.json --prompt $(C "c['serve']['prompt']") \
      --output $(C "c['serve']['output']") --requests $(C "c['serve']['requests']") --seed $k --concurrency 4 \
      --slots $set
  done
}

llamacpp_batched_variants() {
  local B="c['batched']" v k
  for v in $(C "' '.join(x[0] for x in $B['runs'])"); do
    stage "D-$v"
    for k in $(seq 1 $(C "$B['repeats']")); do
      timeout 150 $BIN/llama-batched-bench -m $MODEL -ngl $NGL -c $(C "$B['c']") -b 2048 -ub 512 \
        -npp $(C "','.join(map(str, $B['npp']))") -ntg $(C "$B['ntg']") -npl $(C "','.join(map(str, $B['npl']))") \
        $(C "{x[0]: x[1] for x in $B['runs']}['$v']") > $R/batched-$v-$k.log 2>&1
      grep "^|" $R/batched-$v-$k.log
    done
  done
}
