"""The GPU side of validate.clients.step_costs (torch): what each part measures is said in
validate/clients/step_costs.py."""

from __future__ import annotations

import gc
import itertools
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from validate.clients import step_costs_core as P
from validate.clients.decoder import (
    Decoder,
    Dims,
    apply_rope,
    layer_weights,
    make_caches,
    model_weights,
    moe_mlp,
    rms_norm,
)
from validate.clients.timing import capture, kernel_census, replay_ms

BF16 = torch.bfloat16
LLAMA = Dims(layers=P.LAYERS, d=P.D_MODEL, heads=P.HEADS, kv_heads=P.KV_HEADS, head_dim=P.HEAD_DIM, inter=P.INTER,
             vocab=P.VOCAB, tie=False, qkv_bias=False, qk_norm=False)
MIXTRAL = Dims(layers=1, d=4096, heads=32, kv_heads=8, head_dim=128, inter=14336, vocab=32000, tie=False,
               qkv_bias=False, qk_norm=False, experts=P.MOE_EXPERTS, top_k=P.MOE_TOP_K, expert_inter=P.MOE_INTER)


def _randn(*shape) -> torch.Tensor:
    return torch.empty(*shape, device="cuda", dtype=BF16).normal_()


class Run:
    """The results file, the clock sampler and the deadline of one probe run."""

    def __init__(self, out: Path, deadline_s: float):
        from validate.common.harness import environment

        self.t0, self.out, self.deadline_s = time.perf_counter(), out, deadline_s
        self.sampler = P.ClockSampler(self.t0)
        self.bursts: dict[str, float] = {}
        self.data = {"env": environment(), "clock_source": self.sampler.source, "clock_static": {}, "clocks": [],
                     "cases": [], "skipped": []}

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def log(self, msg: str):
        print(f"[{self.now():6.1f}s] {msg}", flush=True)

    def late(self, name: str) -> bool:
        if self.now() > self.deadline_s:
            self.data["skipped"].append(name)
            return True
        return False

    def add(self, row: dict):
        self.data["cases"].append(row)
        brief = {k: v for k, v in row.items() if isinstance(v, (int, float, str)) and k != "name"}
        self.log(f"  {row['name']}: {brief}")

    def save(self):
        from validate.common.harness import write_json

        self.data["clocks"] = [list(s) for s in self.sampler.samples]
        self.data["clock_static"] = self.sampler.static
        write_json(self.out, self.data)


def sustain(run: Run, graph, work: float) -> dict:
    """IDLE_S idle, then back-to-back replays for SUSTAIN_S, each timed by events (<= 3 in flight, so the GPU never
    waits on the host): TFLOP/s and clocks (step_costs_core.sustained_view)."""
    torch.cuda.synchronize()
    time.sleep(P.IDLE_S)
    h0, pairs = run.now(), []
    while run.now() - h0 < P.SUSTAIN_S:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        pairs.append((s, e))
        if len(pairs) > 3:
            pairs[-4][1].synchronize()
    torch.cuda.synchronize()
    h1 = run.now()
    starts = [pairs[0][0].elapsed_time(s) / 1e3 for s, _ in pairs]
    durations = [s.elapsed_time(e) / 1e3 for s, e in pairs]
    return P.sustained_view(P.rate_summary(starts, durations, work), run.sampler.samples, h0, h1)


def _burst(run: Run, fn, calls: int) -> tuple[float, dict | None]:
    """micro.py's procedure: capture (2 warm calls), 2 warm + 10 timed replays; seconds per call, clocks."""
    graph = capture(fn)
    h0 = run.now()
    ms = replay_ms(graph, timed=10, warmup=2)["ms"]
    clocks = P.clock_summary(run.sampler.samples, h0, run.now())
    del graph
    return ms * 1e-3 / calls, clocks


