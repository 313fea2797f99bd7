"""A pool-bound shared-prefix workload as a Mooncake trace (JSON lines: timestamp ms, input_length, output_length,
hash_ids of 512-token blocks), replayed by both sides as written: `vllm bench serve --dataset-name timed_trace
--timed-trace-chunk-hash-size 512 --timed-trace-sec-multiplier 0.001` (vLLM 0.24 benchmarks/datasets/datasets.py
TimedTrace: one token string per (hash id, block size), the requests sent at their timestamps, ignore_eos) and
`roofline simulate --trace` (serving.traces: the same ids share the same blocks).

Workload (a retrieval-style service): `docs` documents of `doc_blocks` x 512 tokens, each request one document picked
by a Zipf law (weight 1 / rank^s) followed by its own question (uniform `q` tokens, its own ids, the last block
partial) and `out` output tokens (uniform); Poisson arrivals. With the documents' working set above the pool, which
documents stay cached is the engine's eviction order (vLLM's free queue: serving.prefix_cache).

    python -m validate.engines.prefix_trace OUT.jsonl --seed 1 --requests 600 --rate 3 [--id-base 0]
Standard library only (it runs on the GPU machine too)."""

from __future__ import annotations

import argparse
import json
import math
import random

BLOCK = 512  # tokens per hash id (vLLM's --timed-trace-chunk-hash-size; roofline serving.trace_rules.BLOCK_TOKENS)


def rows(seed: int, requests: int, rate: float, docs: int = 32, doc_blocks: int = 6, zipf_s: float = 0.8,
         q: tuple[int, int] = (100, 900), out: tuple[int, int] = (64, 256), id_base: int = 0) -> list[dict]:
    """The trace's rows, in arrival order (ids from id_base: documents first, then each question's own)."""
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) ** zipf_s for k in range(docs)]
    next_id = id_base + docs * doc_blocks
    t, out_rows = 0.0, []
    for i in range(requests):
        if i:
            t += rng.expovariate(rate)
        d = rng.choices(range(docs), weights)[0]
        n_q = rng.randint(*q)
        q_blocks = math.ceil(n_q / BLOCK)
        ids = [id_base + d * doc_blocks + k for k in range(doc_blocks)] + list(range(next_id, next_id + q_blocks))
        next_id += q_blocks
        out_rows.append({"timestamp": round(t * 1000.0, 3), "input_length": doc_blocks * BLOCK + n_q,
                         "output_length": rng.randint(*out), "hash_ids": ids, "doc": d})
    return out_rows


def write(path: str, trace: list[dict]) -> None:
    with open(path, "w") as f:
        for r in trace:
            f.write(json.dumps(r) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--docs", type=int, default=32)
    p.add_argument("--doc-blocks", type=int, default=6)
    p.add_argument("--zipf", type=float, default=0.8)
    p.add_argument("--id-base", type=int, default=0)
    a = p.parse_args()
    write(a.out, rows(a.seed, a.requests, a.rate, a.docs, a.doc_blocks, a.zipf, id_base=a.id_base))


if __name__ == "__main__":
    main()
