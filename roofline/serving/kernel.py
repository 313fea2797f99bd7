"""The whole serving record loop in one numba kernel (serving.kernel_loop), for the runs it covers exactly.

Simulator.run and Fleet.run spend ~40 numpy calls on small arrays and Python bookkeeping per engine record (2.37
records a request; benchmarks/serving_scale.md); this module hands the same loop, with the scheduler's state in flat
arrays, to numba (https://numba.pydata.org, njit: LLVM-compiled nopython mode). The model's step law is
serving.closedform's source (StepModel.laws, the expressions StepModel lambdifies) with its unpacking read from an
array, compiled as a numba cfunc of the signature float64(float64[::1], float64) and passed to the loop as a
first-class function: the loop's type does not depend on the law, so numba compiles it once (cache=True: in the
package's __pycache__, or numba's user-wide cache directory when that is not writable, as from an installed wheel)
and a law costs only its own small compile.

Covered (`covers` says why not otherwise; the caller then runs the existing path): open-loop arrivals,
--max-concurrency clients or chat sessions (with or without think time), the engine's admission lag (vLLM's async
scheduling), the engine's prefix cache over the requests' shared prefixes (serving.kernel_prefix: the same hits,
publications and LRU evictions as serving.prefix_cache.PrefixCache), speculative decoding on one replica or a fleet
(serving.kernel_spec: a draft model, EAGLE or MTP, the acceptance draws from the same numpy stream), preloaded KV (a
fleet's: serving.disagg's decode pool), any pp with the closed form built (pp > 1: serving.kernel_pipeline;
with speculative decoding its verify step and a draft model's passes pipelined too, closed_forms),
routers round-robin, least-outstanding and prefix-aware (serving.router's rule; without a cache:
least-outstanding), a law of sums, products, max and min only. It gives the same per-request times as the existing
path to float rounding (tests/serving/test_serving_kernel.py, test_serving_kernel_pp.py,
test_serving_kernel_clients.py, test_serving_kernel_prefix.py, test_serving_kernel_spec.py,
test_serving_fleet_spec.py, test_serving_kernel_sessions.py, test_serving_kernel_disagg.py): decode blocks are
evaluated step by step instead of
by the closed form's linear stretches.
"""

from __future__ import annotations

import re

import numpy as np

from roofline.engines.timing import FILL_AND_DRAIN
from roofline.serving.closedform import _source

MIN_REQUESTS = 5000  # auto mode: smaller runs take the existing path (a first compile costs more than they do)
_ROUTERS = {"round-robin": 0, "least-outstanding": 1, "prefix-aware": 1}  # prefix-aware with a cache in use: 2
_PAD_SCOPES = {"none": 0, "tokens": 1, "decode": 2}
_LAWS: dict[str, object] = {}
_IMPORTS: dict[str, bool] = {}


def available() -> bool:
    """Whether numba imports here (installed and working with this numpy); checked once, after dropping a stale
    compile cache (_drop_stale_cache)."""
    if "numba" not in _IMPORTS:
        try:
            import numba  # noqa: F401
            _IMPORTS["numba"] = True
        except ImportError:
            _IMPORTS["numba"] = False
        if _IMPORTS["numba"]:
            _drop_stale_cache()
    return _IMPORTS["numba"]


def _drop_stale_cache() -> None:
    """numba's cache checks a function's own source file only, so a kernel whose callee in another kernel module
    changed (kernel_single calling kernel_block.extend) would load its old machine code: a silently wrong answer in a
    checkout where one file changed. The package's __pycache__ keeps a stamp of all kernel modules' sources; when it
    differs, every cached kernel there is removed (recompiled on use). A wheel's files are written anew on each
    install, so numba's own stamps already cover that case."""
    import hashlib
    from pathlib import Path

    here = Path(__file__).resolve().parent
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(here.glob("kernel*.py")))).hexdigest()
    cache = here / "__pycache__"
    stamp = cache / "kernel-sources.sha256"
    try:
        if stamp.is_file() and stamp.read_text() == digest:
            return
        for old in [*cache.glob("kernel*.nbi"), *cache.glob("kernel*.nbc")]:
            old.unlink()
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest)
    except OSError:  # not writable (an installed wheel): numba caches elsewhere, keyed by freshly written files
        return


