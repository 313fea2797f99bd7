"""Run 23's c16 closed loop step by step: the engine's own step log (iter_log.py) against the model's records, per
request (validate/notes/2026-11-30-c16-ttft.md).

    python -m validate.engines.loop_steps [RESULTS] [--host-speed S] [--rules]

The engine's log names no request, but its counts pin each one down: vLLM schedules first come first served, a
prompt is chunked only at the token budget (max_num_batched_tokens 8,192: a step whose context and generation
tokens fill it carries its last prompt on), and every request is in every step from its first token to its last
(async scheduling). Reconstructed that way from the client's send order and lengths, every step's generation count
matches the log (checked: `decode counts off` 0), so each request's first scheduled step k0, first-token step kd and
last-token step kl are the engine's own. The client's clock is put on the log's by the two ends of a TTFT: a first
token leaves after its step's line (line(kd) <= f - delta) and a request is scheduled after the line two before its
step (the engine schedules step k after line k - 2 and takes inputs just before: s + in <= line(k0 - 2) + delta);
the window those leave for delta is printed and its middle used (its width bounds the shortest API path in + out).

The model: `roofline simulate` as run23.compare runs it (the recorded c16 is a closed loop of 16, arrivals 0), its
records before the emission delays (Simulator._run).

--rules: the closed loops of runs 20, 22 and 23 (recorded sends, each at its lease's K1 S) with a closed-loop slot
freed at the schedule's finish (the rule before, Simulator.release_at_launch off; the Python loop) and as the model
frees it now, once the step after the finish is launched."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path

import numpy as np

from validate import stored
from validate.engines import iter_log, labrun, run20, run22

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1] / "validate/results/engines/nvidia-h200-vllm-2026-11-30-run23"
BUDGET = 8192  # the served MoE's max_num_batched_tokens (the log's full steps: context + generation 8,192)
K1_S = 1.7132


def request_steps(st: list[iter_log.Step], order: np.ndarray, outputs: np.ndarray,
                  budget: int = BUDGET) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per request (indices of `order`, the engine's arrival order): its first scheduled step, first-token step and
    last-token step (indices into `st`), and how many steps' generation counts the reconstruction misses."""
    n = len(order)
    first, done = np.full(n, -1), np.full(n, -1)
    carry, nxt = None, 0
    for k, x in enumerate(st):
        if not x.ctx_reqs:
            continue
        reqs = [carry] if carry is not None else []
        while len(reqs) < x.ctx_reqs:
            reqs.append(int(order[nxt]))
            nxt += 1
        for r in reqs:
            if first[r] < 0:
                first[r] = k
        full = x.ctx_tokens + x.gen_tokens >= budget - 2
        carry = reqs[-1] if full else None
        for r in reqs[:-1] if full else reqs:
            done[r] = k
    last = done + outputs - 1
    gen = np.zeros(len(st) + int(outputs.max()) + 1, dtype=int)
    for d, e in zip(done, last, strict=True):
        gen[d + 1:e + 1] += 1
    off = int(np.sum(gen[:len(st)] != np.array([x.gen_reqs for x in st])))
    return first, done, last, off


def engine(results: Path, run: str = "c16") -> dict:
    """The engine's c16 per request and per step (see the module's docstring)."""
    spans = iter_log.windows(stored.read_text(results / "stages.log"))
    st = iter_log.steps(stored.read_text(results / "server.log"), spans[run])
    m = labrun.result(results, run)
    s = np.array(m["start_times"])
    f = s + np.array(m["ttfts"])
    e = f + np.array([sum(x) for x in m["itls"]])
    # the window opens on the previous stage's last decodes: the run's steps start at its first prefill
    st = st[next(k for k, x in enumerate(st) if x.ctx_reqs):]
    k0, kd, kl, off = request_steps(st, np.argsort(s, kind="stable"), np.array(m["output_lens"]))
    line = np.array([x.stamp_s for x in st])
    eager = np.array([x.eager for x in st])
    return {"st": st, "s": s, "f": f, "e": e, "k0": k0, "kd": kd, "kl": kl, "off": off, "line": line, "eager": eager}


