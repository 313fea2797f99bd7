"""One disaggregated rate taken apart request by request: the proxy's legs and the client's TPOT against roofline's
replay of the same sends (validate.engines.pd_legs), by the second of the run a request was sent in, and the decode
server's API path bounded from its pooled /metrics.

    python -m validate.engines.pd_requests RUN RATE   (RUN: run12 | run13 | run14; e.g. run12 36)

Per second of sends, medians: the prefill leg (proxy in -> prefill answered), the decode leg (-> first decode byte),
the client's TPOT, each measured and modelled; then the client's TTFT less the proxy's (the proxy's relay both ways).
The API path: vLLM's decode-server TTFT runs from before tokenization to the API process taking up the first token's
output (v1/metrics/stats.py:350-371, renderers/base.py:959), its queue from the engine core's add to the promoting
schedule, its prefill time from there to the token, so TTFT - queue - prefill time is the API path inside vLLM
(tokenize, add, the engine core's pickup, the output's way back), and the proxy's decode leg less TTFT the part outside
it. A run's servers were scraped once, after its last rate, so one rate's share is bounded by the pooled sum less the
other rates' requests at an assumed path each (api_share). Nothing here feeds the model.
"""

from __future__ import annotations

import argparse
import gzip
import json

import numpy as np

from validate.engines import pd_legs


def by_second(sent_s: np.ndarray, values: dict[str, np.ndarray]) -> list[tuple[int, int, dict[str, float]]]:
    """(second, requests, {name: median}) for each whole second of sends from the first one."""
    sec = np.floor(sent_s - sent_s.min()).astype(int)
    return [(s, int((sec == s).sum()), {k: float(np.median(v[sec == s])) for k, v in values.items()})
            for s in range(sec.max() + 1) if (sec == s).any()]


def api_share(total_s: float, requests: int, others: int, others_each_s: float) -> float:
    """One rate's mean API path (s) from a pooled sum over `requests` + `others` requests, the others taking
    `others_each_s` each."""
    return (total_s - others * others_each_s) / requests


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run", choices=("run12", "run13", "run14"))
    p.add_argument("rate", type=int)
    a = p.parse_args()
    folder = pd_legs.ROOT / f"nvidia-h200x2-vllm-2026-11-29-{a.run}"
    rates = pd_legs.replay(folder, f"cases-{a.run}.json")
    k = [r["rate"] for r in rates].index(f"pd-rate{a.rate}")
    r, arrays = rates[k], rates[k]["arrays"]
    proxy = sorted((json.loads(x) for x in (folder / "Llama-3.1-8B-pd-proxy-requests.jsonl").read_text().splitlines()
                    if x), key=lambda x: x["in"])
    mine = [x for x in proxy if r["span"][0] <= x["in"] < r["span"][1]]
    path = folder / f"Llama-3.1-8B-pd-rate{a.rate}.json"
    bench = json.loads(gzip.open(f"{path}.gz").read() if not path.exists() else path.read_text())
    order = np.argsort(bench["start_times"], kind="stable")
    ttft = np.array(bench["ttfts"])[order]
    tpot = np.array([sum(bench["itls"][i]) / max(len(bench["itls"][i]), 1) for i in order])
    pre = np.array([x["prefill_done"] - x["in"] for x in mine])
    dec = np.array([x["decode_first"] - x["prefill_done"] for x in mine])
    relay = ttft - np.array([x["decode_first"] - x["in"] for x in mine])
    ms = {"prefill meas": pre, "model": arrays["prefill_leg"], "decode meas": dec, "model ": arrays["decode_leg"],
          "tpot meas": tpot, "model  ": arrays["tpot"]}
    print(f"{a.run} rate {a.rate}: medians in ms by the second of the run a request was sent in")
    print("sec  n   " + "  ".join(f"{k:>12}" for k in ms))
    for s, n, med in by_second(arrays["arrival"], ms):
        print(f"{s:3d} {n:3d}   " + "  ".join(f"{v * 1e3:12.1f}" for v in med.values()))
    print("all      " + "  ".join(f"{np.median(v) * 1e3:12.1f}" for v in ms.values()))
    print(f"client TTFT - proxy (in -> first decode byte): p50 {np.median(relay) * 1e3:.1f} ms, "
          f"p99 {np.percentile(relay, 99) * 1e3:.1f} ms")
    pool = pd_legs.pooled(folder)
    n_all = len(proxy)
    inside = pool["decode_api_inside_vllm"] * n_all
    outside = pool["decode_api_outside_vllm"] * n_all
    others = n_all - len(mine)
    print(f"decode server pooled over {n_all} requests: API path inside vLLM {inside / n_all * 1e3:.1f} ms a request, "
          f"outside {outside / n_all * 1e3:.1f}; this rate's share inside if the other {others} took 0 / 17.3 ms "
          f"(run 14's pooled): {api_share(inside, len(mine), others, 0.0) * 1e3:.1f} / "
          f"{api_share(inside, len(mine), others, 0.0173) * 1e3:.1f} ms; outside at most "
          f"{api_share(outside, len(mine), others, 0.0) * 1e3:.1f} ms (model: api {arrays['api'][0] * 1e3:.1f} ms "
          f"+ to_post {np.nanmean(arrays['to_post']) * 1e3:.1f})")


if __name__ == "__main__":
    main()
