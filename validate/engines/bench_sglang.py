"""`python -m sglang.bench_serving` with each request's send time kept, so a simulation can replay the client's own
arrivals (SGLang's --output-details keeps TTFTs and ITLs per request but not when each was sent).

Usage: ROOFLINE_SGLANG_SENDS=OUT_SENDS.json python3 bench_sglang.py [sglang.bench_serving arguments ...]
Wraps the request function of the "sglang" backend (sglang.benchmark.serving.ASYNC_REQUEST_FUNCS, looked up when the
benchmark starts) and writes, in completion order of the wrapper's calls, each request's start (time.perf_counter, as
the benchmark's own), prompt and output lengths, success, TTFT and latency; the first --warmup-requests rows are the
warm-up. Where the image cannot import `datasets` (only the MMMU loader needs it), a stand-in module lets the benchmark
import; the random-ids dataset never calls it.
"""
import importlib
import json
import os
import sys
import types


def _datasets_stand_in() -> None:
    try:
        importlib.import_module("datasets")
    except Exception as e:  # noqa: BLE001 - any failure (missing, pyarrow too old) gets the same stand-in
        mod = types.ModuleType("datasets")
        why = repr(e)

        def load_dataset(*args, **kwargs):
            raise RuntimeError(f"datasets unavailable on this machine ({why})")

        mod.load_dataset = load_dataset
        sys.modules["datasets"] = mod
        print(f"bench_sglang: datasets stand-in ({type(e).__name__})", flush=True)


def main() -> None:
    """Run the benchmark's CLI with the recording wrapper; write the send log to $ROOFLINE_SGLANG_SENDS."""
    _datasets_stand_in()
    import sglang.benchmark.serving as serving

    rows = []
    inner = serving.ASYNC_REQUEST_FUNCS["sglang"]

    async def recorded(request_func_input, pbar=None):
        out = await inner(request_func_input, pbar)
        rows.append({"start_perf_s": out.start_time, "prompt_len": out.prompt_len, "output_len": out.output_len,
                     "success": out.success, "ttft_s": out.ttft, "latency_s": out.latency})
        return out

    serving.ASYNC_REQUEST_FUNCS["sglang"] = recorded
    sys.argv[0] = "sglang.bench_serving"
    try:
        serving.cli_main()
    finally:
        path = os.environ.get("ROOFLINE_SGLANG_SENDS")
        if path:
            with open(path, "w") as f:
                json.dump({"clock": "time.perf_counter", "requests": rows}, f)


if __name__ == "__main__":
    main()