def model(host: float, conc: int = 16) -> dict:
    """The model's c16 (run22.RUNS' seed 205, a closed loop of `conc`): records and per-request times before the
    emission delays."""
    from roofline.cli import main as cli
    from roofline.serving import simulate as S

    trace = run20.traces(Path(tempfile.mkdtemp()), None, {"c16": run22.RUNS["c16"]})["c16"]
    got = {}
    orig = S.Simulator._run

    def run(self, *a, **k):
        t = orig(self, *a, **k)
        got.setdefault("t", t)
        got.setdefault("o", self.engine.overheads)
        return t

    S.Simulator._run = run
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            cli(["simulate", "--model", run20.MODEL, "--hardware", "H200", "--method", "bf16", "--engine", "vllm",
                 "--trace", str(trace), "--no-search", "--json", "--host-speed", repr(host),
                 "--max-concurrency", str(conc)])
    finally:
        S.Simulator._run = orig
    t = got["t"]
    return {"t": t, "o": got["o"], "emitted": json.loads(out.getvalue())}


def pct(x) -> str:
    return f"p50 {np.median(x):5.1f} mean {np.mean(x):5.1f}"


def report(results: Path, host: float) -> str:
    g = engine(results)
    s, f, e, k0, kd, kl, line, eager = (g[k] for k in ("s", "f", "e", "k0", "kd", "kl", "line", "eager"))
    n = len(s)
    cl = np.arange(16, n)  # the closed loop's sends (the first 16 all at 0)
    out = [f"engine: {len(g['st'])} steps, {int(eager.sum())} eager; {n} requests reconstructed, decode counts off "
           f"{g['off']}; chunked prompts {int(np.sum(k0 < kd))}"]
    hi, lo = float(np.min((f - line[kd])[cl])), float(np.max((s - line[k0 - 2])[cl]))
    delta = (hi + lo) / 2
    out.append(f"clock: delta in a window of {1e3 * (hi - lo):.1f} ms (API path in + out at least that short); "
               "the middle used")
    prev = np.array([int(np.flatnonzero(e <= s[i] + 1e-9)[np.argmax(e[e <= s[i] + 1e-9])]) for i in cl])
    gap = 1e3 * (s[cl] - e[prev])
    out.append(f"closed loop: a send follows the client's finish before it by {pct(gap)} ms")
    out.append(f"  the releasing finish's last step's line (written after the next step's launch) -> the send "
               f"{pct(1e3 * (s[cl] - delta - line[kl[prev]]))} ms")
    between = k0[cl] - kl[prev] - 1
    after = eager[kl[prev] + 1]
    delayed = eager[kd + 1]
    ttft = 1e3 * (f - s)
    out.append("-- the engine, closed-loop requests (16..239): steps between the releasing finish's step and the first "
               "step")
    for v in (False, True):
        sel = after == v
        out.append(f"  step after the finish {'eager' if v else 'graph'}: {int(sel.sum())} requests, steps between "
                   f"{np.bincount(between[sel], minlength=5).tolist()} (0..4), first token's step followed by an "
                   f"eager step {100 * delayed[cl][sel].mean():.0f} %, TTFT {pct(ttft[cl][sel])} ms")
    out.append(f"  TTFT {pct(ttft[cl])}; send -> line(k0 - 2) (in + wait) {pct(1e3 * (line[k0 - 2] - s + delta)[cl])}; "
               f"line(k0 - 2) -> line(kd) (schedule to first token out) {pct(1e3 * (line[kd] - line[k0 - 2])[cl])}; "
               f"line(kd) -> client {pct(1e3 * (f - delta - line[kd])[cl])} ms")
    out.append(f"  first tokens whose step is followed by an eager step: {int(delayed.sum())} of {n} "
               f"({100 * delayed.mean():.1f} %), {int(delayed[cl].sum())} of {len(cl)} in the closed loop; prefill "
               f"steps followed by an eager step {int(eager[np.unique(kd) + 1].sum())} of {len(np.unique(kd))}")
    k = np.arange(2, len(line) - 1)
    iso = k[eager[k] & ~eager[k - 1] & ~eager[k - 2] & ~eager[k + 1]]
    chain = k[eager[k] & eager[k - 1]]
    out.append(f"  an eager step n after a graph step n - 1 ({int(np.sum(eager[k] & ~eager[k - 1]))} such, "
               f"{len(iso)} isolated): line(n) - line(n - 2) {pct(1e3 * (line[iso] - line[iso - 2]))} ms, of which "
               f"line(n - 2) -> line(n - 1) (n's launch) {pct(1e3 * (line[iso - 1] - line[iso - 2]))}; an eager step "
               f"after an eager step ({len(chain)}): line(n - 2) -> line(n - 1) "
               f"{pct(1e3 * (line[chain - 1] - line[chain - 2]))}")
    dec = k[~eager[k] & ~eager[k - 1] & ~eager[k + 1] & ~eager[k - 2]
            & np.array([x.ctx_tokens == 0 and x.gen_reqs >= 14 for x in g["st"]])[k]]
    out.append(f"  decode-only steps of 14-16 between graph steps: period {pct(1e3 * (line[dec] - line[dec - 1]))} ms; "
               f"the run's steps span {line[-1] - line[0]:.2f} s")

    mod = model(host)
    t, o = mod["t"], mod["o"]
    rec = t.steps
    start, wall, run, tok = rec[:, 0], rec[:, 1], rec[:, 2], rec[:, 6]
    end = start + wall
    la = t.launch_s
    send, ft, fin = t.requests.arrival_s, t.first_token_s, t.finish_s
    # an eager record: a step past the capture sizes (its launch column holds only the launch's part past the host's
    # lead, 0 where the step before's GPU time covered it: timing mechanism 24), not a decode block's tokens
    blockish = (tok % np.maximum(run, 1) == 0) & (tok / np.maximum(run, 1) <= 64)
    eager_rec = (la > 0) | ((tok > o.eager_above_tokens) & ~blockish)
    dec_rec = ~eager_rec & blockish
    nsteps = np.where(dec_rec, tok / np.maximum(run, 1), 1).astype(int)
    cum = np.concatenate([[0], np.cumsum(nsteps)])
    rd = np.searchsorted(end, ft - 1e-12)
    rf = np.searchsorted(end, fin - 1e-12)
    back = np.zeros(len(rec))
    back[:-1] = np.where(np.isclose(start[1:], end[:-1]), la[1:], 0.0)
    eager_next = np.zeros(len(rec), dtype=bool)
    eager_next[:-1] = np.isclose(start[1:], end[:-1]) & eager_rec[1:]
    # the request whose finish freed the slot: the latest finish at or before the send (the send is the finish, or
    # after the next step's launch: Simulator.release_at_launch)
    mprev = np.array([int(np.flatnonzero(fin <= send[i] + 1e-12)[np.argmax(fin[fin <= send[i] + 1e-12])]) for i in cl])
    mbetween = cum[rd[cl]] - cum[rf[mprev] + 1]
    mafter = eager_rec[np.minimum(rf[mprev] + 1, len(rec) - 1)]
    mdelayed = eager_next[rd]
    mttft = 1e3 * (ft - send)
    em = mod["emitted"]
    out.append(f"-- the model at S = {host:.4f} (api_request_s {1e3 * o.api_request_s:.1f} ms, eager_s "
               f"{1e3 * o.eager_s:.1f} ms; emitted TTFT p50 {1e3 * em['ttft_s']['p50']:.1f} ms, horizon "
               f"{fin.max():.2f} s): {len(rec)} records")
    for v in (False, True):
        sel = mafter == v
        out.append(f"  step after the finish {'eager' if v else 'graph'}: {int(sel.sum())} requests, steps between "
                   f"{np.bincount(mbetween[sel], minlength=5).tolist()} (0..4), first token's step followed by an "
                   f"eager step {100 * mdelayed[cl][sel].mean():.0f} %, TTFT before the delays "
                   f"{pct(mttft[cl][sel])} ms")
    out.append(f"  TTFT before the delays {pct(mttft[cl])}; send -> start of the first-token record "
               f"{pct(1e3 * (start[rd] - send)[cl])}; that record {pct(1e3 * wall[rd][cl])} ms")
    out.append(f"  first tokens whose step is followed back to back by an eager step: {int(mdelayed.sum())} of {n} "
               f"({100 * mdelayed.mean():.1f} %), {int(mdelayed[cl].sum())} of {len(cl)} in the closed loop; "
               f"delayed by its launch past the lead {int((back[rd] > 0).sum())}, by p50 "
               f"{1e3 * float(np.median(back[rd][back[rd] > 0])) if (back[rd] > 0).any() else 0.0:.1f} ms")
    r = np.arange(1, len(rec))
    pair = r[eager_rec[r] & dec_rec[r - 1] & np.isclose(start[r], end[r - 1])]
    step_prev = wall[pair - 1] / nsteps[pair - 1]
    out.append(f"  an eager record after a decode record ({len(pair)}): the decode step before + the eager step "
               f"{pct(1e3 * (step_prev + wall[pair]))} ms (the engine's line(n) - line(n - 2) above); the eager "
               f"step {pct(1e3 * wall[pair])}, the decode step {pct(1e3 * step_prev)}")
    return "\n".join(out) + "\n"