def h1_gemm(run: Run, l2: int):
    for label, (n, k) in P.GEMM_SHAPES.items():
        copies = max(1, min(16, math.ceil(4 * l2 / (n * k * 2))))
        ws = [_randn(n, k) for _ in range(copies)]
        for m in P.GEMM_TOKENS:
            name = f"gemm_{label}_m{m}"
            if run.late(name):
                continue
            x = _randn(m, k)
            burst_s, burst_clocks = _burst(run, lambda x=x, ws=ws: [F.linear(x, w) for w in ws], copies)
            flops = P.gemm_flops(m, n, k)
            reps = max(1, math.ceil(P.REPLAY_S / (burst_s * copies)))

            def many(x=x, ws=ws, reps=reps):
                for _ in range(reps):
                    for w in ws:
                        F.linear(x, w)

            graph = capture(many)
            sustained = sustain(run, graph, flops * reps * copies)
            run.bursts[name] = burst_s
            run.add(P.rate_row(name, "gemm", flops, burst_s, burst_clocks, sustained, m=m, n=n, k=k, copies=copies,
                               calls_per_replay=reps * copies))
            del graph, x
        del ws
        torch.cuda.empty_cache()
        run.save()


def _client_qkv(p: int):
    """q [1, 32, P, 128], k, v [1, 8, P, 128] laid out as decoder.layer hands them to SDPA ([B, S, H, D] memory)."""
    q = _randn(1, p, P.HEADS, P.HEAD_DIM).transpose(1, 2)
    kv = _randn(1, p, 2 * P.KV_HEADS * P.HEAD_DIM)
    k, v = (t.view(1, p, P.KV_HEADS, P.HEAD_DIM).transpose(1, 2) for t in kv.chunk(2, dim=-1))
    return q, k, v


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def h1_flash(run: Run):
    for p in P.FLASH_PROMPTS:
        name = f"flash_p{p}"
        if run.late(name):
            continue
        q, k, v = _client_qkv(p)
        qc, kc, vc = q.contiguous(), k.contiguous(), v.contiguous()
        flops = P.flash_flops(p)
        burst_s, burst_clocks = _burst(run, lambda q=q, k=k, v=v: _sdpa(q, k, v), 1)
        contiguous_s, _ = _burst(run, lambda q=qc, k=kc, v=vc: _sdpa(q, k, v), 1)
        reps = max(1, math.ceil(P.REPLAY_S / burst_s))

        def many(q=q, k=k, v=v, reps=reps):
            for _ in range(reps):
                _sdpa(q, k, v)  # each output dropped: the graph's pool reuses one buffer

        graph = capture(many)
        sustained = sustain(run, graph, flops * reps)
        run.bursts[name] = burst_s
        run.add(P.rate_row(name, "flash", flops, burst_s, burst_clocks, sustained, prompt=p,
                           burst_contiguous_tflops=flops / contiguous_s / 1e12))
        graph = q = k = v = qc = kc = vc = None
        torch.cuda.empty_cache()
    run.save()


def h1_mix(run: Run):
    """The 32 layers' prefill GEMMs + flash at P = MIX_PROMPT in one graph vs the sum of the parts' bursts."""
    p, name = P.MIX_PROMPT, f"prefill_mix_p{P.MIX_PROMPT}"
    if run.late(name):
        return
    layers = [{k: _randn(*P.GEMM_SHAPES[k]) for k in P.GEMM_SHAPES} for _ in range(P.LAYERS)]
    h, a = _randn(p, P.D_MODEL), _randn(p, P.INTER)
    q, k, v = _client_qkv(p)

    def step():
        for w in layers:
            F.linear(h, w["qkv"])
            _sdpa(q, k, v)
            F.linear(h, w["o"])
            F.linear(h, w["gate_up"])
            F.linear(a, w["down"])

    flops = P.LAYERS * (sum(P.gemm_flops(p, n, kk) for n, kk in P.GEMM_SHAPES.values()) + P.flash_flops(p))
    parts = [f"gemm_{label}_m{p}" for label in P.GEMM_SHAPES] + [f"flash_p{p}"]
    sum_bursts = P.LAYERS * sum(run.bursts[x] for x in parts) if all(x in run.bursts for x in parts) else None
    graph = capture(step, warm_calls=1)
    sustained = sustain(run, graph, flops)
    run.add({"name": name, "part": "h1", "kind": "mix", "prompt": p, "flops": flops,
             "sum_of_bursts_s": sum_bursts, "first_replay_s": flops / (sustained["first"] * 1e12),
             "steady_replay_s": flops / (sustained["steady"] * 1e12) if sustained["steady"] else None,
             "steady_tflops": sustained["steady"], "sustained": sustained})
    graph = layers = None
    gc.collect()
    torch.cuda.empty_cache()
    run.save()


