#!/bin/bash
# llama.cpp's host KQ mask on one KV stream, timed alone on the GPU machine's host (timing mechanism 23's
# microbenchmark, kq_mask_bench.cpp): the source payload's headers (.payload/l0 llamacpp-src.tar.xz, sha256 checked),
# g++ -O2, one process. Usage: bash validate/engines/kq_mask_run.sh OUTDIR
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$1
mkdir -p "$OUT" /tmp/kqm
(cd "$HERE/../../.payload/l0" && sha256sum -c "$HERE/llamacpp_payload.sha256") > "$OUT/unpack.log"
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" \
  "$HERE/../../.payload/l0/llamacpp-src.tar.xz" /tmp/kqm
cd /tmp/kqm/llama.cpp
{ g++ --version | head -1; lscpu | grep -E "Model name|^CPU\(s\)|MHz"; date -u +%FT%TZ; } > "$OUT/env.log"
g++ -O2 -std=c++17 -I include -I ggml/include -I src "$HERE/kq_mask_bench.cpp" -o /tmp/kqm/bench
for k in 1 2 3; do /tmp/kqm/bench > "$OUT/kq-mask-$k.jsonl"; done
cat "$OUT/kq-mask-1.jsonl"
