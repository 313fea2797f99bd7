"""vLLM 0.24's API-server loop costs, timed on the CPU it runs on (no GPU, no engine core): the work its one asyncio
loop does per engine step, per request-output, per merged token and per SSE chunk, for validate/engines/api_loop.py.

    python validate/engines/api_loop_bench.py costs OUT.json          (in a venv with vllm==0.24.0; ~1 min)
    python validate/engines/api_loop_bench.py serve OUT.json N T_MS   (the whole loop on this CPU, ~25 s)
    python validate/engines/api_loop_bench.py all FOLDER              (costs and serve at run 24's points, ~4 min)

`costs` times, with the same tokenizer as run 24's tiny-llama (validate/engines/models.py: WordLevel, Llama-3's
128,256 ids) and the real classes:
- OutputProcessor.process_outputs (v1/engine/output_processor.py:576) over a step of B EngineCoreOutputs of one new
  token each, with IterationStats (the server logs stats) and one Prometheus histogram observe per output (the
  inter-token latency, v1/metrics/loggers.py:1181), and the msgspec decode of the step's frames (core_client.py:1010),
  at B = 1, 4, 16, 64, 128: per step and per output by least squares;
- the merge of a lagging stream's outputs (RequestOutputCollector.put -> RequestOutput.add, output_processor.py:62-76)
  for k = 1..16 outputs a drain: per merged token;
- completion_stream_generator's per-chunk work (entrypoints/openai/completion/serving.py:306-451: the
  CompletionStreamResponse, model_dump_json(exclude_unset=True), the SSE line) for chunks of 1 and 8 tokens;
- the tokenisation of run 24's probe prompt (1,500 words) alone and beside a thread that runs Python without pause
  (a loop that is never idle: the GIL passes on the switch interval);
- host_probe.work() (validate/engines/host_probe.py), the project's pure-Python probe, median of 7, to place this CPU
  against a lease's host.
`serve` runs uvicorn (uvloop, httptools) with FastAPI, CORS and the Prometheus instrumentator (vLLM's build_app stack,
entrypoints/openai/api_server.py:241-269, serve/instrumentator/metrics.py:65) and a stand-in engine: a task that every
T ms puts one step of N outputs through the real msgspec decode and OutputProcessor into real RequestOutputCollectors,
each stream served as vLLM serves it (a generate loop over its collector, merge_async_iterators, the completion chunk,
StreamingResponse), N streaming clients in a second process and run 24's probe (20 prompts of 1,500 words, one at a
time, tokenised on a thread pool by make_async) in a third; the server on one CPU, the clients on another, the heap
frozen. It reports the server's CPU seconds, steps, chunks and tokens, the lag from a step's emission to its tokens'
SSE write, and each probe's stamps (handler, tokenised, emitted, collected, written) and client TTFT: the loop's own
queue, measured, to check api_loop.py on this CPU.
"""


