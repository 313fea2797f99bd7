# Sourced by a kit that traces a program's kernels (llamacpp_run5.sh; any engine's): `cupti_build OUT LOGDIR` builds
# cupti_trace.c into the injection library OUT with gcc against the machine's CUPTI (CUPTI_LIB / CUPTI_H where given;
# else the library first, found under the toolkit, python3's site-packages (the nvidia-cuda-cupti wheel beside torch:
# the lent machine's toolkit has none), /opt, /usr/lib, and the header beside it: a header alone, e.g. triton's copy,
# cannot be linked), with the newest CUpti_ActivityKernelN that header defines; LOGDIR/tracer.log says which, and
# returns 1 when none builds. Then `CUDA_INJECTION64_PATH=OUT CUPTI_TRACE_OUT=FILE program ...` traces the program
# (kernel_trace.py reads FILE).
cupti_build() {
  local out=$1 logs=$2 here clibf clib cinc h v
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  {
    clibf=$(find ${CUPTI_LIB:-} /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets \
      $(python3 -c 'import site; print(*site.getsitepackages())') /opt /usr/lib -name 'libcupti.so*' 2>/dev/null \
      | head -1)
    clib=$(dirname "$clibf")
    local header=${CUPTI_H:-}
    for h in "$clib/../include/cupti.h" "$clib/../../include/cupti.h" /usr/local/cuda/extras/CUPTI/include/cupti.h; do
      [ -z "$header" ] && [ -f "$h" ] && header=$h
    done
    cinc=$(dirname "$header")
    echo "cupti.h $header; libcupti $clibf"
    for v in 13 12 11 10 9; do
      gcc -O2 -shared -fPIC -DKREC=CUpti_ActivityKernel$v -I$cinc -I/usr/local/cuda/include \
        $here/cupti_trace.c -L$clib -l:$(basename "$clibf") -Wl,-rpath,$clib \
        -o $out 2>>$logs/tracer-gcc.log && { echo "KREC CUpti_ActivityKernel$v"; break; }
    done
  } > $logs/tracer.log 2>&1
  cat $logs/tracer.log
  [ -f $out ]
}
