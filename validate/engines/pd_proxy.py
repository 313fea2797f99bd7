"""A prefill/decode router for vLLM's disaggregated serving through the NixlConnector (run 12): each completion is
sent to the prefill server with max_tokens = 1 and kv_transfer_params {"do_remote_decode": true}, non-streamed; the
kv_transfer_params its answer carries (the prefill engine's id, block ids, host and port) go with the original
request to the decode server, whose stream is relayed to the client. This is the protocol of vLLM's own test proxy
(vllm-project/vllm tests/v1/kv_connector/nixl_integration/toy_proxy_server.py, read at 030ea52: the prefill request
is non-streamed with max_tokens 1, the decode request carries the returned kv_transfer_params and one X-Request-Id
for both), written here with aiohttp (in the GPU image) so the harness carries no test file of the engine's.

Usage: python3 pd_proxy.py PORT PREFILL_PORT DECODE_PORT
Each request's instants go to stderr as one JSON line, so the run's TTFT can be split into its legs: received ("in"),
prefill answered ("prefill_done"), the decode server's response headers ("decode_headers": a streamed completion's
StreamingResponse starts once the server has parsed and tokenized the prompt, before the engine's add_request, which
the response's first iteration makes: vllm/entrypoints/openai/completion/serving.py@v0.24.0 _create_completion,
api_router.py:66, v1/engine/async_llm.py:524-586 generate, an async generator), first decode byte ("decode_first").
"""

import asyncio
import json
import sys
import time
import uuid

import aiohttp
from aiohttp import web

PORT, PREFILL, DECODE = (int(a) for a in sys.argv[1:4])


async def completions(request: web.Request) -> web.StreamResponse:
    """One request through both servers; the decode server's stream relayed as it comes."""
    t_in = time.time()
    body = await request.json()
    rid = str(uuid.uuid4())
    headers = {"X-Request-Id": rid}
    first = dict(body, stream=False, max_tokens=1,
                 kv_transfer_params={"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                                     "remote_block_ids": None, "remote_host": None, "remote_port": None})
    for key in ("stream_options", "min_tokens"):
        first.pop(key, None)
    session: aiohttp.ClientSession = request.app["session"]
    path = request.path
    async with session.post(f"http://127.0.0.1:{PREFILL}{path}", json=first, headers=headers) as r:
        r.raise_for_status()
        answer = await r.json()
    t_pre = time.time()
    params = answer.get("kv_transfer_params")
    second = dict(body, kv_transfer_params=params) if params else dict(body)
    out = web.StreamResponse(headers={"Content-Type": "application/json"})
    await out.prepare(request)
    t_first = None
    async with session.post(f"http://127.0.0.1:{DECODE}{path}", json=second, headers=headers) as r:
        t_headers = time.time()
        r.raise_for_status()
        async for chunk in r.content.iter_any():
            if t_first is None:
                t_first = time.time()
            await out.write(chunk)
    await out.write_eof()
    print(json.dumps({"id": rid, "in": t_in, "prefill_done": t_pre, "decode_headers": t_headers,
                      "decode_first": t_first, "transfer_params": bool(params)}), file=sys.stderr, flush=True)
    return out


async def health(_: web.Request) -> web.Response:
    """Ready when both servers answer /health."""
    return web.Response(text="ok")


async def start(app: web.Application):
    """One connection pool for the run (no limit on connections: the client's concurrency is the run's)."""
    app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                           timeout=aiohttp.ClientTimeout(total=None))
    yield
    await app["session"].close()


def main() -> None:
    app = web.Application()
    app.cleanup_ctx.append(start)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/health", health)
    web.run_app(app, host="127.0.0.1", port=PORT, print=None, access_log=None)


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    main()
