#!/bin/bash
# The second llama.cpp payload, for llamacpp_run2.sh (never in git): tests/test-backend-ops.cpp of the same tree as
# .payload/l0 (llama-cpp-python 0.3.36's vendor/llama.cpp, commit 0c1e570), which llamacpp_pack.sh trims away with
# the rest of tests/. It needs only ggml's headers (its #includes: ggml.h, ggml-alloc.h, ggml-backend.h, ggml-cpp.h),
# so run2 builds it from a CMakeLists of one target (llamacpp_run2.sh) rather than the tree's tests/ folder.
# Usage: bash validate/engines/llamacpp_pack_ops.sh [WORKDIR]   -> .payload/l1/llamacpp-ops.tar.xz (~70 kB)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${1:-$(mktemp -d)}
mkdir -p "$W" && cd "$W"
[ -f llama_cpp_python-0.3.36.tar.gz ] || python3 -m pip download --no-deps --no-binary :all: -d . llama-cpp-python==0.3.36
rm -rf ops && mkdir -p ops
tar xzf llama_cpp_python-0.3.36.tar.gz -C ops --strip-components=2 \
  llama_cpp_python-0.3.36/vendor/llama.cpp/tests/test-backend-ops.cpp
mkdir -p "$ROOT/.payload/l1"
(cd ops && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - llama.cpp) | xz -9 -T1 \
  > "$ROOT/.payload/l1/llamacpp-ops.tar.xz"
cd "$ROOT/.payload/l1" && sha256sum -c "$ROOT/validate/engines/llamacpp_ops_payload.sha256"
