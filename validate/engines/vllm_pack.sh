#!/bin/bash
# Builds the vLLM 0.24.0 payload for the lent H200 here (any x86-64 Linux with pip and network; Python need not be
# 3.12), from nothing: the engine's dependency closure resolved for the image's Python (3.12, manylinux x86-64) by
# uv, one wheel at a time (--no-deps: a resolver run over the image's torch fails on its NCCL pin), less what the
# image already holds (device/KINDS.md's package list, kept in vllm_image_packages.txt) and the big optional ones,
# installed into one folder, pruned (FA2, SM100, DeepGEMM headers), packed with zstd and split into parts that fit
# one device call beside the working tree. Replaces the recipe's hand-made closure (../shared/recipes/vllm-h200).
#
#   bash validate/engines/vllm_pack.sh [PART_MB]     -> .payload/v0 .. vN (site.part.K; the last adds zstd.bin,
#                                                        site.sha256, check_reqs.py, image_reqs.txt), .payload/vf0, vf1.. (fallback/),
#                                                        .payload/VLLM-MANIFEST.txt
# Wheels are cached in .payload/wheels (a rerun downloads only what is missing). On the machine, calls back to back:
# `mkdir -p ~/stash && cp -r .payload/vK/* ~/stash/` per part and per vfK, then
# `bash validate/engines/unpack_payload.sh` (carry = the part; the working tree travels too: keep it small).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
PART_MB=${1:-50}
P=$ROOT/.payload; W=$P/wheels; S=$P/vllm-site
mkdir -p "$P" "$W"
command -v zstd > /dev/null || { echo "vllm_pack: zstd not found (apt install zstd)"; exit 2; }
UV=$(command -v uv || true)
if [ -z "$UV" ]; then python3 -m venv "$P/uv-venv" && "$P/uv-venv/bin/pip" install -q uv && UV=$P/uv-venv/bin/uv; fi
PIP="$(dirname "$UV")/pip"; [ -x "$PIP" ] || PIP="python3 -m pip"
# 1. the closure for the image's interpreter
echo "vllm==0.24.0" > "$P/vllm-req.in"
"$UV" pip compile "$P/vllm-req.in" --python-version 3.12 --python-platform x86_64-manylinux_2_28 --no-header \
  --index-url https://pypi.org/simple -q -o "$P/vllm-closure.txt"
# 2. less the image's packages (torch, triton, CUDA libraries ... from vllm_image_packages.txt) and the optional ones
#    the runs never import (each of these is tens to hundreds of MB; flashinfer-cubin left out means FlashInfer
#    compiles its sampler at the first engine start)
SKIP='^(torch|torchaudio|torchvision|triton|nvidia-.*|cuda-toolkit|cuda-bindings|cuda-pathfinder|cuda-python|tilelang|tokenspeed-.*|quack-kernels|humming-kernels|cuda-tile|z3-solver|flashinfer-cubin|opencv-python-headless)$'
grep -E '^[A-Za-z0-9._-]+==' "$P/vllm-closure.txt" | while IFS== read -r name ver; do
  norm=$(echo "$name" | tr 'A-Z_.' 'a-z--')
  echo "$norm" | grep -qE "$SKIP" && continue
  grep -qx "$norm" "$HERE/vllm_image_packages.txt" && continue
  echo "$name==$ver"
done > "$P/vllm-wheels.txt"
# 3. one wheel at a time (a shared run fails on abi3 / newer manylinux tags of single wheels)
PLAT=""; for t in manylinux_2_35 manylinux_2_34 manylinux_2_31 manylinux_2_28 manylinux_2_27 manylinux_2_24 \
  manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1 linux; do PLAT="$PLAT --platform ${t}_x86_64"; done
