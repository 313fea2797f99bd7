"""Run 22 (run22.sh): vLLM's served MoE judged out of sample after the one-call replay's fixed cost left the FA3 decode
and fused-MoE laws (derive.py --micro4, session 27), at rates and a concurrency run 20 did not serve.

    python -m validate.engines.run22 predict OUT.json                      (before the run; committed)
    python -m validate.engines.run22 compare RESULTS --predicted P [--out REPORT]

Run 20's kit (run20.py's traces, sims, predict and compare) on new runs: Qwen3-30B-A3B on one `vllm serve`, `vllm
bench serve --dataset-name random --random-input-len 1500 --random-range-ratio 0.8 --random-output-len 64
--ignore-eos --num-prompts 240`: cold (seed 201, 6 req/s, the server's first traffic: `--cold-start` judged), then
steady r6 (seed 203, 6 req/s), r12 (204, 12 req/s), c16 (205, --max-concurrency 16). A seed fixes the lengths
(traces-run20/lengths.json, drawn with vLLM 0.24.0's RandomDataset) and, with the rate, the sends
(predict.vllm_arrivals). The host is calibrated first as a user does (stage K1, serve_tiny.sh at concurrency 1); the
prediction is committed at S = 1, 1.36 (run 20's lease) and 1.75 (run 17's), judged at S from K1, the model at the
committed checkout."""

from __future__ import annotations

from functools import partial

from validate.engines import labrun, run20

RUNS = {"cold": (201, 6.0, 0), "r6": (203, 6.0, 0), "r12": (204, 12.0, 0), "c16": (205, float("inf"), 16)}
HOSTS = (1.0, 1.36, 1.75)
HYPOTHESES = {
    "H1": "at S from stage K1, r6's and r12's decode steps by batch (their ITLs under 25 ms, itl_by_batch.py) within "
          "5 % of the model's at every batch with 30 or more tokens "
          "(run 20 before the replay's removal: +4.5 to +11 %)",
    "H2": "at S from K1, r6, r12 and c16 within issue 29's serving targets (TTFT / TPOT p50 10 %, p99 20 %, output "
          "tok/s 5 %)",
    "H3": "the cold run's TTFT p99 (a fresh server's compiles, --cold-start) within 20 %",
}

predict = partial(run20.predict, runs=RUNS, hosts=HOSTS, hypotheses=HYPOTHESES, about=__doc__.splitlines()[0])
compare = partial(run20.compare, runs=RUNS, title="Run 22: vLLM's served MoE after the replay's removal")

if __name__ == "__main__":
    labrun.main(__doc__, predict, compare)
