"""The KV transfer of a disaggregated vLLM pair by itself (run 12, mechanism X): NIXL over UCX between two
processes, one per GPU, as vLLM's NixlConnector drives it (vllm/distributed/kv_transfer/kv_connector/v1/nixl/
base_worker.py @ v0.24.0: the decode side registers its KV regions, prepares a descriptor list of every (layer, K|V,
block) on both sides with prep_xfer_dlist, and per request READs the prompt's blocks with make_prepped_xfer +
transfer, then polls check_xfer_state in later steps).

Each case: D descriptors of S bytes read from GPU 0's region into GPU 1's. Timed separately: the post
(make_prepped_xfer + transfer, host time on the caller's thread: vLLM's post_duration) and the completion (post to
"DONE", polled without sleeping: the transfer's own duration). A request of P prompt tokens in blocks of 16 on an
L-layer model with separate K and V regions has D = 2 L ceil(P / 16) descriptors of 16 x kv_heads x head_dim x 2 bytes.

With ISOLATE=1 each process sees only its own GPU (CUDA_VISIBLE_DEVICES=0 / 1, as serve_pd.sh starts the two
servers), which is what decides whether UCX can open the peer's memory by CUDA IPC.

NUM_THREADS=N runs the reading agent's UCX backend with N threads, as vLLM configures it (num_threads 4 by default:
nixl/base_worker.py@v0.24.0), where the post returns before the transfer completes (run 12's engine histograms).

The one-off costs of a new pair (run 14): add_remote_agent (the metadata load) and the first two READs of the first
case, which open UCX's endpoints and map the peer's memory, are written apart ("first": post and completion of
reps 0 and 1), beside the steady reads.

Usage: [ISOLATE=1] [NUM_THREADS=4] python3 nixl_probe.py OUT_JSON   (two GPUs; torch and nixl importable)
"""

import json
import os
import statistics
import sys
import time

import torch
import torch.multiprocessing as mp

# (descriptors, bytes each, spacing in units of a descriptor: 1 back to back, 2 every other block, so no two merge)
CASES = [(64, 32768, 1), (512, 32768, 1), (4096, 32768, 1), (8192, 32768, 1), (4096, 8192, 1), (4096, 131072, 1),
         (1024, 131072, 1), (512, 32768, 2), (4096, 32768, 2), (4096, 8192, 2), (1024, 32768, 2), (2048, 32768, 2),
         (8192, 32768, 2), (128, 32768, 2)]
REGION_BYTES = 8192 * 131072  # the largest case's span, in one registered region a side


ISOLATE = os.environ.get("ISOLATE") == "1"
PEER_DEV, OWN_DEV = (0, 0) if ISOLATE else (0, 1)


def _remote(q_meta, q_done) -> None:
    """GPU 0: the prefill side. Registers its region, publishes its metadata and base address, waits."""
    from nixl._api import nixl_agent, nixl_agent_config

    torch.cuda.set_device(PEER_DEV)
    buf = torch.empty(REGION_BYTES, dtype=torch.uint8, device=f"cuda:{PEER_DEV}")
    agent = nixl_agent("prefill", nixl_agent_config(backends=["UCX"]))
    agent.register_memory([(buf.data_ptr(), REGION_BYTES, PEER_DEV, "")], "VRAM")
    q_meta.put((agent.get_agent_metadata(), buf.data_ptr()))
    q_done.get(timeout=600)


def _descs(base: int, n: int, size: int, dev: int, gap: int) -> list[tuple[int, int, int]]:
    """n descriptors of `size` bytes from `base`, one every `gap` descriptors' length."""
    return [(base + i * gap * size, size, dev) for i in range(n)]


def main() -> None:
    from nixl._api import nixl_agent, nixl_agent_config

    ctx = mp.get_context("spawn")
    q_meta, q_done = ctx.Queue(), ctx.Queue()
    peer = ctx.Process(target=_remote, args=(q_meta, q_done))
    if ISOLATE:  # the child inherits the environment at start; this process has not initialised CUDA yet
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    peer.start()
    if ISOLATE:
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
    meta, remote_base = q_meta.get(timeout=300)
    torch.cuda.set_device(OWN_DEV)
    buf = torch.empty(REGION_BYTES, dtype=torch.uint8, device=f"cuda:{OWN_DEV}")
    threads = int(os.environ.get("NUM_THREADS", "0"))
    agent = nixl_agent("decode", nixl_agent_config(backends=["UCX"], num_threads=threads))
    agent.register_memory([(buf.data_ptr(), REGION_BYTES, OWN_DEV, "")], "VRAM")
    t_add = time.perf_counter()
    name = agent.add_remote_agent(meta)
    add_s = time.perf_counter() - t_add
    out, first = [], None
    for n, size, gap in CASES:
        local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", _descs(buf.data_ptr(), n, size, OWN_DEV, gap), "VRAM")
        remote = agent.prep_xfer_dlist(name, _descs(remote_base, n, size, PEER_DEV, gap), "VRAM")
        idx = list(range(n))
        posts, dones = [], []
        for rep in range(8):
            t0 = time.perf_counter()
            h = agent.make_prepped_xfer("READ", local, idx, remote, idx, b"")
            state = agent.transfer(h)
            t1 = time.perf_counter()
            while state == "PROC":
                state = agent.check_xfer_state(h)
            t2 = time.perf_counter()
            assert state == "DONE", state
            agent.release_xfer_handle(h)
            if rep >= 2:  # the first reads open the UCX endpoints and map the peer's memory
                posts.append(t1 - t0)
                dones.append(t2 - t0)
            elif first is None or len(first["posts_s"]) < 2:
                first = first or {"descriptors": n, "bytes_each": size, "spacing": gap, "posts_s": [], "dones_s": []}
                first["posts_s"].append(t1 - t0)
                first["dones_s"].append(t2 - t0)
        agent.release_dlist_handle(local)
        agent.release_dlist_handle(remote)
        post, done = statistics.median(posts), statistics.median(dones)
        out.append({"descriptors": n, "bytes_each": size, "spacing": gap, "bytes": n * size, "post_s": post,
                    "done_s": done, "posts_s": posts, "dones_s": dones, "bytes_per_s": n * size / done})
        print(json.dumps(out[-1]), flush=True)
    q_done.put(1)
    peer.join(30)
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "isolate": ISOLATE, "num_threads": threads, "add_remote_agent_s": add_s,
                   "first": first, "cases": out}, f, indent=1)


if __name__ == "__main__":
    main()