import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _sibling(name: str):
    """validate/engines/NAME.py loaded by its path: this venv has vllm and not roofline, so not `import validate`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_api_loop_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

VOCAB = 128256
PROMPT = 64


def _tokenizer():
    d = _sibling("models").write(tempfile.mkdtemp(), "tiny-llama")
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(d)


def _processor(tok, n: int, tag: str = "r"):
    from vllm.sampling_params import RequestOutputKind, SamplingParams
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.engine.output_processor import OutputProcessor, RequestOutputCollector

    op = OutputProcessor(tok, log_stats=True)
    queues = {}
    for i in range(n):
        rid = f"{tag}{i}"
        sp = SamplingParams(max_tokens=12000, ignore_eos=True, output_kind=RequestOutputKind.DELTA)
        req = EngineCoreRequest(request_id=rid, prompt_token_ids=list(range(5, 5 + PROMPT)), mm_features=None,
                                sampling_params=sp, pooling_params=None, arrival_time=time.time(), lora_request=None,
                                cache_salt=None, data_parallel_rank=None, external_req_id=rid)
        q = RequestOutputCollector(RequestOutputKind.DELTA, rid)
        op.add_request(req, None, None, 0, q)
        queues[rid] = q
    return op, queues


def _step(ids, rng):
    from vllm.v1.engine import EngineCoreOutput

    return [EngineCoreOutput(request_id=r, new_token_ids=[rng.randrange(3, VOCAB)]) for r in ids]


def time_steps(tok, b: int, steps: int = 400) -> float:
    """Seconds a step of b outputs costs the loop: msgspec decode of the step's frames, process_outputs with
    IterationStats, one histogram observe per output, every collector drained (no merging)."""
    import random

    from prometheus_client import CollectorRegistry, Histogram
    from vllm.v1.engine import EngineCoreOutputs
    from vllm.v1.metrics.stats import IterationStats
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    rng = random.Random(b)
    op, queues = _processor(tok, b)
    ids = list(queues)
    enc, dec = MsgpackEncoder(), MsgpackDecoder(EngineCoreOutputs)
    hist = Histogram("itl", "itl", ["engine"], registry=CollectorRegistry(),
                     buckets=[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                              10.0, 20.0, 40.0, 80.0]).labels("0")
    frames = [enc.encode(EngineCoreOutputs(outputs=_step(ids, rng), timestamp=time.monotonic()))
              for _ in range(steps + 20)]
    times = []
    for f in frames:
        t = time.perf_counter()
        outs = dec.decode(f)
        stats = IterationStats()
        op.process_outputs(outs.outputs, outs.timestamp, stats)
        for itl in stats.inter_token_latencies_iter:
            hist.observe(itl)
        times.append(time.perf_counter() - t)
        for q in queues.values():
            q.get_nowait()
    return statistics.median(times[20:])


def time_merge(tok, k: int, reps: int = 300) -> float:
    """Seconds the loop spends on k outputs of one request between two drains (k - 1 merges), per drain."""
    import random

    rng = random.Random(k)
    op, queues = _processor(tok, 1, "m")
    (rid, q), = queues.items()
    steps = [_step([rid], rng) for _ in range(k * (reps + 10))]
    times = []
    for r in range(reps + 10):
        t = time.perf_counter()
        for s in steps[r * k:(r + 1) * k]:
            op.process_outputs(s, time.monotonic(), None)
        q.get_nowait()
        times.append(time.perf_counter() - t)
    return statistics.median(times[10:])


def chunk(out, rid: str, created: int) -> str:
    """completion_stream_generator's work for one RequestOutput (serving.py:306-451, stream_options.include_usage
    as `vllm bench serve` sends it; no logprobs, no echo, no continuous usage)."""
    from vllm.entrypoints.openai.completion.protocol import CompletionResponseStreamChoice, CompletionStreamResponse

    o = out.outputs[0]
    resp = CompletionStreamResponse(id=rid, object="text_completion", created=created, model="tiny-llama",
                                    choices=[CompletionResponseStreamChoice(index=0, text=o.text, logprobs=None,
                                                                            finish_reason=o.finish_reason,
                                                                            stop_reason=o.stop_reason,
                                                                            prompt_token_ids=None, token_ids=None)])
    return f"data: {resp.model_dump_json(exclude_unset=True)}\n\n"


def time_chunk(tok, k: int, reps: int = 2000) -> float:
    """Seconds one SSE chunk of k tokens costs completion_stream_generator (outputs built beforehand)."""
    import random

    rng = random.Random(7)
    op, queues = _processor(tok, 1, "c")
    (rid, q), = queues.items()
    outs = []
    for _ in range(reps + 50):
        for _ in range(k):
            op.process_outputs(_step([rid], rng), time.monotonic(), None)
        outs.append(q.get_nowait())
    times = []
    for o in outs:
        t = time.perf_counter()
        chunk(o, "cmpl-x", 0)
        times.append(time.perf_counter() - t)
    return statistics.median(times[50:])


def time_convoy(tok, prompts: int = 30) -> dict[str, list[float]]:
    """Seconds to tokenise run 24's probe prompt (1,500 words) alone, and beside a thread that runs pure Python without
    pause (a loop that is never idle): the GIL passes between them on the switch interval (sys.getswitchinterval)."""
    import random
    import threading

    rng = random.Random(1)
    texts = [" ".join(f"w{rng.randrange(3, VOCAB)}" for _ in range(PROBE_WORDS)) for _ in range(prompts)]

    def encode_all() -> list[float]:
        out = []
        for text in texts:
            t = time.perf_counter()
            tok.encode(text, add_special_tokens=False)
            out.append(time.perf_counter() - t)
        return out

    alone = encode_all()
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(100))

    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.05)
    beside = encode_all()
    stop.set()
    th.join()
    return {"switch_interval_s": sys.getswitchinterval(), "alone_s": alone, "beside_busy_thread_s": beside}


def probe() -> float:
    work = _sibling("host_probe").work
    times = []
    for _ in range(7):
        t = time.perf_counter()
        work()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _fit(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def costs(out: Path) -> None:
    import platform

    import vllm

    _pin(0)
    tok = _tokenizer()
    p0 = probe()
    bs = (1, 4, 16, 64, 128)
    step = {b: time_steps(tok, b) for b in bs}
    c_step, c_out = _fit(bs, [step[b] for b in bs])
    ks = (1, 2, 4, 8, 16)
    merge = {k: time_merge(tok, k) for k in ks}
    m0, m_tok = _fit(ks, [merge[k] for k in ks])
    ch = {k: time_chunk(tok, k) for k in (1, 8)}
    convoy = time_convoy(tok)
    p1 = probe()
    res = {"about": __doc__.splitlines()[0], "vllm": vllm.__version__, "python": platform.python_version(),
           "cpu": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d"),
           "host_probe_s": [p0, p1], "step_s_by_outputs": step, "step_fixed_s": c_step, "step_per_output_s": c_out,
           "drain_s_by_outputs": merge, "drain_fixed_s": m0, "per_merged_output_s": m_tok,
           "chunk_s_by_tokens": ch, "tokenise_probe": convoy}
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


# ---- serve: the whole loop on this CPU ----

def _server(port: int, n: int, t_step: float, seconds: float, result: str) -> None:
    import random

    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.middleware.cors import CORSMiddleware
    from fastapi.responses import StreamingResponse
    from prometheus_fastapi_instrumentator import Instrumentator
    from vllm.v1.metrics.stats import IterationStats

    _pin(0)
    tok = _tokenizer()
    op, queues = _processor(tok, 0)
    from vllm.sampling_params import RequestOutputKind, SamplingParams
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.engine.output_processor import RequestOutputCollector

    app = FastAPI()
    Instrumentator().instrument(app)
    app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_credentials=False, allow_methods=["*"],
                       allow_headers=["*"])
    active: list[str] = []
    joining: list = []  # probes tokenized, their first token in the next step
    probes: list[dict] = []
    from concurrent.futures import ThreadPoolExecutor

    from vllm.utils.async_utils import make_async, merge_async_iterators

    # the renderer's tokenizer offload (renderers/base.py:86-93: a thread pool, make_async of tokenizer.encode)
    encode = make_async(tok.encode, executor=ThreadPoolExecutor(max_workers=1))
    emitted: list[float] = []  # emission time of step s
    stats = {"steps": 0, "chunks": 0, "tokens": 0, "lags": [], "cpu0": None, "t0": None}
    rng = random.Random(0)
    started = asyncio.Event()
    if n == 0:
        started.set()

    async def engine() -> None:
        from vllm.v1.engine import EngineCoreOutputs
        from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

        enc, dec = MsgpackEncoder(), MsgpackDecoder(EngineCoreOutputs)
        await started.wait()
        await asyncio.sleep(2.0)  # every stream connected
        stats["cpu0"], stats["t0"] = time.process_time(), time.perf_counter()
        nxt = time.perf_counter()
        end = nxt + seconds
        while nxt < end:
            # the engine core runs apart: its steps keep their period, and the loop's socket reader takes every step
            # that came while the loop was busy at once (core_client.py:1005-1043), each through process_outputs
            while nxt <= time.perf_counter() and nxt < end:
                step_ids = active + [r for r, _ in joining]
                frame = enc.encode(EngineCoreOutputs(outputs=_step(step_ids, rng), timestamp=time.monotonic()))
                emitted.append(nxt)
                stamped = [stamp for _, stamp in joining]
                for stamp in stamped:
                    stamp["first_emitted"] = nxt
                joining.clear()
                outs = dec.decode(frame)
                st = IterationStats()
                op.process_outputs(outs.outputs, outs.timestamp, st)
                for stamp in stamped:
                    stamp["processed"] = time.perf_counter()
                stats["steps"] += 1
                nxt += t_step
            await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
        stats["cpu"] = time.process_time() - stats["cpu0"]
        stats["wall"] = time.perf_counter() - stats["t0"]
        for q in queues.values():
            q.put(RuntimeError("end"))

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        rid = f"s{len(queues)}"
        sp = SamplingParams(max_tokens=12000, ignore_eos=True, output_kind=RequestOutputKind.DELTA)
        req = EngineCoreRequest(request_id=rid, prompt_token_ids=list(range(5, 5 + PROMPT)), mm_features=None,
                                sampling_params=sp, pooling_params=None, arrival_time=time.time(),
                                lora_request=None, cache_salt=None, data_parallel_rank=None, external_req_id=rid)
        q = RequestOutputCollector(RequestOutputKind.DELTA, rid)
        op.add_request(req, body.get("prompt"), None, 0, q)
        queues[rid] = q
        active.append(rid)
        if len(active) == n:
            started.set()

        async def generate():
            # AsyncLLM.generate's loop (v1/engine/async_llm.py:576-586)
            while True:
                yield q.get_nowait() or await q.get()

        async def gen():
            created = int(time.time())
            try:
                # completion's generator iterates merge_async_iterators (utils/async_utils.py:104-108) over generate
                async for _, out in merge_async_iterators(generate()):
                    got = len(emitted)
                    text = chunk(out, rid, created)
                    ntok = len(out.outputs[0].token_ids)
                    if stats["t0"] is not None and "cpu" not in stats:
                        stats["chunks"] += 1
                        stats["tokens"] += ntok
                        stats["lags"].append(time.perf_counter() - emitted[got - ntok])
                    yield text
            except RuntimeError:
                yield "data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    @app.post("/probe")
    async def probe_one(request: Request):
        stamp = {"handler": time.perf_counter()}
        body = await request.json()
        ids = await encode(body["prompt"], add_special_tokens=False)
        stamp["tokenized"] = time.perf_counter()
        rid = f"p{len(probes)}"
        sp = SamplingParams(max_tokens=1, ignore_eos=True, output_kind=RequestOutputKind.DELTA)
        req = EngineCoreRequest(request_id=rid, prompt_token_ids=ids, mm_features=None, sampling_params=sp,
                                pooling_params=None, arrival_time=time.time(), lora_request=None, cache_salt=None,
                                data_parallel_rank=None, external_req_id=rid)
        q = RequestOutputCollector(RequestOutputKind.DELTA, rid)
        op.add_request(req, None, None, 0, q)
        joining.append((rid, stamp))
        stamp["tokens"] = len(ids)
        probes.append(stamp)

        async def gen():
            out = q.get_nowait() or await q.get()
            stamp["collected"] = time.perf_counter()
            op.abort_requests([rid], internal=True)
            yield chunk(out, rid, 0)
            stamp["written"] = time.perf_counter()
            yield "data: [DONE]\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def main() -> None:
        from vllm.utils.gc_utils import freeze_gc_heap

        freeze_gc_heap()  # as vLLM's server does after start-up (entrypoints/serve/utils/server_utils.py:477)
        cfg = uvicorn.Config(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools", log_level="error")
        server = uvicorn.Server(cfg)
        task = asyncio.create_task(engine())
        srv = asyncio.create_task(server.serve())
        await task
        await asyncio.sleep(1.0)
        server.should_exit = True
        await srv
        lags = sorted(stats.pop("lags"))
        stats["lag_mean_s"] = statistics.fmean(lags) if lags else None
        stats["lag_p50_s"] = lags[len(lags) // 2] if lags else None
        stats["lag_p90_s"] = lags[int(0.9 * len(lags))] if lags else None
        stats["probes"] = probes
        Path(result).write_text(json.dumps(stats))

    import uvloop

    uvloop.run(main())


PROBE_WORDS, PROBES, PROBE_AFTER_S, PROBE_GAP_S = 1500, 20, 5.0, 0.06


async def _probe_client(port: int, out: list) -> None:
    """run 24's probe: 20 prompts of 1,500 words, one at a time, the client's time to the first data line."""
    import random

    import aiohttp

    rng = random.Random(800)
    await asyncio.sleep(PROBE_AFTER_S)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as s:
        for _ in range(PROBES):
            prompt = " ".join(f"w{rng.randrange(3, VOCAB)}" for _ in range(PROBE_WORDS))
            t = time.perf_counter()
            async with s.post(f"http://127.0.0.1:{port}/probe", json={"prompt": prompt, "stream": True}) as r:
                async for _ in r.content.iter_any():
                    out.append(time.perf_counter() - t)
                    break
            await asyncio.sleep(PROBE_GAP_S)


def _pin(cpu: int) -> None:
    """The server's process alone on one CPU, the clients on another: the loop's share of a CPU is then the
    loop's own, as on the 16-CPU H200 host."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})


