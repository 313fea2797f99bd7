"""Field indices of the compiled record loop's flat arrays (serving.kernel_loop, serving.kernel_sched): read by
numba as global integer constants."""

# st fields: running sequences (ids .. res) and the plan of the block in flight (dec .. chdone)
IDS, COMP, KNOWN, GEN, OUT, RES, DEC, CHPOS, CHSTART, CHTOK, CHDONE = range(11)
ST_FIELDS = 11
# ri fields: per-replica integers
# (hhead .. hlen: the requests routed to a busy replica under the engine's admission lag, not yet seen: Fleet's held)
(N_RUN, NDEC, NCH, TOKENS, ACTIVE, NSTEPS, STEPS, M, PREEMPT, WHEAD, WTAIL, WLEN, REC, PAD, HHEAD, HTAIL,
 HLEN) = range(17)
RI_FIELDS = 17
USED, START = range(2)  # rf fields
# cfg: mnbt, max_seqs, chunked, mixed, reserve_full, monotone, pad_scope, max_step_tokens, R, router, block, overlap,
# lag (EngineScheduling.admission_lag), conc (--max-concurrency N: a closed loop; 0 open loop), eager_above (a step of
# more real tokens costs at least fcfg's eager_s: EngineOverheads.combine)
(MNBT, MAX_SEQS, CHUNKED, MIXED, RESERVE, MONOTONE, PAD_SCOPE, MAX_STEP, NREP, ROUTER, BLOCK, OVERLAP, LAG, CONC,
 EAGER_ABOVE) = range(15)
CAPACITY, STEP_S, PER_SEQ_S, THINK_S, API_S, EAGER_S, SAMPLER_S, SAMPLER_ROW_S = range(8)  # fcfg
REC_FIELDS = 8  # start_s, duration_s, running, waiting, kv_used_bytes, preemptions, tokens, replica