while read -r req; do
  stem=$(echo "${req%%==*}" | tr 'A-Z.-' 'a-z__'); ver=${req##*==}
  ls "$W" | tr 'A-Z' 'a-z' | grep -q "^${stem}-${ver}-" && continue
  $PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT --platform any \
    -d "$W" "$req" --index-url https://pypi.org/simple > /dev/null 2>&1 || { echo "vllm_pack: no wheel for $req"; exit 1; }
done < "$P/vllm-wheels.txt"
# 4. one folder, pruned: FA2 (Hopper runs FA3), the Rust front end, SM100 / DeepGEMM headers, other Pythons' builds,
#    bin/ (its scripts carry this host's shebang)
rm -rf "$S"; mkdir -p "$S"
WHEELS=$(while read -r req; do stem=$(echo "${req%%==*}" | tr 'A-Z.-' 'a-z__'); ver=${req##*==}
  ls "$W" | grep -i "^${stem}-${ver}-" | head -1 | sed "s|^|$W/|"; done < "$P/vllm-wheels.txt")
# shellcheck disable=SC2086
$PIP install -q --no-deps --no-index --no-compile --ignore-requires-python --only-binary=:all: --python-version 3.12 \
  --implementation cp $PLAT --platform any --target "$S" $WHEELS
rm -f "$S"/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so "$S"/vllm/vllm-rs "$S"/vllm/third_party/deep_gemm/_C.cpython-31[0134]-*.so
rm -rf "$S"/vllm/third_party/fmha_sm100 "$S"/vllm/third_party/deep_gemm/include "$S"/bin
# 5. what the carried wheels ask of the image's packages (check_reqs.py), and a fallback wheel (the closure's pin,
#    under 20 MB) for each such package, installed there only where the image fails the requirement
python3 "$HERE/check_reqs.py" make "$HERE/vllm_image_packages.txt" $WHEELS > "$P/image_reqs.txt"
rm -rf "$P/fallback"; mkdir -p "$P/fallback"
for name in $(sed 's/[<>=!~ ;#].*//' "$P/image_reqs.txt" | tr 'A-Z_.' 'a-z--' | sort -u); do
  echo "$name" | grep -qE "$SKIP" && continue  # the image's torch / CUDA stack is never replaced
  pin=$(grep -iE "^${name}==" "$P/vllm-closure.txt" | head -1) || true
  [ -z "$pin" ] && { pin=$(grep -iE "^$(echo "$name" | tr '-' '_')==" "$P/vllm-closure.txt" | head -1) || true; }
  [ -z "$pin" ] && continue
  $PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT --platform any \
    -d "$P/fallback" "$pin" --index-url https://pypi.org/simple > /dev/null 2>&1 || echo "vllm_pack: no fallback for $pin"
done
find "$P/fallback" -name '*.whl' -size +20M -print -delete | sed 's/^/vllm_pack: fallback too big, left out: /'
# 6. packed (reproducible order and stamps), checked, split into call-sized parts
(cd "$S" && find . -type f | LC_ALL=C sort > "$P/vllm-files.txt")
tar cf - -C "$S" --mtime=@0 --owner=0 --group=0 --numeric-owner -T "$P/vllm-files.txt" \
  | zstd -12 -T0 --long=27 -q -f -o "$P/site.tar.zst"
rm -rf "$P"/v[0-9]* "$P"/vf*; mkdir -p "$P/vsplit"
(cd "$P/vsplit" && split -b "${PART_MB}M" -d -a 1 "$P/site.tar.zst" site.part.)
(cd "$P" && sha256sum site.tar.zst > vsplit/site.sha256)
i=0; for part in $(ls "$P/vsplit"/site.part.* | sort -t. -k3 -n); do mkdir -p "$P/v$i"; mv "$part" "$P/v$i/"; i=$((i + 1)); done
last=$P/v$((i - 1))
mv "$P/vsplit/site.sha256" "$last/"; rmdir "$P/vsplit"
cp "$(command -v zstd)" "$last/zstd.bin"
cp "$HERE/check_reqs.py" "$P/image_reqs.txt" "$last/"
# the fallback wheels in folders of at most PART_MB each, a call each (run 25: 56 MB of them beside the ~9 MB tree
# was over a call's 64 MiB): vf0, vf1, ...
rm -rf "$P"/vf*; k=0; used=0; mkdir -p "$P/vf0/fallback"
for whl in $(ls -S "$P/fallback"); do
  size=$(stat -c %s "$P/fallback/$whl")
  if [ $used -gt 0 ] && [ $((used + size)) -gt $((PART_MB * 1048576)) ]; then
    k=$((k + 1)); used=0; mkdir -p "$P/vf$k/fallback"
  fi
  cp "$P/fallback/$whl" "$P/vf$k/fallback/"; used=$((used + size))
done
{ echo "vllm 0.24.0 payload, built $(date -u +%FT%TZ) on $(uname -m), $(wc -l < "$P/vllm-wheels.txt") wheels:"
  cat "$P/vllm-wheels.txt"; echo "parts: $i of ${PART_MB} MiB"; cat "$last/site.sha256"; } > "$P/VLLM-MANIFEST.txt"
du -sh "$P"/v[0-9]* "$P"/vf[0-9]* | tr '\n' ' '; echo
