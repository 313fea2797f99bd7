"""The two processes of validate/engines/handshake_probe.py (its docstring says what is timed and why): the remote
(prefill) side registers each case's pool and answers metadata requests; the local (decode) side creates a fresh
agent per (rep, case) and times vLLM 0.24's handshake path. NIXL and torch (or numpy with HS_MEM=DRAM) are imported
here only."""

from __future__ import annotations

import gc
import json
import os
import time
import uuid
from pathlib import Path

from validate.engines.handshake_probe import (
    GET_META_MSG,
    Case,
    NixlAgentMetadata,
    NixlHandshakePayload,
    build_fa_remote,
    calibrate,
    order,
    pool_metadata,
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