def covers(sim, requests, clients=None, preloaded=None, router: str = "round-robin",
           single: bool = False, transfer_s=None) -> str | None:
    """None when the kernel reproduces this run exactly, else the reason it does not (the existing path runs);
    `single`: Simulator.run's loop (serving.kernel_single), else Fleet.run's."""
    if not available():
        return "numba is not installed"
    if sim.scheduler.slot_streams:
        return "llama-server's slots, one KV stream each: a step's ubatches follow its slot ids (the Python loop)"
    if sim.scheduler.unified_slots:
        return ("llama-server's slots in one KV stream: a step attends over every cell the stream holds, idle slots' "
                "included (the Python loop)")
    if closed_forms(sim)[0] is None:
        return "no closed-form step law (fast=False)"
    if sim.draft is not None and (reason := _spec_reason(sim)):
        return reason
    if clients is not None and clients.max_concurrency is not None and np.any(np.diff(requests.arrival_s) < 0):
        return "closed-loop clients with arrival times out of order"
    if (tree := _tree(sim, requests, preloaded)) is not None:
        if len(tree.leaf) != len(requests) or np.any(tree.leaf >= len(tree.parent)):
            return "a prefix tree whose leaves do not match the requests"
        if len(tree.parent) and int((tree.start + tree.length).max()) > sim.pool.max_tokens:
            return "a prefix segment longer than the pool's table"
    if preloaded is not None and (single or len(preloaded) != len(requests) or np.any(np.asarray(preloaded) < 0)):
        return "preloaded KV not one count >= 0 per request of a fleet"
    if transfer_s is not None and (preloaded is None or sim.draft is not None or _caching(sim, requests, preloaded)):
        return "remote KV loads without preloaded KV, or with speculative decoding or a prefix cache"
    if router not in _ROUTERS:
        return f"router {router}"
    return _law_reason(closed_forms(sim)[0], "the", min_rows=3)


def _law_reason(closed, whose: str, min_rows: int = 0) -> str | None:
    """Why a closed form's step law (the target's, or the draft's: `whose`) cannot be compiled, or None: only max
    and min, distinct non-negative work columns, prefix columns matching the decode table, and a decode table of
    whole numbers (at least `min_rows` rows) whose sums do not depend on their order."""
    if law_source(closed) is None:
        return f"{whose} step law uses functions other than max and min"
    for idx in (closed._dec_at, closed._pre_at, closed._prefix_at):
        if len(np.unique(idx)) != len(idx) or (len(idx) and idx.min() < 0):
            return f"repeated work columns in {whose} step law"
    if len(closed._prefix_at) != closed.model._dec_rows.shape[1]:
        return f"{whose} prefix columns differ from {whose} decode table's"
    rows = closed.model._dec_rows
    if len(rows) < min_rows or not np.array_equal(rows, np.round(rows)) or np.abs(rows).max() * len(rows) >= 2.0**53:
        return f"{whose} decode table is not whole numbers (its sums would depend on their order)"
    return None


def _spec_reason(sim) -> str | None:
    """Why speculative decoding cannot run compiled here (serving.kernel_spec), or None: the draft's passes through
    a closed form whose law and tables the kernel takes as it takes the target's (on one replica or a fleet)."""
    draft = closed_forms(sim)[1]
    if draft is None:
        return "speculative decoding without the draft's closed form"
    return _law_reason(draft, "the draft's")


def closed_forms(sim) -> tuple:
    """(the target's closed form, the draft's or None) as the kernel times them: the Simulator's own; for pp > 1
    with speculative decoding, where the Simulator keeps none (its Python loop times the verify and draft passes
    by StepModel's numpy steps), the same ClosedForm built for the kernel (the target's, and the draft model's or
    the head's once-counted one, as DraftCost builds them), kept on the simulator: the kernel pipelines the verify
    step and a draft model's passes (serving.kernel_spec), equal to StepModel.step_time's to float rounding."""
    draft = sim.draft
    if sim.closed is not None or not sim.fast or draft is None or sim.workload.pp == 1:
        return sim.closed, draft.closed if draft is not None else None
    if getattr(sim, "_kernel_closed", None) is None:
        from roofline.serving.closedform import ClosedForm
        sim._kernel_closed = (ClosedForm(sim.steps),
                              ClosedForm(draft.steps) if draft.steps is not None else ClosedForm(sim.steps, once=True))
    return sim._kernel_closed


