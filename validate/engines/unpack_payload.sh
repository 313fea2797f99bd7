#!/bin/bash
# On the GPU machine, after every payload folder was copied to ~/stash (one device call each: site.part.N, zstd.bin,
# site.sha256, nixl.tar.zst or nixl.part.N, nixl.sha256, check_reqs.py, image_reqs.txt, fallback/): rejoin, check,
# unpack into ~/site, install the fallback wheel of every requirement the image's own packages fail (check_reqs.py,
# run with the image's python and no PYTHONPATH), then the import check. Usage: bash unpack_payload.sh  (prints "ok" last)
set -e
source "$(cd "$(dirname "$0")" && pwd)/payload_parts.sh"
cd ~/stash
cat $(ls site.part.* | sort -t. -k3 -n) > site.tar.zst
sha256sum -c site.sha256
# NIXL (the disaggregated runs' connector) is carried only when a run needs it: whole (nixl.tar.zst, .payload/nx) or
# in parts (nixl.part.N, .payload/n1 and n2: split_nixl.sh), rejoined here
join_parts nixl nixl.tar.zst
NIXL=0; [ -f nixl.tar.zst ] && NIXL=1
[ $NIXL = 1 ] && sha256sum -c nixl.sha256
chmod +x zstd.bin
mkdir -p ~/site
./zstd.bin -dc --long=27 site.tar.zst | tar xf - -C ~/site
[ $NIXL = 1 ] && ./zstd.bin -dc --long=27 nixl.tar.zst | tar xf - -C ~/site
rm -f site.tar.zst site.part.* nixl.part.*
python3 check_reqs.py image_reqs.txt | tee check_reqs.log || true
for name in $(grep '^FAIL' check_reqs.log | awk '{print $2}' | tr -d ':' | tr '-' '_' | sort -u); do
  whl=$(ls fallback/ | grep -i "^${name}-" | head -1)
  if [ -n "$whl" ]; then
    python3 -m pip install -q --no-deps --no-index --target ~/site --upgrade fallback/$whl && echo "fallback $whl"
  else
    echo "no fallback for $name"
  fi
done
CHECK="from vllm import LLM; import vllm.v1.attention.backends.flashinfer; import vllm.entrypoints.openai.api_server"
[ $NIXL = 1 ] && CHECK="$CHECK; import nixl; from nixl._api import nixl_agent"
PYTHONPATH=~/site python3 -c "$CHECK; print('ok')"