def _chain_kinds() -> dict:  # keys: step_costs_core.CHAIN_KINDS
    """Each small aten op the eager decode layer issues at batch 1 (decoder.layer), on its decode-size operands."""
    x, r, w, x2 = _randn(1, 1, 4096), _randn(1, 1, 4096), _randn(4096), _randn(1, 4096)
    xf = x.float()
    m = xf.pow(2).mean(-1, keepdim=True)
    qkv = _randn(1, 1, 6144)
    q = qkv[..., :4096].view(1, 1, 32, 128).transpose(1, 2)
    k = qkv[..., 4096:5120].view(1, 1, 8, 128).transpose(1, 2)
    qa, qb = -q[..., 64:], q[..., :64]
    cos, sin = _randn(1, 128), _randn(1, 128)
    cache, pos = _randn(1, 8, 1024, 128), torch.tensor([1023], device="cuda")
    gate, up = _randn(1, 1, 28672).chunk(2, dim=-1)
    sg = F.silu(gate)
    big = itertools.cycle([_randn(4096, 4096) for _ in range(8)])
    w_l2, w_small = _randn(4096, 4096), _randn(128, 4096)
    return {"add_inplace_1x4096": lambda: x2.add_(1.0), "add": lambda: x + r, "mul_weight": lambda: x * w,
            "to_fp32": lambda: x.float(), "to_bf16": lambda: xf.to(BF16), "pow2_fp32": lambda: xf.pow(2),
            "mean_fp32": lambda: xf.mean(-1, keepdim=True), "add_eps": lambda: m + 1e-5,
            "rsqrt": lambda: torch.rsqrt(m), "mul_fp32_bcast": lambda: xf * m, "neg_strided": lambda: -q[..., 64:],
            "cat_rope": lambda: torch.cat([qa, qb], dim=-1), "mul_rope": lambda: q * cos,
            "index_put_kv": lambda: cache.__setitem__((slice(None), slice(None), pos), k),
            "silu_strided": lambda: F.silu(gate), "mul_silu_up": lambda: sg * up,
            "rms_norm": lambda: rms_norm(x, w), "rope": lambda: apply_rope(q, cos, sin),
            "linear_1x4096_n128": lambda: F.linear(x, w_small), "linear_1x4096_n4096_l2": lambda: F.linear(x, w_l2),
            "linear_1x4096_n4096_dram": lambda: F.linear(x, next(big))}


def h2_chains(run: Run):
    kinds = _chain_kinds()
    if tuple(kinds) != P.CHAIN_KINDS:
        raise RuntimeError("step_costs_core.CHAIN_KINDS must name _chain_kinds(), in order")
    for kind, fn in kinds.items():
        name = f"chain_{kind}"
        if run.late(name):
            continue
        census = kernel_census(fn)
        graph = capture(lambda fn=fn: [fn() for _ in range(P.CHAIN)])
        run.add(P.chain_row(kind, P.CHAIN, census, replay_ms(graph, timed=20)["ms"]))
        del graph
    torch.cuda.empty_cache()
    run.save()


