"""Field indices of the compiled record loop's flat arrays (serving.kernel_loop, serving.kernel_sched): read by
numba as global integer constants."""

# st fields: running sequences (ids .. res) and the plan of the block in flight (dec .. chdone)
# (base: leading tokens the prefix cache owns, Scheduler.base; stamped: 1 once the sequence's first token is known to
# be stamped since its admission, serving.kernel_sched.emit; shared: its request's shared prefix tokens, with a prefix
# cache: both per running sequence, so that a record's work per sequence reads no array indexed by request id;
# anc, leaf, llen: once every node before its request's leaf on its path is wholly cached, the tokens of those nodes
# (else -1), the leaf's slot in the replica's cache and the leaf's tokens, serving.kernel_prefix.publish_leaf;
# counted: the prefix-cache hit its admission counted, Scheduler.counted)
(IDS, COMP, KNOWN, GEN, OUT, RES, DEC, CHPOS, CHSTART, CHTOK, CHDONE, BASE, STAMPED, SHARED, ANC, LEAF, LLEN,
 COUNTED) = range(18)
ST_FIELDS = 18
# st's and held's rows hold max_num_seqs positions and ST_PAD more (never used): a row of 1,024 positions is 8 KiB, so
# without them every field of a position falls in one set of a 4 KiB-way L1 (8 ways: the fields thrash it) and the
# replicas' rows, whole multiples of 8 KiB apart, in few set groups of a 64 KiB-way L2 (serving_scale.md, session 20)
ST_PAD = 8
# ri fields: per-replica integers
# (hhead .. hlen: the requests routed to a busy replica under the engine's admission lag, not yet seen: Fleet's held)
# (hsize, hits, queries: the prefix cache's LRU heap size and PrefixCache.hit_tokens / query_tokens; rhits,
# rqueries: PrefixCache.resumed_hit_tokens / resumed_tokens; pstep: the planned step preempted,
# Scheduler.preempted_step)
# (tree: the prefix-aware router's tree tokens for the replica, serving.router)
# (rhead .. rlen: the requests whose remote KV load is in flight or not yet acted on, Scheduler.remote; posts: the
# remote loads the planned step posts, StepPlan.posts)
(N_RUN, NDEC, NCH, TOKENS, ACTIVE, NSTEPS, STEPS, M, PREEMPT, WHEAD, WTAIL, WLEN, REC, PAD, HHEAD, HTAIL,
 HLEN, HSIZE, HITS, QUERIES, TREE, RHEAD, RTAIL, RLEN, POSTS, RHITS, RQUERIES, PSTEP) = range(28)
RI_FIELDS = 28
# rf fields (loads: the planned step's KV loads' host seconds, Scheduler's loads_s; tsched: when the engine made the
# schedule, Scheduler.t_sched; wake: when an idle replica next acts on a remote load, Scheduler.wake_s, else inf;
# launch, eager_l: the block's steps' host seconds and their eager launch's part, Simulator.block_launch_s, set by
# kernel_block.extend / kernel_spec.spec_step_s)
# (saves, save_b: the finished requests' KV not yet saved to the server's host prompt cache, their count and tokens:
# Scheduler.saves / save_tokens, timing mechanism 18)
# (slack: the host's lead into the block's first step, Simulator.block_ends' slack_s, 0 after idling; host: when the
# host begins the work of the block's next step to evaluate, from the block's start: scheduling.chained_ends, kept by
# kernel_block.extend between its calls)
USED, START, LOADS, TSCHED, WAKE, LAUNCH, EAGER_L, SAVES, SAVE_B, SLACK, HOST = range(11)
RF_FIELDS = 11
# cfg: mnbt, max_seqs, chunked, mixed, reserve_full, monotone, pad_scope, max_step_tokens, R, router, block, overlap,
# lag (EngineScheduling.admission_lag), conc (--max-concurrency N: a closed loop; 0 open loop), eager_above (a step of
# more real tokens costs at least fcfg's eager_s: EngineOverheads.combine), prefix (a prefix cache in use: serving.
# kernel_prefix), page (the pool's page tokens), bal_abs (the prefix-aware router's balance_abs_threshold:
# serving.router.CacheAware), spec (speculative decoding's K drafts a decoding sequence verifies a step, 0 without:
# serving.kernel_spec)
(MNBT, MAX_SEQS, CHUNKED, MIXED, RESERVE, MONOTONE, PAD_SCOPE, MAX_STEP, NREP, ROUTER, BLOCK, OVERLAP, LAG, CONC,
 EAGER_ABOVE, PREFIX, PAGE, BAL_ABS, SPEC) = range(19)
# cfg (continued): pp, micro (the pipeline's stages and micro-batches, serving.kernel_pipeline; pp 1: no pipeline),
# full_prompt (SchedulerConfig.admit_full_prompt: admission asks room for all the known tokens), eager_prefill (a step
# with prefill chunks of more real tokens pays eager_s: EngineOverheads.eager, eager_above_prefill_tokens or else
# eager_above)
PP, MICRO, FULL_PROMPT, EAGER_PREFILL = 19, 20, 21, 22
# cfg (continued): nsizes (the decode / token capture sizes at the front of the loop's `sizes`; any after them are
# the engine's prefill buckets, EngineScheduling.prefill_capture_sizes)
NSIZES = 23
# cfg (continued): pass_tokens (the engine's most tokens a forward pass: llama.cpp's n_ubatch, engines.timing 19.; a
# step of more runs as ceil(tokens / pass_tokens) micro-batches, serving.kernel_pipeline; 0: one pass a step)
PASS = 24
# cfg (continued): fill (1: the engine fills and drains its pipeline every step, m + pp - 1 stage-times; 0: its
# batches stay in flight, max(m, pp): engines.timing 26., serving.kernel_pipeline)
FILL = 25
CACHED, REFS, KIDS = range(3)  # the prefix cache's per-node integers (serving.kernel_prefix)
# fcfg (cache_thr, bal_rel: the prefix-aware router's cache_threshold and balance_rel_threshold)
CAPACITY, STEP_S, PER_SEQ_S, THINK_S, API_S, EAGER_S, SAMPLER_S, SAMPLER_ROW_S, CACHE_THR, BAL_REL = range(10)
# fcfg (continued): a pipeline stage's handoff, b x HANDOFF_BYTES / HANDOFF_BPS + HANDOFF_LAT_S for b sequences
# (serving.pipeline.handoff_terms)
HANDOFF_BYTES, HANDOFF_BPS, HANDOFF_LAT_S = 10, 11, 12
# fcfg (continued): host seconds per token of a step (EngineOverheads.token_s, timing mechanism 17)
TOKEN_S = 13
# fcfg (continued): a save to the server's host prompt cache, seconds each and per byte (EngineOverheads.save_s,
# save_byte_s, timing mechanism 18), and the bytes a saved token holds (Scheduler.save_token_bytes)
SAVE_S, SAVE_BYTE_S, SAVE_TOKEN_B = 14, 15, 16
# fcfg (continued): host seconds of a step with prefill chunks, its graph rebuilt (EngineOverheads.graph_s, timing 21.)
GRAPH_S = 17
# start_s, duration_s, running, waiting, kv_used_bytes, preemptions, tokens, replica, the eager launch (Trace.launch_s)
REC_FIELDS = 9
LAUNCH_COL = 8

