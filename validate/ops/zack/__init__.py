"""Family "zack": decode attention over KV heads with unequal kept dims (ZACK §5.3), persistent split-K.

KV head h keeps d_qk^h key dims and d_v^h value dims (multiples of 16; ZACK's SVD projections are folded
into W_Q/W_K and W_V/W_O, so queries arrive and outputs leave in the reduced dims). The score scale stays
1/sqrt(head_dim): a projection onto kept singular directions preserves q . k.

Flash-decoding with per-head widths: the context of each (sequence b, KV head h) is cut into S chunks of
C tokens (the last shorter); task (b H_kv + h) S + c runs the GROUP query heads of h (rows padded to >= 16
for tl.dot) over chunk c and writes the chunk's fp32 partials, log2 domain:
    m_c = max_t s_t,  l_c = sum_t 2^(s_t - m_c),  acc_c = sum_t 2^(s_t - m_c) v_t,  s_t = q . k_t x scale x log2 e;
`merge_kernel` then gives o = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c, M = max_c m_c (the merge of
validate.common.flash_decode.reduce_kernel, whose uniform [B, H, S, D] partials cannot hold per-head widths).

Chunking (`chunk_tokens`): S = clamp(ceil(TASKS_PER_PROGRAM x P / (B x H_kv)), 1, min(MAX_SPLITS,
floor(L / MIN_CHUNK_TOKENS))), C = ceil(L / S) rounded up to BLOCK_N, then S = ceil(L / C): about
TASKS_PER_PROGRAM tasks per program for list scheduling to balance, no chunk under MIN_CHUNK_TOKENS (each
task refills the load pipeline and writes partials), at most MAX_SPLITS (the merge holds them in registers).

A fixed grid of P = PROGRAMS_PER_SM x SMs programs (co-resident: sm90_specs) walks a task list in CSR form:
program p runs tasks[offsets[p]:offsets[p+1]] in order. The host builds the lists (roofline.methods.zack.assign),
list-scheduling the tasks one at a time onto the least-loaded program, with roofline's decode cost scaled to the chunk,
    cost(b, h, c) = GROUP x n_c x (d_qk^h + d_v^h + 1)      (Zack.kv_task_costs x the chunk's tokens n_c),
taken in launch order ("naive") or longest first ("lpt"): the longest program load is
roofline.methods.zack.makespan for the same costs.

Prediction (`predict`): roofline's decode "attention" op and its "attention_reduce" for a one-layer model
under Zack(qk_dims, v_dims), timed by Roofline(hardware), then
    time_s = max(max(compute_s, memory_s) x task_imbalance(costs, P, policy), launch floor)
with this kernel's task costs (makespan / max(total / P, longest task); roofline.methods.zack). Bytes: K, V
at the kept dims, q, out, and the partials written and read back, 4 B H S (mean d_v + 2) each way
(`layout_bytes`); roofline counts S = ceil(L / SPLIT_TOKENS), the kernel its own S: at most 1.2% of the bytes
apart over the bench grid.

Layouts (flat bf16, per-head widths): q [B, sum_h GROUP d_qk^h] (head h's GROUP rows of d_qk^h at
GROUP * qk_off[h]), k [B, L * sum_h d_qk^h] (head h's [L, d_qk^h] slab at L * qk_off[h]), v likewise with
d_v, out [B, sum_h GROUP d_v^h]; fp32 partials m, l [B, H_kv, S, GROUP] and acc [B, S * GROUP * sum_h d_v^h]
(head h's [S, GROUP, d_v^h] at S * GROUP * v_off[h]). A tile of a head is padded to the next power of two
>= 16 (its "class"); the kernel holds one compiled body per class pair present and masks the padded channels.
"""
