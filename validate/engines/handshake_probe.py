"""A fresh disaggregated vLLM pair's first NIXL handshake at several remote pool sizes, two processes on ONE GPU
(roofline/engines/timing.py mechanism 13).

What vLLM 0.24's decode worker does when it first meets a prefill engine
(vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py@v0.24.0), each part timed apart here:
- meta: _nixl_handshake asks the remote's side channel over a ZMQ REQ socket (:559-572; the remote answers from bytes
  encoded at start on a ROUTER socket, base_scheduler.py:289-321) and decodes NixlHandshakePayload, then
  NixlAgentMetadata with msgspec (:575-625);
- add: add_remote_agent's NIXL call, nixl_wrapper.add_remote_agent(agent_metadata) (:1491-1493: loadRemoteMD);
- build: one (address, length, device) tuple per (layer region, K|V, block) of the remote's WHOLE pool in Python,
  _build_fa_remote (:1308-1364), mirrored verbatim in handshake_layout.py (VllmWorkerMirror);
- descs: nixl_wrapper.get_xfer_descs(blocks_data, "VRAM") (:1582);
- prep: nixl_wrapper.prep_xfer_dlist(remote_agent_name, descs) (:1583-1585).
The rest of add_remote_agent (TransferTopology and TP-mapping bookkeeping, the compatibility check) is a few
attribute writes, not timed.

The pool is vLLM 0.24's FlashAttention one (HND, blocks first: flash_attn.py get_kv_cache_shape (num_blocks, 2, 16,
heads, head_dim)): one registered region per layer of num_blocks x page bytes (register_kv_caches :927-1132; one
cache per layer since split_k_and_v is off for a blocks-first layout, kv_connector/utils.py:511-515, 597-620), and
_build_fa_remote emits a K and a V descriptor of page / 2 per block of each region (virtually_split_kv_in_blocks).
Llama-3.1-8B: 32 regions, page 2 x 16 x 8 x 128 x 2 = 65,536 bytes (run 17's decode log: remote_block_len=65536),
its 839,648-token pool (0.85 of an H200) 52,478 blocks: 3,358,592 descriptors. The default cases are 1/8, 1/4 and
1/2 of that pool at its page and the whole pool's blocks at half the page (4 KV heads' blocks: 51.2 GiB, under the
~60 GiB the remote may register beside the rest of a kit; a descriptor's bytes are not read by any timed part).

Every (rep, case) is a fresh pair: the remote registers that case's pool (separate allocations, as vLLM's per-layer
KV tensors) and publishes its metadata; the local side creates a fresh agent as vLLM does (uuid name, num_threads
4, telemetry on: base_worker.py:319-331) with the process's heap frozen as the engine core's is
(vllm/utils/gc_utils.py:96-108, v1/engine/core.py:232), then times the handshake in its main thread. Cases rotate
across reps, so a host that changes speed mid-run does not load one size. `calib_s` beside each rep: a fixed
100,000-tuple build, the host's Python speed at that moment. After the timing (not in it) one READ of the last
descriptor checks the addresses against a byte pattern the remote wrote there (read_ok).

Usage: python3 -m validate.engines.handshake_probe OUT_JSON [--dry]   (from the repo root)
  HS_CASES   blocks:page_bytes,...  (default 6560:65536,13120:65536,26239:65536,52478:32768)
  HS_LAYERS  regions (32)    HS_REPS  reps per case (5)    HS_BUDGET_S  stop starting reps past this (100)
  HS_MEM     VRAM (default; torch, GPU 0 for both processes) or DRAM (numpy: a CPU-only check of the logic)
--dry prints the plan (no torch, no NIXL). OUT_JSON is rewritten after every rep, so a killed run keeps its reps.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import uuid
from pathlib import Path

from validate.engines.handshake_layout import (
    GET_META_MSG,
    Case,
    NixlAgentMetadata,
    NixlHandshakePayload,
    build_fa_remote,
    calibrate,
    order,
    pool_metadata,
    read_env,
    summarize,
)

PATTERN = 0xA5  # the remote writes it into its last descriptor's bytes; the local READ checks them


def _codec():
    """(name, encode, decode(bytes, type)): msgspec's msgpack as vLLM (base_worker.py:575-625), else pickle."""
    try:
        import msgspec
    except ImportError:
        import pickle
        return "pickle", pickle.dumps, lambda raw, _type: pickle.loads(raw)
    return "msgspec", msgspec.msgpack.encode, lambda raw, typ: msgspec.msgpack.Decoder(typ).decode(raw)