def _probe_proc(port: int, path: str) -> None:
    import uvloop

    _pin(1)

    out: list = []
    uvloop.run(_wait_then(port, _probe_client(port, out)))
    Path(path).write_text(json.dumps(out))


async def _wait_port(port: int) -> None:
    """Until the server listens on `port` (it imports vllm and loads the tokenizer first), 120 s at most."""
    for _ in range(240):
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.5)


async def _wait_then(port: int, coro) -> None:
    await _wait_port(port)
    await coro


async def _clients(port: int, n: int) -> None:
    import aiohttp

    async def one(session):
        async with session.post(f"http://127.0.0.1:{port}/v1/completions",
                                json={"prompt": "w5 w6", "stream": True, "max_tokens": 12000}) as r:
            async for _ in r.content.iter_any():
                pass

    await _wait_port(port)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as s:
        await asyncio.gather(*(one(s) for _ in range(n)))


def serve(out: Path, n: int, t_ms: float, seconds: float = 15.0) -> None:
    import multiprocessing as mp
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = tempfile.mktemp()
    p = mp.get_context("spawn").Process(target=_server, args=(port, n, t_ms / 1e3, seconds, res))
    p.start()
    pres = tempfile.mktemp()
    pp = mp.get_context("spawn").Process(target=_probe_proc, args=(port, pres))
    pp.start()
    import uvloop

    _pin(1)
    if n:
        uvloop.run(_clients(port, n))
    pp.join()
    p.join()
    stats = json.loads(Path(res).read_text())
    stats["probe_client_ttft_s"] = json.loads(Path(pres).read_text())
    stats.update({"n": n, "t_step_s": t_ms / 1e3, "host_probe_s": probe()})
    out.write_text(json.dumps(stats, indent=1) + "\n")
    print(json.dumps(stats, indent=1))


# run 24's points (the engine's step period while N streamed, its inter-token latency) and two deeper loads
SERVE_POINTS = ((0, 2.0), (4, 2.09), (16, 1.94), (64, 2.85), (64, 1.8), (64, 1.2))


def run_all(folder: Path) -> None:
    """costs.json and serve-N-T.json for every point, in one call (~4 min; on a GPU lease too, no GPU used)."""
    folder.mkdir(parents=True, exist_ok=True)
    costs(folder / "costs.json")
    for n, t_ms in SERVE_POINTS:
        serve(folder / f"serve-{n}-{t_ms}.json", n, t_ms)


if __name__ == "__main__":
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if sys.argv[1] == "costs":
        costs(Path(sys.argv[2]))
    elif sys.argv[1] == "all":
        run_all(Path(sys.argv[2]))
    else:
        serve(Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