def h2_step(run: Run):
    """The eager decode step (b1, c1024) against its GEMMs + SDPA alone, same weights and caches."""
    name = "eager_step_vs_gemm_sdpa_b1_c1024"
    if run.late(name):
        return
    weights, caches = model_weights(LLAMA, "cuda"), make_caches(LLAMA, 1, 1024, "cuda")
    decoder = Decoder(LLAMA, weights, compiled=False)
    tok, pos = torch.randint(0, LLAMA.vocab, (1, 1), device="cuda"), torch.tensor([1023], device="cuda")
    h, a, o = _randn(1, 1, 4096), _randn(1, 1, LLAMA.inter), _randn(1, 1, 4096)
    q = _randn(1, 1, 32, 128).transpose(1, 2)

    def gemm_sdpa():
        for lw, (kc, vc) in zip(weights["layers"], caches, strict=True):
            F.linear(h, lw["wqkv"])
            F.scaled_dot_product_attention(q, kc, vc, enable_gqa=True)
            F.linear(o, lw["wo"])
            F.linear(h, lw["w13"])
            F.linear(a, lw["w2"])
        F.linear(h[:, -1], weights["lm_head"])

    row = {"name": name, "part": "h2", "kind": "step"}
    for label, fn in (("step", lambda: decoder.step(tok, caches, pos, True)), ("gemm_sdpa", gemm_sdpa)):
        census = kernel_census(fn)
        graph = capture(fn)
        row[f"{label}_ms"], row[f"{label}_kernels"] = replay_ms(graph)["ms"], census["kernels"]
        row[f"{label}_top_kernels"] = census["top_kernels"]
        del graph
    extra = row["step_kernels"] - row["gemm_sdpa_kernels"]
    row["aten_kernel_s"] = (row["step_ms"] - row["gemm_sdpa_ms"]) * 1e-3 / extra if extra > 0 else None
    run.add(row)
    decoder = weights = caches = None
    gc.collect()
    torch.cuda.empty_cache()
    run.save()


def h3_moe(run: Run):
    """decoder.moe_mlp of Mixtral-8x7B (two layers' experts alternating) and its two grouped GEMMs, per batch."""
    if run.late("moe"):
        return
    layers = [layer_weights(MIXTRAL, "cuda") for _ in range(2)]
    d, e, ie = MIXTRAL.d, MIXTRAL.experts, MIXTRAL.expert_inter
    for b in P.MOE_BATCHES:
        name = f"moe_b{b}"
        if run.late(name):
            continue
        hs = [_randn(b, 1, d) for _ in layers]
        census = kernel_census(lambda hs=hs: moe_mlp(MIXTRAL, layers[0], hs[0]))
        moe_s, _ = _burst(run, lambda hs=hs: [moe_mlp(MIXTRAL, w, x) for w, x in zip(layers, hs, strict=True)], 2)
        routed, active = [], []
        for w, x in zip(layers, hs, strict=True):
            flat = torch.topk(F.linear(x.reshape(-1, d), w["router"]), MIXTRAL.top_k, dim=-1)[1].reshape(-1)
            order = torch.argsort(flat, stable=True)
            counts = torch.zeros(e, device="cuda", dtype=torch.int32).scatter_add_(
                0, flat, torch.ones_like(flat, dtype=torch.int32))
            xs = x.reshape(-1, d)[order // MIXTRAL.top_k]
            routed.append((xs, _randn(xs.shape[0], ie), torch.cumsum(counts, 0, dtype=torch.int32), w))
            active.append(int((counts > 0).sum()))
        up_s, _ = _burst(run, lambda routed=routed: [torch._grouped_mm(xs, w["w13"].transpose(-2, -1), offs=offs)
                                                     for xs, _, offs, w in routed], 2)
        down_s, _ = _burst(run, lambda routed=routed: [torch._grouped_mm(ys, w["w2"].transpose(-2, -1), offs=offs)
                                                       for _, ys, offs, w in routed], 2)
        run.add(P.moe_row(b, active, moe_s, up_s, down_s, census))
    layers = None
    gc.collect()
    torch.cuda.empty_cache()
    run.save()


def run(parts: list[str], out: Path, deadline_s: float) -> int:
    """Every part asked for, in order, the results file written after each."""
    from validate.common.harness import l2_bytes

    torch.backends.cuda.matmul.allow_tf32 = False
    run_ = Run(out, deadline_s)
    steps = {"h1": [lambda: h1_gemm(run_, l2_bytes()), lambda: h1_flash(run_), lambda: h1_mix(run_)],
             "h2": [lambda: h2_chains(run_), lambda: h2_step(run_)], "h3": [lambda: h3_moe(run_)]}
    try:
        for part in parts:
            run_.log(f"part {part}")
            for step in steps[part]:
                step()
    finally:
        run_.sampler.stop()
        run_.save()
    run_.log(f"done: {len(run_.data['cases'])} rows, skipped {run_.data['skipped']} -> {out}")
    return 0