def _alloc(mem: str, nbytes: int):
    """(buffer, address) of `nbytes` on GPU 0 (torch) or in host memory (numpy)."""
    if mem == "VRAM":
        import torch
        buf = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
        return buf, buf.data_ptr()
    import numpy as np
    buf = np.empty(nbytes, dtype=np.uint8)
    return buf, buf.ctypes.data


def _serve(served: dict, codec: str) -> int | None:
    """The remote's side channel (base_scheduler.py:289-321: a ROUTER answering from encoded bytes): its port; None
    where zmq or msgspec is missing (the payload then travels through the control queue, untimed)."""
    try:
        import threading

        import zmq
    except ImportError:
        return None
    if codec != "msgspec":
        return None
    sock = zmq.Context().socket(zmq.ROUTER)
    port = sock.bind_to_random_port("tcp://127.0.0.1")

    def loop() -> None:
        while True:
            identity, _, _msg = sock.recv_multipart()
            sock.send_multipart((identity, b"", served[0]))

    threading.Thread(target=loop, daemon=True, name="probe_handshake_listener").start()
    return port


def _remote(ctrl_in, ctrl_out, mem: str, num_threads: int) -> None:
    """The prefill side: per case, registers a pool laid out as vLLM's and publishes its metadata."""
    os.environ.setdefault("UCX_RCACHE_MAX_UNRELEASED", "1024")  # vLLM's nixl_utils.py:32
    if mem == "VRAM":
        import torch
        torch.cuda.set_device(0)
    from nixl._api import nixl_agent, nixl_agent_config

    agent = nixl_agent(str(uuid.uuid4()), nixl_agent_config(num_threads=num_threads, capture_telemetry=True))
    codec, encode, _ = _codec()
    served: dict = {}
    port = _serve(served, codec)
    ctrl_out.put(("up", port))
    bufs, reg = [], None
    while (cmd := ctrl_in.get(timeout=900))[0] != "stop":
        if cmd[0] == "case":
            case = Case(*cmd[1])
            t0 = time.perf_counter()
            bufs = [_alloc(mem, case.blocks * case.page) for _ in range(case.layers)]
            bufs[-1][0][(case.blocks - 1) * case.page + case.page // 2:case.blocks * case.page] = PATTERN
            t1 = time.perf_counter()
            reg = agent.register_memory([(ptr, case.blocks * case.page, 0, "") for _, ptr in bufs], mem)
            t2 = time.perf_counter()
            meta = pool_metadata(case, [ptr for _, ptr in bufs], 0, agent.get_agent_metadata())
            served[0] = encode(NixlHandshakePayload("probe", encode(meta)))
            ctrl_out.put(("ready", {"alloc_s": t1 - t0, "register_s": t2 - t1,
                                    "agent_metadata_bytes": len(meta.agent_metadata)},
                          None if port else served[0]))
        else:  # "free"
            agent.deregister_memory(reg)
            bufs, reg = [], None
            if mem == "VRAM":
                import torch
                torch.cuda.empty_cache()
            ctrl_out.put(("freed",))


def _fetcher(port: int | None, encode, queued: bytes | None):
    """The local side's metadata fetch: a fresh ZMQ REQ socket as _nixl_handshake's (:559-572), else the bytes the
    control queue brought."""
    if port is None:
        return lambda: queued
    import zmq

    def fetch() -> bytes:
        ctx = zmq.Context()
        try:
            sock = ctx.socket(zmq.REQ)
            sock.connect(f"tcp://127.0.0.1:{port}")
            sock.setsockopt(zmq.RCVTIMEO, 5000)
            sock.send(encode((GET_META_MSG, 0)))
            return sock.recv()
        finally:
            ctx.destroy(linger=0)
    return fetch


def handshake(agent, fetch, decode, mem: str) -> tuple[dict, str, object, list]:
    """vLLM's handshake path, each part timed (module docstring): (seconds by part, remote name, prepped handle,
    the descriptor list)."""
    t0 = time.perf_counter()
    payload = decode(fetch(), NixlHandshakePayload)
    meta = decode(payload.agent_metadata_bytes, NixlAgentMetadata)
    t1 = time.perf_counter()
    name = agent.add_remote_agent(meta.agent_metadata)
    t2 = time.perf_counter()
    blocks_data = build_fa_remote(meta)
    t3 = time.perf_counter()
    descs = agent.get_xfer_descs(blocks_data, mem)
    t4 = time.perf_counter()
    handle = agent.prep_xfer_dlist(name, descs)
    t5 = time.perf_counter()
    return ({"meta_s": t1 - t0, "add_s": t2 - t1, "build_s": t3 - t2, "descs_s": t4 - t3, "prep_s": t5 - t4,
             "handshake_s": t5 - t0}, name, handle, blocks_data)


def verify(agent, handle, blocks_data: list, mem: str) -> tuple[bool, str]:
    """READ the last descriptor into a fresh local buffer and check the remote's pattern (after the timing)."""
    _addr, length, _dev = blocks_data[-1]
    buf, ptr = _alloc(mem, length)
    buf[:] = 0
    reg = agent.register_memory([(ptr, length, 0, "")], mem)
    local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", [(ptr, length, 0)], mem)
    try:
        xfer = agent.make_prepped_xfer("READ", local, [0], handle, [len(blocks_data) - 1], b"")
        state, deadline = agent.transfer(xfer), time.perf_counter() + 10
        while state == "PROC" and time.perf_counter() < deadline:
            state = agent.check_xfer_state(xfer)
        agent.release_xfer_handle(xfer)
        return state == "DONE" and bool((buf == PATTERN).all()), state
    except Exception as exc:  # a failed check is recorded; the timings stand
        return False, f"{type(exc).__name__}: {exc}"
    finally:
        agent.release_dlist_handle(local)
        agent.deregister_memory(reg)


def _header(env: dict) -> dict:
    import platform
    head = {"probe": "handshake_probe", "vllm_source": "v0.24.0 nixl/base_worker.py _nixl_handshake, add_remote_agent",
            "mem": env["mem"], "one_gpu": True, "num_threads": env["num_threads"], "budget_s": env["budget_s"],
            "python": platform.python_version(), "cases": [c.plan() for c in env["cases"]], "reps": []}
    try:
        from importlib.metadata import version
        head["nixl"] = version("nixl")
    except Exception:  # a payload without dist-info still runs
        head["nixl"] = None
    cpu = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
           if line.startswith("model name")] if Path("/proc/cpuinfo").is_file() else []
    head["cpu"], head["cpus"] = (cpu[0] if cpu else None), os.cpu_count()
    if env["mem"] == "VRAM":
        import torch
        head["torch"], head["gpu"] = torch.__version__, torch.cuda.get_device_name(0)
    return head


