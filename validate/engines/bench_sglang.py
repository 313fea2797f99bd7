"""`python -m sglang.bench_serving` with each request's send time kept, so a simulation can replay the client's own
arrivals (SGLang's --output-details keeps TTFTs and ITLs per request but not when each was sent).

Usage: ROOFLINE_SGLANG_SENDS=OUT_SENDS.json [ROOFLINE_SGLANG_PREFIX_LEN=L] python3 bench_sglang.py [sglang.bench_serving
       arguments ...]
Wraps the request function of the "sglang" backend (sglang.benchmark.serving.ASYNC_REQUEST_FUNCS, looked up when the
benchmark starts) and writes, in completion order of the wrapper's calls, each request's start (time.perf_counter, as
the benchmark's own), prompt and output lengths, success, TTFT, latency and the
server's cached (prefix-hit) tokens; the first --warmup-requests rows are the
warm-up. Where the image cannot import `datasets` (only the MMMU loader needs it), a stand-in module lets the benchmark
import; the random-ids dataset never calls it.
With ROOFLINE_SGLANG_PREFIX_LEN=L, every request (the warm-up too) is sent with one fixed L-token prefix before its
own token ids (random-ids with --tokenize-prompt: a list of ids), its prompt_len L more: a shared system prompt as
`vllm bench serve --random-prefix-len L` sends one, for SGLang's radix cache to hit (bench_serving's random-ids has
no prefix option).
"""
import dataclasses
import importlib
import json
import os
import random
import sys
import types


def shared_prefix(length: int) -> list[int]:
    """The fixed prefix: `length` token ids drawn once (seed 7) from 1,000 .. 29,999, inside every served model's
    vocabulary here (the tiny models' 32,000 the smallest), away from the special ids at either end."""
    rng = random.Random(7)
    return [rng.randrange(1000, 30000) for _ in range(length)]


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
    prefix = shared_prefix(int(os.environ.get("ROOFLINE_SGLANG_PREFIX_LEN") or 0))

    async def recorded(request_func_input, pbar=None):
        if prefix:
            if not isinstance(request_func_input.prompt, list):
                raise SystemExit("bench_sglang: ROOFLINE_SGLANG_PREFIX_LEN needs token-id prompts "
                                 "(--dataset-name random-ids --tokenize-prompt)")
            request_func_input = dataclasses.replace(request_func_input, prompt=prefix + request_func_input.prompt,
                                                     prompt_len=request_func_input.prompt_len + len(prefix))
        out = await inner(request_func_input, pbar)
        rows.append({"start_perf_s": out.start_time, "prompt_len": out.prompt_len, "output_len": out.output_len,
                     "success": out.success, "ttft_s": out.ttft, "latency_s": out.latency,
                     "cached_tokens": getattr(out, "cached_tokens", None)})
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