def rules() -> str:
    """The closed loops of runs 20, 22, 23 with the slot freed at the schedule's finish and as now (see --rules):
    error % of TTFT p50 / p99, TPOT p50 / p99, output tok/s against the measured, as run20.compare reports them."""
    from roofline.cli import main as cli
    from roofline.serving import simulate as S
    from validate.engines.predict import PROFILE_TINY_SERVER

    ref = json.loads((PROFILE_TINY_SERVER / "tiny-conc1.json").read_text())["median_ttft_ms"]
    keys = (("ttft", "p50", "median_ttft_ms"), ("ttft", "p99", "p99_ttft_ms"), ("tpot", "p50", "median_tpot_ms"),
            ("tpot", "p99", "p99_tpot_ms"))
    now_rule, orig_kernel = S.Simulator.release_at_launch, S.Simulator.use_kernel
    out = ["-- closed loops: the slot freed at the schedule's finish (before) / after the next step's launch (now); "
           "err % TTFT p50 / p99, TPOT p50 / p99, tok/s"]
    try:
        S.Simulator.use_kernel = lambda self, *a, **k: False
        for run, name in (("23", "c16"), ("22", "c16"), ("20", "c32")):
            results = RESULTS.parent / f"nvidia-h200-vllm-2026-11-30-run{run}"
            host = ref / run20.tiny_ttft(results)
            runs = run20.RUNS if run == "20" else run22.RUNS
            m = labrun.result(results, name)
            trace = run20.traces(Path(tempfile.mkdtemp()), {name: labrun.sends(m)}, {name: runs[name]})[name]
            for label, rule in (("before", lambda self, clients: False), ("now", now_rule)):
                S.Simulator.release_at_launch = rule
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    cli(["simulate", "--model", run20.MODEL, "--hardware", "H200", "--method", "bf16", "--engine",
                         "vllm", "--trace", str(trace), "--no-search", "--json", "--host-speed", repr(host),
                         "--max-concurrency", str(runs[name][2])])
                d = json.loads(buf.getvalue())
                err = [100 * (d[f"{k}_s"][q] * 1e3 - m[mk]) / m[mk] for k, q, mk in keys]
                err.append(100 * (d["throughput_tokens_per_s"] - m["output_throughput"]) / m["output_throughput"])
                out.append(f"{run} {name} (S {host:.4f}) {label:6s} " + " / ".join(f"{e:+.1f}" for e in err))
    finally:
        S.Simulator.release_at_launch, S.Simulator.use_kernel = now_rule, orig_kernel
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path, nargs="?", default=RESULTS)
    p.add_argument("--host-speed", type=float, default=K1_S)
    p.add_argument("--rules", action="store_true")
    a = p.parse_args()
    print(rules() if a.rules else report(a.results, a.host_speed), end="")


if __name__ == "__main__":
    main()