def _write(out: Path, result: dict) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(out)


def _one(env, case, rep, ctrl_in, ctrl_out, port, codec) -> dict:
    """One fresh pair at `case`: the remote registers, a fresh local agent times the handshake, both tear down."""
    from nixl._api import nixl_agent, nixl_agent_config

    name, encode, decode = codec
    ctrl_in.put(("case", (case.blocks, case.page, case.layers)))
    _, remote, queued = ctrl_out.get(timeout=300)
    t0 = time.perf_counter()
    agent = nixl_agent(str(uuid.uuid4()), nixl_agent_config(num_threads=env["num_threads"], capture_telemetry=True))
    create_s = time.perf_counter() - t0
    calib_s = calibrate()
    before = [g["collections"] for g in gc.get_stats()]
    parts, remote_name, handle, blocks_data = handshake(agent, _fetcher(port, encode, queued), decode, env["mem"])
    collections = [g["collections"] - b for g, b in zip(gc.get_stats(), before, strict=True)]
    read_ok, state = verify(agent, handle, blocks_data, env["mem"])
    agent.release_dlist_handle(handle)
    agent.remove_remote_agent(remote_name)
    del agent, blocks_data
    ctrl_in.put(("free",))
    ctrl_out.get(timeout=300)
    return {"rep": rep, "descriptors": case.descriptors, "blocks": case.blocks, "page_bytes": case.page, **parts,
            "calib_s": calib_s, "agent_create_s": create_s, "gc_collections": collections, "read_ok": read_ok,
            "read_state": state, "transport": "zmq" if port else "queue", "codec": name, **remote}