def _spec_args(sim) -> tuple:
    """serving.kernel_single's and kernel_loop.run_loop's `spec` (the Generator as `_drawn` passes it): the
    acceptance draws' Generator (Simulator.run's or Fleet.run's, seeded SPEC_SEED), the per-position acceptance,
    spec_cfg (serving.kernel_spec: head or draft model, the host floor a pass, the draft's largest step, a draft
    model's pipeline handoff terms), the draft's tables, its compiled law and work vector; without speculative
    decoding, placeholders of the same types (the loop compiles once)."""
    from roofline.serving.kernel_spec import SPEC_CFG_FIELDS
    from roofline.serving.pipeline import handoff_terms
    from roofline.serving.speculative import SPEC_SEED
    rng = np.random.default_rng(SPEC_SEED)
    draft = sim.draft
    if draft is None:
        target = closed_forms(sim)[0]
        return (rng, np.zeros(0), np.zeros(SPEC_CFG_FIELDS), _tables(sim), compiled_law(law_source(target)),
                np.zeros(int(target.live.sum())))
    closed = closed_forms(sim)[1]
    head = draft.steps is None
    handoff = (0.0, 1.0, 0.0) if head else handoff_terms(draft.steps.phases)
    spec_cfg = np.array([float(head), 0.0 if head else draft.pass_host_s, float(closed.model.max_step_tokens),
                         *handoff])
    tables = _tables(sim) if head else _closed_tables(closed, sim.scheduler.max_num_seqs, sim.pool.seq_bytes)
    acceptance = np.array(sim.speculative.acceptance, dtype=np.float64)
    return (rng, acceptance, spec_cfg, tables, compiled_law(law_source(closed)), np.zeros(int(closed.live.sum())))


def _drawn(spec: tuple) -> tuple:
    """`spec` with its Generator as the loops draw it: serving.kernel_rng.pcg_table's state and K jumps."""
    from roofline.serving.kernel_rng import pcg_table
    return (pcg_table(spec[0], len(spec[1])), *spec[1:])


def _tree(sim, requests, preloaded=None):
    """The tree the run's prefix cache keeps, or None (serving.prefix.cache_tree: Simulator.run's and Fleet.run's)."""
    from roofline.serving.prefix import cache_tree
    return cache_tree(sim.engine, requests, preloaded)


def _caching(sim, requests, preloaded=None) -> bool:
    """Whether the run keeps a prefix cache (Simulator.run's and Fleet.run's condition)."""
    return _tree(sim, requests, preloaded) is not None


def _prefix_state(sim, requests, replicas: int, preloaded=None) -> tuple:
    """The kernel's `pfx` (serving.kernel_prefix.prefix_state): the tree and an empty cache per replica (a one-node
    dummy when no cache is in use: the loop's types stay the same, so it compiles once)."""
    from roofline.serving.kernel_prefix import prefix_state
    tree = _tree(sim, requests, preloaded)
    if tree is not None:
        parts = (tree.parent, tree.start, tree.length, tree.leaf, tree.shared)
        return prefix_state(*(np.ascontiguousarray(a, dtype=np.int64) for a in parts), replicas)
    n = len(requests)
    return prefix_state(np.full(1, -1, dtype=np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64),
                        np.full(n, -1, dtype=np.int64), np.zeros(n, np.int64), 1, runs=1)


def stats(sim, requests, ri: np.ndarray) -> list[dict] | None:
    """Each replica's PrefixCache.stats() from the kernel's per-replica integers, or None without a cache."""
    from roofline.serving.kernel_layout import HITS, QUERIES, RHITS, RQUERIES
    from roofline.serving.prefix_cache import hit_stats
    if requests.prefix is None or not _caching(sim, requests):  # the statistics of a shared workload only
        return None
    return [hit_stats(requests.prefix.kind, *row) for row in ri[:, [HITS, QUERIES, RHITS, RQUERIES]].tolist()]


