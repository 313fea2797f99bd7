# Sourced by run25.sh and run25b.sh on the GPU machine, from the repository's root: unpack_and_record unpacks the
# payload copied to ~/stash (unpack_payload.sh), puts it on PYTHONPATH and writes $OUT/env.txt: the time, the
# checkout (.sha), the host's CPUs, Python, the GPU and driver, the kernel, the load and the API stack's versions.
unpack_and_record() {
  bash validate/engines/unpack_payload.sh 2>&1 | tail -5
  export PYTHONPATH=~/site
  { date -u +%FT%TZ; echo "checkout $(cat .sha 2>/dev/null)"; echo "cpus $(nproc)"
    lscpu | grep -E 'Model name|^Socket|Thread|NUMA node\(s\)'
    python3 -V; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; uptime; } > "$OUT/env.txt" 2>&1
  python3 - >> "$OUT/env.txt" <<'PY'
import importlib.metadata as m
for p in ("vllm", "torch", "uvloop", "uvicorn", "fastapi", "starlette", "transformers", "tokenizers", "msgspec", "pyzmq",
          "pydantic", "prometheus-fastapi-instrumentator"):
    try:
        print(p, m.version(p))
    except m.PackageNotFoundError:
        print(p, "absent")
PY
}
