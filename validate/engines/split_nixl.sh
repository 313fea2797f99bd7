#!/bin/bash
# NIXL's tarball (PAYLOAD/nx/nixl.tar.zst, 27.2 MB, with nixl.sha256) does not fit one device call beside the ~41 MB
# tracked tree (64 MiB a call): split it in two halves, PAYLOAD/n1/nixl.part.0 and PAYLOAD/n2/nixl.part.1 (with
# nixl.sha256), each carried in its own call and copied into ~/stash like the site parts; unpack_payload.sh rejoins
# nixl.part.* into nixl.tar.zst and checks the sha. PAYLOAD/nx is only read. Re-running replaces n1/ and n2/.
# Usage: bash validate/engines/split_nixl.sh [PAYLOAD]   (default: this checkout's .payload)
set -euo pipefail
P=${1:-$(cd "$(dirname "$0")/../.." && pwd)/.payload}
SRC=$P/nx/nixl.tar.zst
(cd "$P/nx" && sha256sum -c --quiet nixl.sha256)
half=$(( ($(stat -c %s "$SRC") + 1) / 2 ))
mkdir -p "$P/n1" "$P/n2"
rm -f "$P"/n1/nixl.part.* "$P"/n2/nixl.part.* "$P/n2/nixl.sha256"
split -b "$half" -d -a 1 "$SRC" "$P/n1/nixl.part."
mv "$P/n1/nixl.part.1" "$P/n2/"
cp "$P/nx/nixl.sha256" "$P/n2/"
want=$(awk '{print $1}' "$P/nx/nixl.sha256")
got=$(cat "$P/n1/nixl.part.0" "$P/n2/nixl.part.1" | sha256sum | awk '{print $1}')
[ "$want" = "$got" ] || { echo "split_nixl: the parts do not rejoin to nixl.tar.zst's sha256" >&2; exit 1; }
du -b "$P/n1" "$P/n2"