def run(out: Path, env: dict, t_start: float) -> int:
    """Both processes, every (rep, case) within the budget; OUT rewritten after each rep."""
    import multiprocessing as mp
    import traceback

    os.environ.setdefault("UCX_RCACHE_MAX_UNRELEASED", "1024")
    ctx = mp.get_context("spawn")
    ctrl_in, ctrl_out = ctx.Queue(), ctx.Queue()
    peer = ctx.Process(target=_remote, args=(ctrl_in, ctrl_out, env["mem"], env["num_threads"]), daemon=True)
    peer.start()
    result = _header(env)
    codec = _codec()
    cases, cost, rate = env["cases"], {}, 0.0
    try:
        port = ctrl_out.get(timeout=300)[1]
        gc.collect(0), gc.collect(1), gc.collect(2)  # vLLM's freeze_gc_heap (gc_utils.py:96-108)
        gc.freeze()
        result["startup_s"] = time.perf_counter() - t_start
        for rep in range(env["reps"]):
            for k in order(len(cases), rep):
                guess = cost.get(k, rate * cases[k].descriptors)
                if time.perf_counter() - t_start + guess > env["budget_s"]:
                    result["stopped_early"] = {"rep": rep, "case": k, "elapsed_s": time.perf_counter() - t_start}
                    raise StopIteration
                t0 = time.perf_counter()
                row = _one(env, cases[k], rep, ctrl_in, ctrl_out, port, codec)
                row["first"] = not result["reps"]
                cost[k] = time.perf_counter() - t0
                rate = max(rate, cost[k] / cases[k].descriptors)
                result["reps"].append(row)
                result["summary"] = summarize(result["reps"])
                print(json.dumps(row), flush=True)
                _write(out, result)
    except StopIteration:
        pass
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    finally:
        ctrl_in.put(("stop",))
        peer.join(30)
        result["wall_s"] = time.perf_counter() - t_start
        _write(out, result)
    return 0 if result["reps"] and "error" not in result else 1


def main(argv: list[str]) -> int:
    t_start = time.perf_counter()
    args = [a for a in argv if a != "--dry"]
    if len(args) != 1 and "--dry" not in argv:
        print("usage: python3 -m validate.engines.handshake_probe OUT_JSON [--dry]", file=sys.stderr)
        return 2
    try:
        env = read_env()
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if "--dry" in argv:
        print(json.dumps({"mem": env["mem"], "reps": env["reps"], "budget_s": env["budget_s"],
                          "num_threads": env["num_threads"], "order_rep0": order(len(env["cases"]), 0),
                          "cases": [c.plan() for c in env["cases"]]}, indent=1))
        return 0
    return run(Path(args[0]), env, t_start)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