def law_source(closed) -> str | None:
    """serving.closedform's `total(q, slow)` reading q from an array (numba cannot unpack a list into names), or
    None when it calls anything but max and min (built once per closed form)."""
    if not hasattr(closed, "_kernel_law"):
        closed._kernel_law = _array_law(closed)
    return closed._kernel_law


def _array_law(closed) -> str | None:
    """law_source, built."""
    source, _convex = _source(closed.model, closed.live, closed.once)
    calls = set(re.findall(r"([A-Za-z_][A-Za-z_0-9.]*)\(", source)) - {"total"}
    if not calls <= {"max", "min"}:
        return None
    lines = source.splitlines()
    names = re.match(r"\s*\((.*),\) = q$", lines[1]).group(1).split(", ")
    unpack = [f"    {name} = q[{j}]" for j, name in enumerate(names)]
    return "\n".join([lines[0], *unpack, *lines[2:]])


def compiled_law(law: str):
    """The law as a numba cfunc float64(float64[::1], float64), compiled once per law text in this process, and
    from a module of its own on disk (_law_module) so that numba's cache keeps its machine code between processes
    (a compile costs 2-3 CPU-s a law, two a speculative run); where that cannot be written, compiled here."""
    fn = _LAWS.get(law)
    if fn is None:
        fn = _law_module(law)
        if fn is None:
            from numba import cfunc, types
            scope: dict = {}
            exec(compile(law, "<serving.kernel law>", "exec"), {}, scope)  # noqa: S102 - closedform's own law source
            sig = types.float64(types.Array(types.float64, 1, "C"), types.float64)
            fn = cfunc(sig)(scope["total"])
        _LAWS[law] = fn
    return fn


