#!/bin/bash
# The llama.cpp source payload for llamacpp_run.sh, built here (never in git): llama-cpp-python 0.3.36's sdist from
# PyPI vendors llama.cpp at commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f (2026-10-01; its .git/modules HEAD). The
# tree is trimmed to what the CPU and CUDA builds of llama-server, llama-bench, llama-batched-bench and llama-quantize
# read (no docs, tests, examples, benches, other backends' folders, the web UI's sources, model files except the
# Llama-3 vocabulary models/ggml-vocab-llama-bpe.gguf) and keeps gguf-py (llamacpp_model.py writes the GGUF with it).
# tar is written reproducibly (sorted, mtime 0, numeric owner), xz -9 (Python's tarfile unpacks it on the machine,
# which may lack zstd); its sha256 must match llamacpp_payload.sha256.
# Usage: bash validate/engines/llamacpp_pack.sh [WORKDIR]   -> .payload/l0/llamacpp-src.tar.xz (~6 MB)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=${1:-$(mktemp -d)}
mkdir -p "$W" && cd "$W"
[ -f llama_cpp_python-0.3.36.tar.gz ] || python3 -m pip download --no-deps --no-binary :all: -d . llama-cpp-python==0.3.36
rm -rf llama_cpp_python-0.3.36 llama.cpp
tar xzf llama_cpp_python-0.3.36.tar.gz llama_cpp_python-0.3.36/vendor/llama.cpp
mv llama_cpp_python-0.3.36/vendor/llama.cpp llama.cpp
cd llama.cpp
rm -rf .git .github docs tests examples pocs benches media conversion convert_*.py skills ci .devops flake.nix \
  AGENTS.md CLAUDE.md build-xcframework.sh tools/ui/tests tools/ui/src tools/ui/package-lock.json
for b in cann et hexagon metal opencl openvino sycl virtgpu vulkan webgpu zdnn; do rm -rf ggml/src/ggml-$b; done
find models -type f ! -name ggml-vocab-llama-bpe.gguf -delete
find tools -name "*.md" -delete
cd ..
mkdir -p "$ROOT/.payload/l0"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - llama.cpp | xz -9 -T1 \
  > "$ROOT/.payload/l0/llamacpp-src.tar.xz"
cd "$ROOT/.payload/l0" && sha256sum -c "$ROOT/validate/engines/llamacpp_payload.sha256"
