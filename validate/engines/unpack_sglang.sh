#!/bin/bash
# On the GPU machine, after the SGLang payload folders were copied to ~/stash-sgl (one device call each:
# sglang.part.0 .. 3, then sglang.sha256, zstd.bin, check_reqs.py, image_reqs.txt, fallback/ with the last):
# rejoin, check, unpack into $ROOFLINE_SGLANG_SITE (default ~/sglang-site, apart from vLLM's ~/site), install the fallback wheel of
# every requirement the image's own packages fail (check_reqs.py, run with the image's python and no PYTHONPATH),
# then the import check and FA3's smoke test (sglang_smoke.py). Usage: bash unpack_sglang.sh  (prints "ok" last)
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
SITE=${ROOFLINE_SGLANG_SITE:-$HOME/sglang-site}
cd ~/stash-sgl
cat $(ls sglang.part.* | sort -t. -k3 -n) > sglang.tar.zst
sha256sum -c sglang.sha256
chmod +x zstd.bin
mkdir -p $SITE
./zstd.bin -dc --long=27 sglang.tar.zst | tar xf - -C $SITE
rm -f sglang.tar.zst sglang.part.*
python3 check_reqs.py image_reqs.txt | tee check_reqs.log || true
for name in $(grep '^FAIL' check_reqs.log | awk '{print $2}' | tr -d ':' | tr '-' '_' | sort -u); do
  whl=$(ls fallback/ | grep -i "^${name}-" | head -1)
  if [ -n "$whl" ]; then
    python3 -m pip install -q --no-deps --no-index --target $SITE --upgrade fallback/$whl && echo "fallback $whl"
  else
    echo "no fallback for $name"
  fi
done
PYTHONPATH=$SITE python3 -c "import sgl_kernel, flashinfer, xgrammar, sglang.srt.server_args, sglang.launch_server, \
sglang.bench_serving, sglang.srt.entrypoints.engine, sglang.srt.layers.attention.flashattention_backend; print('imports ok')"
PYTHONPATH=$SITE python3 $HERE/sglang_smoke.py || echo "FA3 smoke test failed: run_sglang.sh will use ROOFLINE_SGLANG_ATTN=flashinfer"
echo ok
