"""A streaming client for llama-server's /completion: Poisson sends (or a closed loop of C clients), prompts of
random token ids of a fixed length, a fixed number of outputs (ignore_eos), every chunk's arrival kept.

Standard library only (it runs on the GPU machine beside the server). The send schedule is `schedule(seed, rate, n)`,
the one the prediction replays (llamacpp_predict.py), so the measured and the simulated runs send the same requests
at the same instants. Each request: {"prompt": [ids], "n_predict": OUT, "ignore_eos": true, "stream": true,
"return_tokens": true}; llama-server holds back a token that ends inside a UTF-8 character and sends it with the
next one (tools/server/server-context.cpp: `incomplete`), so a chunk carries the ids of every token it holds
("tokens") and the last chunk the server's own "timings" (prompt_ms, predicted_ms, predicted_n).

Usage: python3 validate/engines/llamacpp_client.py PORT OUT.json --prompt P --output N --requests N --seed S
                                                    (--rate R | --concurrency C)
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import threading
import time

VOCAB_LO, VOCAB_HI = 128, 100_000  # ordinary BPE tokens of Llama-3's vocabulary (no special tokens)


def schedule(seed: int, rate: float, n: int) -> list[float]:
    """Send instants (s from the first) of n Poisson arrivals at `rate` per second; rate 0: all at 0 (a closed loop
    of --concurrency clients then paces them)."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        if rate > 0:
            t += rng.expovariate(rate)
    return out


def prompt_ids(seed: int, i: int, length: int) -> list[int]:
    """Request i's prompt: `length` random ordinary token ids (no two requests share a prefix)."""
    rng = random.Random(seed * 1_000_003 + i)
    return [rng.randrange(VOCAB_LO, VOCAB_HI) for _ in range(length)]


GREEDY = {"samplers": ["top_k"], "top_k": 1}  # per-request sampler chain (server-task.cpp params_from_json)


def one(port: int, ids: list[int], output: int, t0: float, greedy: bool = False, slot: int = -1) -> dict:
    """One streamed request; times are perf_counter seconds from t0. greedy: the chain is top_k 1 alone, not the
    server's default chain (penalties; dry; top_n_sigma; top_k; typ_p; top_p; min_p; xtc; temperature). slot >= 0: the
    request asks for that slot ("id_slot": the server defers it while the slot is busy)."""
    body = json.dumps({"prompt": ids, "n_predict": output, "ignore_eos": True, "stream": True,
                       "return_tokens": True, "cache_prompt": True, **(GREEDY if greedy else {}),
                       **({"id_slot": slot} if slot >= 0 else {})}).encode()
    rec: dict = {"send_s": time.perf_counter() - t0, "prompt_len": len(ids), "output_len": output,
                 "chunks": [], "error": None}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/completion", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            rec["error"] = f"HTTP {resp.status}: {resp.read()[:200]!r}"
            return rec
        while line := resp.readline():
            if not line.startswith(b"data: "):
                continue
            now = time.perf_counter() - t0
            d = json.loads(line[6:])
            rec["chunks"].append([now, len(d.get("tokens") or [])])
            if d.get("stop"):
                rec["timings"] = d.get("timings")
                break
        conn.close()
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
    rec["end_s"] = time.perf_counter() - t0
    return rec


def run(port: int, prompt: int, output: int, n: int, seed: int, rate: float, concurrency: int,
        greedy: bool = False, slots: tuple[int, ...] = ()) -> dict:
    """Sends the schedule's requests (rate > 0: at its instants; else `concurrency` clients back to back); `slots`:
    request i asks for slot slots[i % len(slots)]."""
    sends = schedule(seed, rate, n)
    results: list[dict | None] = [None] * n
    gate = threading.Semaphore(concurrency if concurrency > 0 else n)
    t0 = time.perf_counter()

    def go(i: int) -> None:
        try:
            results[i] = one(port, prompt_ids(seed, i, prompt), output, t0, greedy,
                             slots[i % len(slots)] if slots else -1)
        finally:
            gate.release()

    threads = []
    for i, at in enumerate(sends):
        delay = at - (time.perf_counter() - t0)
        if delay > 0:
            time.sleep(delay)
        gate.acquire()
        th = threading.Thread(target=go, args=(i,), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    return {"prompt": prompt, "output": output, "requests": n, "seed": seed, "rate": rate,
            "concurrency": concurrency, "greedy": greedy, "slots": list(slots), "schedule_s": sends,
            "results": results}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("out")
    p.add_argument("--prompt", type=int, required=True)
    p.add_argument("--output", type=int, required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--greedy", action="store_true", help="each request's sampler chain: top_k 1 alone")
    p.add_argument("--slots", default="", help="comma-separated slot ids: request i asks for slots[i %% n]")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--rate", type=float)
    g.add_argument("--concurrency", type=int)
    a = p.parse_args()
    for name in ("prompt", "output", "requests"):
        if getattr(a, name) < 1:
            p.error(f"--{name}: {getattr(a, name)} must be at least 1")
    if (a.rate is not None and a.rate <= 0) or (a.concurrency is not None and a.concurrency < 1):
        p.error("--rate / --concurrency: must be positive")
    doc = run(a.port, a.prompt, a.output, a.requests, a.seed, a.rate or 0.0, a.concurrency or 0, a.greedy,
              tuple(int(s) for s in a.slots.split(",") if s))
    with open(a.out, "w") as f:
        json.dump(doc, f)
    bad = sum(1 for r in doc["results"] if r is None or r["error"])
    print(f"{a.out}: {a.requests} requests, {bad} failed")


if __name__ == "__main__":
    main()