def _law_module(law: str):
    """The law's cfunc from a module named by the law text's SHA-256 under the package's __pycache__/laws (written
    once, atomically; numba's cache=True then keys its machine code by that file; the module is registered in
    sys.modules, which numba's cache needs to rebuild the cfunc's environment), or None when it cannot be written
    or loaded there (its cached machine code is then removed, so the next process compiles it anew)."""
    import hashlib
    import importlib.util
    import os
    import sys
    from pathlib import Path

    name = "law_" + hashlib.sha256(law.encode()).hexdigest()[:24]
    where = Path(__file__).resolve().parent / "__pycache__" / "laws"
    path = where / f"{name}.py"
    sig = "types.float64(types.Array(types.float64, 1, 'C'), types.float64)"
    text = f"from numba import cfunc, types\n\n\n{law}\n\n\ntotal = cfunc({sig}, cache=True)(total)\n"
    try:
        if not path.is_file() or path.read_text() != text:
            where.mkdir(parents=True, exist_ok=True)
            scratch = where / f"{name}.{os.getpid()}.tmp"
            scratch.write_text(text)
            os.replace(scratch, path)
        spec = importlib.util.spec_from_file_location(f"roofline_serving_{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # numba's cache rebuilds the cfunc's environment by importing it by name
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - any failure of the on-disk copy (a stale or unreadable cache): compile here
        sys.modules.pop(f"roofline_serving_{name}", None)
        for stale in where.glob(f"__pycache__/{name}.*"):
            stale.unlink(missing_ok=True)
        return None
    return module.total


def _tables(sim) -> tuple:
    """The target's closed form's tables (_closed_tables) with the pool's bytes per sequence length: the kernel's
    `tab`."""
    return _closed_tables(closed_forms(sim)[0], sim.scheduler.max_num_seqs, sim.pool.seq_bytes)


def _closed_tables(closed, max_num_seqs: int, seq_bytes: np.ndarray) -> tuple:
    """A closed form's live-space work tables, the weights by (decodes?, chunks?), the imbalance per decode count,
    `seq_bytes` (a pool's bytes per sequence length), the decode table's slope, its irregular contexts and for each
    context the next irregular one (int64, 2**62 past the last)."""
    model = closed.model
    weights = np.stack([closed._weights[(False, False)], closed._weights[(False, True)],
                        closed._weights[(True, False)], closed._weights[(True, True)]])
    imbalance = np.array([model.imbalance(b) for b in range(max_num_seqs + 1)])
    irregular = np.zeros(len(model._dec_rows), dtype=np.uint8)  # context c -> c + 1 leaves the table's line
    irregular[closed.irregular[closed.irregular < len(irregular)]] = 1
    # the next irregular context at or after each context (one past the table: none), for serving.kernel_block.extend
    # to step over the contexts that stay on the line
    at = np.append(np.flatnonzero(irregular), 2**62)
    next_irregular = at[np.searchsorted(at[:-1], np.arange(len(irregular) + 1))]
    ints = (closed._dec_at, closed._pre_at, closed._prefix_at)
    dec_at, pre_at, prefix_at = (np.ascontiguousarray(a, dtype=np.int64) for a in ints)
    return (np.ascontiguousarray(closed._const, dtype=np.float64), np.ascontiguousarray(closed._pre_slope),
            np.ascontiguousarray(closed._pre_intercept), np.ascontiguousarray(model._dec_rows, dtype=np.float64),
            dec_at, np.ascontiguousarray(model._pre_rows, dtype=np.float64), pre_at, prefix_at,
            np.ascontiguousarray(weights), imbalance, np.ascontiguousarray(seq_bytes, dtype=np.float64),
            np.ascontiguousarray(closed.slope, dtype=np.float64), irregular, np.ascontiguousarray(next_irregular))


def _clocks(requests, clients, api_s: float) -> tuple[np.ndarray, np.ndarray, int]:
    """(engine arrival times, send times, concurrency): open loop, every request's (serving.clients.Arrivals'
    clock, compiled: serving.kernel_queue.clock_arrivals); with --max-concurrency N, the first N requests' (sent at
    max(arrival, 0.0)), the rest NaN until the kernel sends them (serving.kernel_queue.release); with chat sessions,
    each session's first turn's (sent at its arrival), the later turns NaN until the kernel sends them
    (serving.kernel_queue.turn_ends)."""
    from roofline.serving.kernel_queue import clock_arrivals
    arrival = np.ascontiguousarray(requests.arrival_s, dtype=np.float64)
    if clients is not None and clients.session_turns > 1:
        send = np.full(len(arrival), np.nan)
        send[::clients.session_turns] = arrival[::clients.session_turns]
        return send + api_s, send, 0
    conc = clients.max_concurrency if clients is not None and clients.max_concurrency is not None else 0
    if not conc:
        return clock_arrivals(arrival + api_s), arrival.copy(), 0
    send = np.full(len(arrival), np.nan)
    first = min(conc, len(arrival))
    send[:first] = np.maximum(arrival[:first], 0.0)
    clock = np.full(len(arrival), np.nan)
    clock[:first] = send[:first] + api_s
    return clock, send, conc


def _sessions(clients, clock: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The loops' `ses` (serving.kernel_queue): the sessions' first turns by (engine arrival, id) and the state
    with room for every later turn in its heap; without sessions an empty order and TURNS 0."""
    from roofline.serving.kernel_queue import HEAP, TURNS
    turns = clients.session_turns if clients is not None else 1
    if turns == 1:
        return np.zeros(0, dtype=np.int64), np.zeros(HEAP, dtype=np.int64)
    firsts = np.arange(0, len(clock), turns, dtype=np.int64)
    order = firsts[np.lexsort((firsts, clock[firsts]))]
    state = np.zeros(HEAP + len(clock), dtype=np.int64)
    state[TURNS] = turns
    return np.ascontiguousarray(order), state


def run(sim, requests, clients=None, replicas: int = 1, router: str = "round-robin", block_steps: int = 256,
        single: bool = False, rule=None, preloaded=None, load_host_s=None, transfer_s=None):
    """Run the kernel: (send times, first token, finish, replica of each request, records with a replica column,
    preemptions per replica, each replica's prefix-cache stats or None).
    `clients`: open loop (None), --max-concurrency or chat sessions (serving.clients); `rule`: the prefix-aware
    router's thresholds (serving.router.CacheAware; None: its defaults); `preloaded`: tokens of KV each request
    brings (Fleet.run's, serving.disagg's decode pool; a copy is zeroed as requests are preempted), `load_host_s`
    the host seconds its load costs the step that admits it, `transfer_s` the seconds from its remote load's post to
    its completion (Scheduler's; serving.kernel_remote); `single`: one
    replica as Simulator.run runs it (serving.kernel_single; the requests due at a time are all queued before it
    schedules), else as Fleet.run does (serving.kernel_loop; a replica starts on the first request routed to it)."""
    from roofline.serving.kernel_loop import run_loop
    from roofline.serving.kernel_single import run_single
    from roofline.serving.pipeline import handoff_terms
    from roofline.serving.router import CacheAware
    rule = rule or CacheAware()
    target = closed_forms(sim)[0]
    law = compiled_law(law_source(target))
    sc, engine, host = sim.scheduler, sim.engine, sim.engine.overheads
    clock, send, conc = _clocks(requests, clients, host.api_request_s)
    ses = _sessions(clients, clock)
    monotone = bool(np.all(np.diff(sim.pool.seq_bytes) >= 0))
    caching = _caching(sim, requests, preloaded)
    route = 2 if caching and requests.prefix is not None and router == "prefix-aware" else _ROUTERS[router]
    cfg = np.array([sc.max_num_batched_tokens, sc.max_num_seqs, sc.chunked_prefill, sc.mixed_steps, sc.reserve_full,
                    monotone, _PAD_SCOPES[engine.pad_scope], target.model.max_step_tokens, replicas,
                    route, block_steps, host.overlap, engine.admission_lag, conc,
                    host.eager_above_tokens, caching, sim.pool.page_tokens, rule.balance_abs_threshold,
                    sc.spec_tokens, sim.workload.pp, sim.workload.micro_batches, sc.admit_full_prompt,
                    host.eager_above_prefill_tokens or host.eager_above_tokens, len(engine.capture_sizes),
                    sim.phases.engine.pass_tokens, sim.workload.engine in FILL_AND_DRAIN],
                   dtype=np.int64)
    think = clients.think_s if clients is not None else 0.0
    # eager_s / eager_above_tokens: a step past the capture sizes pays its launches (timing mechanism 8)
    fcfg = np.array([sim.pool.capacity_bytes, host.step_s, host.per_seq_s, think, host.api_request_s, host.eager_s,
                     host.sampler_s, host.sampler_row_s, rule.cache_threshold, rule.balance_rel_threshold,
                     *handoff_terms(sim.phases), host.token_s, host.save_s, host.save_byte_s,
                     sim.pool.page_bytes / sim.pool.page_tokens, host.graph_s])
    sizes = np.array(engine.capture_sizes + engine.prefill_capture_sizes, dtype=np.int64)
    prompt = np.ascontiguousarray(requests.prompt_tokens, dtype=np.int64)
    output = np.ascontiguousarray(requests.output_tokens, dtype=np.int64)
    args = (np.ascontiguousarray(requests.arrival_s, dtype=np.float64), prompt, output, _tables(sim), sizes, cfg, fcfg,
            sc.max_num_seqs, int(target.live.sum()), law,
            _prefix_state(sim, requests, 1 if single else replicas, preloaded))
    if single:
        first, finish, rec, ri, status = run_single(clock, send, *args, _drawn(_spec_args(sim)), ses)
        routed = np.zeros(len(clock), dtype=np.int64)
    else:
        pre = np.zeros(0, dtype=np.int64) if preloaded is None else np.array(preloaded, dtype=np.int64)
        loads = np.zeros(0) if load_host_s is None else np.ascontiguousarray(load_host_s, dtype=np.float64)
        m = 0 if transfer_s is None else len(requests)
        xfer = np.zeros(0) if transfer_s is None else np.ascontiguousarray(transfer_s, dtype=np.float64)
        first, finish, routed, rec, ri, status = run_loop(clock, send, *args, _drawn(_spec_args(sim)), ses,
                                                          (pre, loads, xfer, np.full(m, np.inf), np.full(m, np.inf)))
    if status:
        raise RuntimeError("serving: the engine is idle with requests outstanding and none to arrive")
    from roofline.serving.kernel_layout import PREEMPT
    return send, first, finish, routed, rec, ri[:, PREEMPT].copy(), stats(sim, requests, ri)
