"""What a serving engine costs in time beside the GPU work of the model: an engine's time profile.

The planner's op graph gives the GPU time of one step on a device's ceilings. A real engine adds, each a mechanism
measured on its own (validate/engines/, never fitted to the end-to-end runs it is judged on):

1. **Host work per step** (scheduling, input preparation, sampling, output processing):
       host_s(B) = step_s + per_seq_s x B
   measured as the decode step of a model whose GPU work is negligible (validate/engines `tiny-llama`: 2 layers of
   width 256, Llama-3's vocabulary), offline at B = 1 .. 256, fitted by least squares.
2. **Overlap**: with asynchronous scheduling (vLLM's `async_scheduling`, recorded in the engine's config) the host
   work of step n+1 runs while the GPU runs step n, so a step takes max(gpu, host); without it, gpu + host.
3. **CUDA-graph padding**: a decode batch of B sequences runs the graph captured for the next capture size >= B
   (vLLM `cudagraph_capture_sizes`, recorded from the engine), so its GEMMs and per-sequence kernels run at the
   padded size; past the largest size the step runs at B (piecewise graphs).
4. **The engine's own kernels**: ceilings that replace the device's generic laws when this engine runs on that
   device (attention decode latency + KV bytes / rate of FlashAttention-3's paged decode alone, plus the cost per
   (sequence, KV head) tile the same kernel adds inside the engine's own decode steps, prefill attention FLOP/s
   per head dim, the fused Triton MoE's law), measured by validate/engines/micro.py (alone) and prof.py (in the
   engine's steps) on that GPU. Each kernel alone was timed as the one call of a replayed CUDA graph; its law is
   fitted less that replay's own fixed cost (micro4's graph_floor intercept, 3.95 us on the H200), which a kernel
   among hundreds in the engine's one replay a step does not pay. A GPU with no such measurement takes the same
   laws derived from aiconfigurator's
   measured vLLM tables (profiles/<engine>-derived.json, written by roofline.catalogue.derive.engine_kernels; its
   `sources` name each table), among them the fused MoE's FLOP/s at a prefill-sized batch (grouped_gemm_flops); a
   GPU in neither keeps the device's own measured (or datasheet) laws. The fused MoE law is measured on ONE call of
   the engine's fused_experts (vllm/model_executor/layers/fused_moe/fused_moe.py: moe_align_block_size, the w13
   GEMM, silu_and_mul, the w2 GEMM, moe_sum; aiconfigurator's moe_perf tables time the same layer), while the cost
   model charges the routed experts as its fusion table's grouped calls (costmodel.fusion: 2), each paying the
   per-call latency: the law's alpha is split over those calls (engine_options), and the routing op keeps only the
   kernels outside that call (`op_kernels`: vLLM's topk_softmax alone; align and activation are timed in the law).
5. **A request's own cost** (adding it, its first schedule and step, returning its output): the offline time of one
   short request on the tiny model (`generate()` at B = 1, max_tokens 1, GPU work ~0.1 ms): added to a prefill's GPU
   time (the offline TTFT) in place of the overlapped step host work.
   Served (`vllm serve`), the host law is the tiny server's: its median TPOT at concurrency 1, 16 and 64, fitted
   the same way (server_step_s, server_per_seq_s), used by the serving simulation.
6. **The API server's per-request cost** (HTTP, tokenization, detokenization, streaming): TTFT of a short prompt at
   concurrency 1 on the tiny server, less (5); added to a served request's TTFT (serving only).
7. **A draft model's host work** (speculative decoding, vLLM's V1 runner with async scheduling off): per step
   spec_step_s (rejection sampler, proposer set-up, the drafts' copy to the host), serial with the target's step,
   and per draft pass draft_pass_s + draft_layer_s x the draft's layers (the drafter runs PIECEWISE CUDA graphs at
   most, so attention launches from Python once per layer per pass: vllm/v1/spec_decode/llm_base_proposer.py@v0.24.0
   initialize_cudagraph_keys), a pass taking max(its GPU work, that host work): the GPU runs the pass's kernels as
   they are launched. From validate/engines/spec_step.py's multiprocess walls on a tiny target (derive.py --spec;
   run 6, validate/notes/2026-11-29-vllm-h200-run6.md); zero until measured.
8. **A step past the largest capture size** (a prompt or a mixed batch of more than 512 tokens in vLLM 0.24 on the
   H200) runs the compiled pieces without CUDA graphs: every kernel of every layer is launched from Python, and
   vLLM's FusedMoE layer adds its own Python path (routing, expert alignment, two Triton launches, activation, sum).
   Its host work, eager_step_s + eager_layer_s x layers + eager_moe_layer_s x layers with routed experts, runs
   ahead of the GPU (launches are asynchronous) on the thread that also schedules the step (vLLM 0.24's engine core
   runs a one-GPU model runner in its own process, UniProcExecutor), so such a step takes max(GPU, host + launches)
   under asynchronous scheduling, host + max(GPU, launches) without it; a lone prefill, max(GPU, launches) after
   the request's own cost.
   Measured on models of the judged layer structure at negligible widths (validate/engines/cases-run5.json: 2 and
   32 dense layers, Qwen3-30B-A3B's 48 MoE layers, DeepSeek-V2-Lite's 27 MLA layers), prompts of 1,024-4,096 tokens,
   fitted by least squares on the layer counts (derive.py --eager); nothing judged enters the fit. The MoE term is
   the unquantized FusedMoE's (bf16 experts through the fused Triton kernel, the path measured); a quantized MoE
   runs another backend whose Python path is not measured and pays the dense layer's launches (EAGER_MOE_DTYPES).
   SGLang 0.5.17 captures its decode batches (bs 1 .. 256 on the H200) and, apart, "breakable" prefill graphs of
   4 .. 8,192 tokens (prefill_capture_tokens, its start-up log): a decode batch of more than 256 sequences runs
   eagerly (run 3's Qwen3-30B-A3B server logged 'cuda graph: False' at 259-360 running requests), a prefill only
   past 8,192 tokens. Its law is measured the same way on its own engine: the narrow models' decode at B 288 and
   384 less their graphed step extended to B (validate/engines/cases-sglang-run3b.json, derive_sglang.py --eager).

9. **The engine's sampler** (vLLM's V2 runner, vllm/v1/worker/gpu/sample/sampler.py v0.24.0: the logits' fp32 cast,
   the temperature division, gumbel_sample) is GPU work of every step that the op graph has no op for, serial with
   the model's: sampler_s = latency_s + rows x vocabulary / elements_per_s, one row per sequence sampled (a decode
   step's B, a prefill's B prompts). Measured alone in a graph replay by validate/engines/micro4.py on the GPU it
   applies to (B = 32 .. 256 on 32,000 and 128,256 tokens, the replay's own fixed cost removed; derive.py --micro4);
   a GPU without that measurement pays none. Two more of micro4's kernels set ceilings (4.): vLLM's KV write
   (reshape_and_cache_flash: kv_write_latency + bytes / kv_write_bw for the kv_update op), and a small kernel's
   cost inside the engine's graph replay (kernel_time: the chain of dependent one-element kernels' slope).

10. **The KV connector of a disaggregated pair** (vLLM's NixlConnector: the decode instance READs each request's
   prompt KV from the prefill instance through NIXL over UCX, one descriptor per (KV region, block): two regions a
   layer, K and V, one for MLA's latent; vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py@v0.24.0
   register_kv_caches). Blocks of a request are not contiguous in general, so the descriptors do not merge, and
   UCX posts them one by one on the caller's thread: from the post to the READs' completion kv_transfer_s +
   descriptors x kv_descriptor_s, measured by validate/engines/nixl_probe.py alone with the UCX threads the connector
   gives its agent (num_threads 4: nixl/base_worker.py@v0.24.0 lines 319-329; two processes, one GPU each, spaced
   descriptors of 8-32 KiB, relative least squares; derive.py --nixl), on top of the bytes over the link between the
   pools (serving.disagg). Part of that time is host work of the decode instance's worker: the connector posts a
   request's READs on the thread that launches the steps (NixlConnector.start_load_kv, before the step's forward),
   so the step that starts a load takes its post as host work of its own (EngineOverheads.combine's loads_s):
   kv_post_s + descriptors x kv_post_descriptor_s, measured alone by nixl_probe.py with NUM_THREADS=4 (derive.py
   --nixl-post). Zero until measured. The engine core's loop is serial (vllm/v1/engine/core.py@v0.24.0:519-632,
   step_with_batch_queue: schedule, execute_model, which posts before the forward's launch, sample_tokens, then the
   previous step's output; a one-GPU UniProcExecutor runs both calls on that thread, v1/executor/
   uniproc_executor.py:79-131), so under asynchronous scheduling the step after a posting one is scheduled when the
   posting step's host work ends (EngineOverheads.host_s after its schedule), not at that step's start
   (serving.fleet.Fleet._serial).

11. **The host's speed.** Every figure of 1, 5-8 and 10's post is work of one Python thread on the host's CPU, so it
   scales with that core's speed: the tiny server of validate/engines run on two lent H200 hosts read a median TTFT
   at concurrency 1 of 16.63 ms (2026-11-28, the profile's own source) and 9.50 ms (run 17, 2026-11-30), and its
   median TPOT 2.91 and 1.53 ms: 1.75x and 1.91x, the two states run 11 found the lent hosts' vCPUs in (1.71x,
   validate/notes/2026-11-29-vllm-h200-run11.md). `host_speed` (a workload's, `--host-speed`) divides those figures:
   1 is the profile's own host; a user's host is its tiny server's TTFT at concurrency 1 against 16.63 ms
   (validate/engines/serve_tiny.sh). GPU work (4, 9) and the connector's completion (10) do not move with it.
   The compile of 12 and the handshake of 13 are host work too and divide the same way.

12. **A fresh server's first use of a fused-MoE specialisation** (roofline.engines.first_use): the Triton fused-MoE
   kernel compiles its two launches the first time an eager step meets a new (tuned config, M x top-k divisible by
   16) key; moe_jit_key_s is the seconds one new key costs, measured alone by validate/engines/jit_probe.py in a
   fresh Triton cache at Qwen3-30B-A3B's shapes (the median of the new keys' first calls in a process past its
   first use; derive_jit.py). Charged only by `simulate --cold-start` (`--compiled-tokens`: the keys the
   process's earlier traffic compiled); zero until measured.

13. **A fresh disaggregated pair's first handshake** (10.'s connector; serving.remote.Handshake): a decode worker
   meets a prefill engine the first time a request to load from it is posted (NixlConnector.start_load_kv:
   vllm/distributed/kv_transfer/kv_connector/v1/nixl/pull_worker.py@v0.24.0:63-74). It then starts one handshake
   per remote engine in a one-thread background executor (base_worker.py:439-446, 752-799: _ensure_handshake keeps
   one future per engine id; later requests attach to it, :801-827) and does not post that request's READs: the
   request stays in WAITING_FOR_REMOTE_KVS until the handshake's callback queues it, and the next worker call posts
   it (pull_worker.py:73-75). The handshake (_nixl_handshake, :527-643) asks the prefill engine's side channel for
   its metadata over ZMQ (answered from pre-encoded bytes, base_scheduler.py:289-321), then add_remote_agent
   (:1410-1594) registers the remote agent and builds one descriptor per (region, block) of the remote's WHOLE pool in
   Python (_build_fa_remote, :1308-1364) before prep_xfer_dlist. Each decode TP rank does its own, in parallel, with
   the remote ranks it reads from, one after the other (kv_connector/utils.py:570-580: prefill tp / decode tp of
   them when the prefill side is wider). kv_handshake_s is the seconds the first request of a fresh pair waited,
   measured by run 17's warm-up (validate/engines/derive_handshake.py: the first request's decode leg less the warm
   pair's median, 1.352 s) and kept at the profile's host (11.: times run 17's host speed 1.7501 from its own tiny
   server, 2.366 s), since the registration is one thread's host work. Every pool the runs met had the same blocks
   (839,648 tokens x 64 regions), so the runs alone cannot say how it grows with the remote pool. The per-descriptor
   law, kv_handshake_fixed_s + descriptors x kv_handshake_descriptor_s over the remote rank's whole pool (2 regions
   a cached layer, 1 with MLA's latent, times its blocks), is measured apart by validate/engines/handshake_probe.py
   (vLLM's handshake path on pools of 1/8 .. 1x a Llama-3.1-8B H200 pool, derive_handshake.py --probe); where the
   profile carries it, it replaces the one figure (EngineTiming.handshake_s). Charged only by
   `simulate --cold-start --disaggregate` (vLLM); zero until measured.

14. **An engine's prefill kernels at their own laws** (SGLang 0.5.17 on the H200; derive_sglang.py --extend, from
   validate/engines/micro_sglang.py's extend group: each kernel alone at a served prefill's sizes, less a one-call
   replay's fixed cost as in 4.). Three mechanisms of its served prefill step that the device's generic laws miss:
   - the fused MoE pads each expert's routed rows to a multiple of its tile height (moe_align_block_size,
     srt/layers/moe/moe_runner/triton_utils/fused_moe.py:418-419), BLOCK_SIZE_M of the tuned config at the key
     nearest the call's tokens M (fused_moe_triton_config.py:300; `moe_block_m:<key>`), and both GEMMs run the padded
     rows: the experts' compute term takes costmodel.blocks.padded_rows (max(E b ceil(r / b), rows + E (b - 1) / 2),
     r = M k / E rows an expert) at grouped_gemm_flops, measured as FLOP/s of the padded rows;
   - FA3's extend call (flashattention_backend.py:1453-1471: the prompt's K/V read back through the page table, no
     precomputed scheduler metadata, so prepare_varlen_num_blocks runs every layer) costs attn_prefill_latency a
     call plus attn_prefill_row per (query token, head) row, a 128-query tile's Q load, epilogue and the masked
     half of its diagonal tile, beside the causal FLOPs at the rate of the rest (attention_flops);
   - q is a strided view of the fused qkv output (srt/models/qwen3_moe.py:627), made contiguous before FA3 (extend
     :1454, decode :1910): an op the model's graph lacks, `graph_ops` 'q_copy' (costmodel.attention.q_copy, every
     standard-attention layer, prefill and decode), at copy_latency + bytes read and written / copy_bw (a strided
     elementwise copy, far under the streaming bandwidth). A step of one token copies nothing (one row is contiguous
     already; run 2c's decode census: the copy 48 times a step at B 16, never at B 1): the op carries its rows and
     costs 0 at one (Roofline._op_times; the serving step model prices the step's own token count).

15. **llama.cpp's own kernels and loop** (ggml-cuda at 0c1e570 on the H200; validate/engines/derive_llamacpp.py from
   run 3's microbenchmarks, judged on run 1: validate/notes/2026-11-30-llamacpp-h200-run1.md):
   - ggml's matmuls by the call's rows n (test-backend-ops MUL_MAT, F16 weights, the 8B's five shapes): one row
     runs its mat-vec kernel, gemv_latency + bytes / gemv_bw (~3.8 TB/s: the weights read near the streaming
     rate); two rows on, the batched path reads them slower, gemm_latency + bytes / gemm_stream_bw (~3.5 TB/s and
     ~6 us a call); past the stream law, FLOPs at gemm_shape (16-bit, ~525 TFLOP/s against the device's 730 for
     bf16), measured at 512 rows: llama.cpp runs a prompt in physical batches of n_ubatch = 512 tokens, so no call
     of its default settings has more. A law of any shape's bytes and FLOPs (Roofline._op_times: a GEMM's rows,
     `one_row`), not a table.
   - FLASH_ATTN_EXT at one query: attn_decode_latency + K,V bytes / attn_decode_bw.
   - (retired by 17.) run 3's step past one token, B 2 less B 1 less the matmuls' own n 2 - n 1, was charged as
     eager_layer_s x layers to every step of more than one token; run 5's kernel timeline found no such host work.
   - llama-server samples every slot on the host after the step, in series (overlap False): per slot the default
     sampler chain scans the vocabulary's logits, sampler_host_element_s x vocabulary seconds a slot (at -np 8, the
     server's decode time a token with the default chain on the host less with greedy sampling on the GPU,
     --backend-sampling, / 8 / 128,256), host work of the served step (scheduling.with_sampler);
     llama-batched-bench samples nothing.
16. **llama.cpp on GGUF-quantized weights** (ggml-cuda at 0c1e570 on the H200; derive_llamacpp.py from run 4's
   test-backend-ops alone, judged on runs 4 and 4b's llama-bench and batched-bench:
   validate/notes/2026-11-30-llamacpp-h200-run4.md). A GEMM whose weights a GGUF preset quantizes carries its ggml
   type (Op.weight_type: gguf_quant.group_types, the group's type by bytes); ggml_cuda_mul_mat runs it as MMVQ (the
   mat-vec kernel over the columns) up to 8 rows and MMQ (the tile kernel, activations quantized to q8_1) above, each
   type at its own laws, 'ggml:<type>:<law>' (Roofline._ggml_matmul; ggml_types.law_type takes a family's laws for a
   type not timed): one row k gemv_latency + W / gemv_bw; n = 2..8 rows one row + F (1 - 1 / n) / mmvq_rate (the
   further columns' dot products, the weights read once: 17.); past 8 k mmq_latency + W / mmq_bw + F / mmq_rate (W
   weight bytes, F FLOPs, k the calls). The small kernels of a layer
   cost their measured median (kernel_time, ~1.6 us at one token), and op_kernels gives llama.cpp's own counts (q, k,
   v three calls and gate, up two: the GGUF's own tensors; the residual adds and RoPE's two kernels unfused), which
   the 16-bit laws use too. Prefill attention runs at ggml's own FLASH_ATTN_EXT rate (attention_flops, run 3's 512
   queries over a random mask; a causal prompt's masked tiles are skipped, flash_attn_mask_to_KV_max).
17. **llama.cpp's step on a kernel timeline** (run 5: validate/engines/cupti_trace.c, CUPTI's activity records of an
   unmodified llama-batched-bench and llama-bench, cut into steps at the logits' copy by kernel_trace.py; note
   validate/notes/2026-11-30-llamacpp-h200-run5.md). A decode step is one CUDA-graph launch at B 1, 2 and 8 alike
   (graphs off, the same GPU time), and the GPU is busy through it: the step past one token has no host excess
   (eager_layer_s 0). Between two steps the GPU waits on the host's llama_decode (graph build, inputs, the graph's
   update and launch): step_s, the untimed step less its traced GPU-busy time less the logits' copy, median over F16
   and Q8_0 at B 1 / 2 / 8, in the benchmark's and the server's step alike (server_step_s). After its last kernel a
   step copies its logits to the host, B x vocabulary x 4 bytes at ~55.6 GB/s: the `sampler` law's slot (9.), serial
   with the step. MMVQ at n columns reads the
   weights once and redoes the dot products per column: one column's law plus the further columns' FLOPs at
   mmvq_rate (16.'s 2..8-row law had a latency of 12-15 us a call, fit at n 8, that a 4096 x 1024 q8_0 call at n 2
   never pays: 187 % over; the in-step q8_0 calls at B 2 match the isolated ones). Every token a step carries adds
   token_s to the host's work before the GPU starts (the CPU's token-embedding rows, the KQ mask over the stream's
   cells, the inputs): a 512-token prompt ubatch waits ~3 ms, a decode token a few us; token_s = a prompt of 512
   tokens' untimed steady-state time less its traced GPU-busy time, its logits' copy and step_s, / 512 (run 5, F16
   and Q8_0), in the planner's steps and prompts and the simulator's steps alike.
   Two of the step's kernels at their own costs (note validate/notes/2026-12-01-llamacpp-mmvq-norm.md): MMVQ at n
   columns pays one column's law plus the further FLOPs at n's own seconds per FLOP (mmvq_flop_s:<n>, stage O's rows
   at n 2, 4, 8, each shape counted as often as a step runs it; 3, 5-7 interpolated): ggml-cuda instantiates
   mul_mat_vec_q per ncols_dst, and a second column costs almost nothing where the eighth costs ~3 us on a
   4096 x 14336 call; and ggml's rms_norm kernel (fused with the weight's mul, one CTA a row) costs norm_kernel,
   ~3.25 us a call in every decode step of the timelines from B 1 to 64, not kernel_time's 1.6.

18. **llama-server's host prompt cache** (run 6: validate/engines/llamacpp_run6.sh, llamacpp_cache.py; note
   validate/notes/2026-12-01-llamacpp-h200-run6.md). Since ggml-org/llama.cpp PR #16391 the server keeps finished
   requests' states in host memory (--cache-ram, 8192 MiB by default): when a task starts, every idle slot whose state
   is not yet cached is saved first, its KV (the prompt and output tokens but the last sampled) copied to the host
   while the server's loop waits (run 1's prompt steps: 84 ms where the prompt itself took 37.6). The server's own log
   times each save: cache_save_s + bytes x cache_save_byte_s, 4.8 ms + bytes / 1.82 GB/s over 14 saves of 18 ..
   1,026 MiB with f16 and q8_0 KV (a compressed KV saves fewer bytes, as fast a byte). The simulator (Scheduler and the
   compiled kernel alike) keeps each finished request's tokens until a step admits a request, which pays all of them
   as host work (the admitting step's loads_s); `simulate --cache-ram 0` turns it off.

19. **llama.cpp's ubatches are passes** (validate/notes/2026-12-01-llamacpp-ubatch-passes.md). llama_decode splits a
   call's tokens into ubatches of at most n_ubatch (512, llama-server's log; pass_tokens) and computes one graph a
   ubatch: runs 5 / 5b's timelines hold four ubatches' kernels in a 2,048-token call (mul_mat_q 884 = 4 x 221 calls).
   So a prompt or a server step of T tokens reads the weights and launches every kernel ceil(T / pass_tokens) times,
   each pass over its share of the work (Op.passes: passes x one pass's time; the planner's prefill chunks at
   pass_tokens, the serving step's micro-batches at pp 1: PhaseModel.micro_count). Before, a 2,048-token call was
   one pass: the quantized MMQ calls paid their latency and weights once, the batched prefill 13 % under.
20. **llama-server's slots with one KV stream each** (-np N without -kvu; validate/notes/2026-12-01-llamacpp-slots.md,
   validate/engines/llamacpp_slots.py). A task takes the least recently used idle slot, the last of equals
   (get_available_slot), so a fresh server fills slots N-1, N-2, ...; with one KV stream a slot llama_kv_cache splits a
   batch with split_equal(sequential), whose ubatch holds only consecutive sequence ids and equal tokens of each
   (engines.llamacpp.ubatches). Four streaming requests in slots {0, 1, 4, 5} decode in two passes over the weights:
   run 6's and run 8a's c4 after r8 at 14.6 / 15.4 ms a token, run 8b's in one run at 9.4 (the same workload: the LRU
   order r8 left decided it). The simulator (Scheduler slot ids, Simulator._slot_ends: StepModel's numpy path, each
   ubatch its token share of the step's work) runs it under --max-num-seqs N unless --kv-unified; the server's default
   (4 slots, unified) and the planner (a batch's slots consecutive) take one split_simple pass a pass_tokens.
21. **llama-server's graph rebuild** (runs 9 and 10: validate/notes/2026-12-01-llamacpp-slots.md). llama_context
   reuses the step before's graph when the ubatch's shapes and inputs allow (process_ubatch, can_reuse); a step with
   prompt tokens, and a step its slots split into ubatches (run 9's split server: n_reused stalls), build it again
   (build_graph, the scheduler's allocation, the inputs, ggml-cuda's CUDA graph captured again) before the GPU starts.
   server_graph_s = four streams pinned to slots 4..7 with LLAMA_GRAPH_REUSE_DISABLE=1 (run 10) less the same with
   reuse (run 9), TPOT p50: 2.16 ms, paid once a step (EngineOverheads.graph_s: a split step's later ubatches build
   theirs under the GPU's work of the one before). llama-batched-bench's rebuild is 0.47 ms (run 10): the server's
   alone (its eight KV streams' views, the per-slot outputs), not the benchmarks' the planner judges.
22. **A one-stream llama-server attends over every cell its stream holds** (validate/notes/2026-12-01-llamacpp-kv-
   span.md; fa_span). A ubatch's K/V view is pad256 of its stream's highest used cell (llama_kv_cache::get_n_kv), and
   ggml-cuda's FLASH_ATTN_EXT trims a query tile to its last unmasked cell only with >= 1,024 query rows or several
   streams (launch_fattn: flash_attn_mask_to_KV_max): a one-stream ubatch (the server's -kvu, its default; n_ubatch 512)
   computes every cell of the view, masked ones too, so a prompt piece of c tokens scores c x view pairs at the
   engine's attention rate, and a decode reads the view once per MMA block of 64 / ncols2 query rows (fattn.cu).
   An idle slot keeps its cells until a task takes the slot, or with the host prompt cache on (--cache-idle-slots)
   until the next task starts (Scheduler.slot_cells, stream_used). No constant: run 13 (predicted before) read the
   lone prompt's TTFT -4.0 / -1.4 % and a decode's TPOT +1.6 / -1.1 % beside 12,003 / 36,003 kept cells, where the
   model without it read -41 / -65 % and -10 / -29 %; run 12's -kvu server TTFT -31.6 -> -1.8 %, TPOT -17.7 -> -9.1 %.
   The planner's llama.cpp decode (a batch's slots, one stream) reads its own cells, the same view up to 64 / ncols2
   sequences; past that the serving simulation's reads are the server's (ceil(B / (64 / ncols2)) views). Not in the
   rule: a sliding-window layer's own cache (its view is every slot's window, priced here at one window), and MLA's
   grouping of 16 heads (ncols2 16 at DKQ 576; taken as 8).
23. **The host's KQ mask over a one-stream view** (run 16: validate/engines/kq_mask_bench.cpp, note
   validate/notes/2026-12-01-llamacpp-kv-span.md; mask_cell_s, mask_copy_s). llama_kv_cache::set_input_kq_mask
   builds a row of the view for every token of a ubatch, on the host before the GPU starts: the first token of each
   sequence walks every cell (empty? its sequence's? causal?), each further one copies that row. Timed alone on the
   H200 machine's host over the engine's own llama_kv_cells: 4.49 ns a cell walked (the median of 15 decode cases,
   1..32 rows, views to 262,400 cells), 0.20 ns a cell copied. step_s and token_s were measured on streams of their
   own, so a one-stream ubatch pays the mask only on the cells past its rows' own views (StepModel._mask_s). Run 15's
   one-stream decode step less the stream-a-sequence one: +1.13 / +2.39 ms at B 16 / 17, the model +1.09 / +2.30.
24. **An eager step's launch overlaps the step before it** (asynchronous scheduling with the admission lag: vLLM's
   async scheduling, SGLang's overlap loop; validate/notes/2026-11-30-c16-ttft.md section 2, validate/notes/
   2026-12-02-eager-overlap.md). vLLM 0.24's engine core (v1/engine/core.py@v0.24.0:519-603 step_with_batch_queue)
   schedules and launches step k, then blocks on step k - 1's result and sends its outputs, then schedules and
   launches step k + 1: the host begins step k + 1's work (its host seconds, 1. + 17. + 10.'s posts + 8.'s launches:
   EngineOverheads.host_s) at H(k + 1) = max(H(k) + host_s(k), S(k)), S(k) step k's start (step k - 1's end), not at
   step k's end. An eager step's kernels run as they are launched, so it ends at max(S + GPU, H + host_s): its wall
   is max(GPU, host_s - lead), the lead E(k) - H(k + 1) >= 0 the host had on it (0 after an idle engine); a graph
   step's one launch comes at the end of its host work and keeps 2.'s max(GPU, host_s). No constant: a chain of
   like steps takes max(GPU, host_s) as before (a GPU-bound chain's lead is a whole step, a host-bound one's 0); only
   an eager step after a GPU-bound one moves, its launch run while that step runs on the GPU: in run 23's step log an
   eager step's line comes 55.0 ms after the line two before it (median of 124 isolated eager steps after graph
   steps; its launch period 50.0 ms), where the rule before put it 13.4 + 54.9 = 68.3 ms after. The next step is
   scheduled at H(k + 1), so a request that arrives while a launch outlasts its step's start runs in the next step
   (the admission lag's two steps where the GPU bounds the steps; serving.simulate.host_start), and the step before's
   outputs leave once the eager launch ends: its part past the lead (clients.launch_delay_s, Simulator.
   release_at_launch; a graph step's schedule and launch are in 6.'s API path). scheduling.chained_ends, both record
   loops (serving.kernel_block.extend).
25. **The API server's one loop** (issue 33; validate/notes/2026-12-02-run26-27.md). vLLM's API server runs every
   stream's output processing and SSE chunk on one asyncio loop in one process (the GIL): per streamed token it costs
   api_output_s (OutputProcessor.process_outputs: detokenise, stats, the collector) + api_chunk_s (the stream task's
   wake-up, the chunk's pydantic model and JSON, Starlette's and uvicorn's send), measured by validate/engines/
   api_loop_bench.py on the H200 host (run 25). tokens/s x (api_output_s + api_chunk_s) is the loop's busy share
   (simulate's `api_server.load`, reported, not timed): past ~0.9 the loop never idles, and a new request's tokenise
   leg waits for the GIL the loop holds (runs 26 / 27: a waking thread's GIL wait 5.6-26 ms mean, up to 0.3-0.5 s,
   while the loop's own hop stays 0.25-1.4 ms; validate/engines/gil_gaps.py: a busy thread's short GIL-free gaps every
   0.5-2 ms starve a waiter for seconds on the H200 host), which the simulation does not time. The figure leaves out
   each request's own work (its HTTP request, tokenising): runs 26 / 27 read the server's CPU 0.28-0.30 / 0.44-0.45
   at 2,806 / 5,327 streamed tok/s where it gives 0.19 / 0.36.
26. **A pipeline's batches in flight** (pp > 1; validate/notes/2026-12-02-run28-pp.md; read from the engines' source,
   not yet timed: run 28's prediction waits for a two-GPU machine). vLLM keeps pp (+ 1) batches in flight and makes
   a decoding request eligible again pp steps after it was scheduled, so the running requests decode in pp groups and
   each stage works on one group while the next works on another; SGLang's event_loop_pp keeps one batch a rank. A
   token of every sequence then takes max(m, pp) stage-times of m micro-batches (pipeline_slots), not a GPipe fill
   and drain's m + pp - 1, which llama.cpp (one llama_decode call's ubatches) and TensorRT-LLM (not read) keep.
   The host's share is not changed: each of the m group steps pays the engine's per-step host cost in vLLM's engine
   core (m x step_s a round), which the model does not count yet (run 28's H3).

Profiles are data (roofline/engines/profiles/<engine>.json, written by validate/engines/derive.py from committed
results, each figure with its source file); an engine without one costs nothing beyond the GPU work (`ideal`).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from roofline.errors import SpecError

PROFILES = Path(__file__).resolve().parent / "profiles"
# ceilings (roofline.costmodel.device_ceilings keys) an engine's kernels may replace on a GPU they were measured on
KERNEL_KEYS = ("attn_decode_bw", "attn_decode_latency", "attn_decode_program", "attn_decode_local_program",
               "grouped_gemm_bw", "grouped_gemm_latency", "routing_kernel", "grouped_gemm_flops", "kv_write_latency",
               "kv_write_bw", "kernel_time", "allreduce_custom_latency", "allreduce_custom_bw",
               "allreduce_custom_ranks", "allreduce_custom_max_bytes", "attn_prefill_latency", "attn_prefill_row",
               "copy_latency", "copy_bw", "gemv_bw", "gemv_latency", "gemm_stream_bw", "gemm_latency", "norm_kernel",
               "one_row_epilogue")
# ... and keys of a family: an engine's tuned fused-MoE config, BLOCK_SIZE_M per key M ('moe_block_m:<M>', 14.);
# an engine's own GEMM laws (15.: llama.cpp's ggml matmuls replace the device's at their rows)
# and llama.cpp's quantized matmuls per ggml type ('ggml:<type>:<law>', 16.)
KERNEL_PREFIXES = ("moe_block_m:", "gemm_shape:", "sustained_gemm:", "ggml:")


def _kernel_key(key: str) -> bool:
    """Whether `key` is a ceiling an engine's kernels may set (KERNEL_KEYS, KERNEL_PREFIXES)."""
    return key in KERNEL_KEYS or key.startswith(KERNEL_PREFIXES)


@dataclass(frozen=True)
class EngineTiming:
    """One engine's time profile (module docstring); every figure carries its source in `sources`."""

    engine: str
    version: str
    step_s: float = 0.0
    per_seq_s: float = 0.0
    overlap: bool = False
    capture_sizes: tuple[int, ...] = ()
    # the largest prefill (extend) step the engine runs under a CUDA graph (8.): SGLang 0.5.17 captures "breakable"
    # prefill graphs of 4 .. 8,192 tokens beside its decode batches; 0: a prefill or mixed step is eager past the
    # capture sizes, as a decode batch (vLLM's sizes count tokens of any step)
    prefill_capture_tokens: int = 0
    api_request_s: float = 0.0
    request_s: float = 0.0
    # the API server's host law (its output streaming costs more per sequence than the offline LLM class's)
    server_step_s: float = 0.0
    server_per_seq_s: float = 0.0
    # a draft model's host work (7.): per speculative step, per draft pass and per draft layer in a pass
    spec_step_s: float = 0.0
    draft_pass_s: float = 0.0
    draft_layer_s: float = 0.0
    # a step past the largest capture size (8.): per step, per layer, and more per layer with routed experts
    eager_step_s: float = 0.0
    eager_layer_s: float = 0.0
    eager_moe_layer_s: float = 0.0
    kernels: dict[str, dict[str, float]] = field(default_factory=dict)  # GPU name -> {ceiling key: value}
    attention_flops: dict[str, dict[int, float]] = field(default_factory=dict)  # GPU -> head dim -> FLOP/s
    sources: dict[str, str] = field(default_factory=dict)
    # kernels an op launches outside the engine's measured fused calls (op name -> count; module docstring, 4)
    op_kernels: dict[str, int] = field(default_factory=dict)
    # the sampler's law per GPU (9.): GPU name -> (latency_s, elements_per_s)
    sampler: dict[str, tuple[float, float]] = field(default_factory=dict)
    # a disaggregated pair's KV connector (10.): per transfer and per descriptor
    kv_transfer_s: float = 0.0
    kv_descriptor_s: float = 0.0
    # ... and the part of it the decode instance's worker spends posting the READs (host work of a step, 10.)
    kv_post_s: float = 0.0
    kv_post_descriptor_s: float = 0.0
    # a fresh server's compile of the fused-MoE Triton kernel at a new specialisation (12.): seconds a new key costs
    moe_jit_key_s: float = 0.0
    # a fresh disaggregated pair's first KV connector handshake (13.): seconds its first load waits (one figure) ...
    kv_handshake_s: float = 0.0
    # ... or, where measured, per remote rank: fixed + descriptors of the remote's whole pool x per descriptor
    kv_handshake_fixed_s: float = 0.0
    kv_handshake_descriptor_s: float = 0.0
    # ops the engine adds to the model's op graph (14.: 'q_copy')
    graph_ops: tuple[str, ...] = ()
    # a decode step past the capture sizes adds its eager cost to the GPU's work, not under it (15.: llama.cpp)
    eager_serial: bool = False
    # the host sampler's seconds per slot per vocabulary element (15.: llama-server's CPU sampler chain)
    sampler_host_element_s: float = 0.0
    # host seconds per token a step carries, serial with its GPU work (17.: llama_decode's per-token work on the CPU)
    token_s: float = 0.0
    # bytes of an activation element between the engine's ops (16.: ggml keeps them F32); 0: the workload's own
    activation_bytes: int = 0
    # a server's save of a finished request's KV to its host prompt cache before the next task starts (18.: llama-server
    # --cache-ram): seconds per save and per byte saved, serial with the server's loop; 0: no such cache
    cache_save_s: float = 0.0
    cache_save_byte_s: float = 0.0
    # the most tokens one forward pass runs (19.: llama.cpp's n_ubatch): a prompt or a step of more runs as
    # ceil(tokens / pass_tokens) passes, each reading the weights and launching every kernel; 0: one pass a step
    pass_tokens: int = 0
    # the server's host work when a step cannot reuse the step before's graph (21.: llama-server rebuilds its ggml graph
    # for a step with prompt tokens and for a step split into ubatches by its slots)
    server_graph_s: float = 0.0
    # the attention kernel computes every cell of its stream's KV view for every query row (22.: ggml's
    # FLASH_ATTN_EXT on one stream under 1,024 rows): a unified stream's step attends over every slot's cells
    fa_span: bool = False
    # the host's KQ mask over a one-stream view (23.: llama_kv_cache::set_input_kq_mask): seconds per cell a sequence's
    # first row walks, and per cell each further row of its ubatch copies; charged on the view's cells past those of
    # a stream of its own (which step_s and token_s were measured with)
    mask_cell_s: float = 0.0
    mask_copy_s: float = 0.0
    # the API server's loop per streamed token (25.): output processing and the SSE chunk
    api_output_s: float = 0.0
    api_chunk_s: float = 0.0

    def passes(self, tokens) -> int:
        """Forward passes of a step or prompt of `tokens` tokens (19.): ceil(tokens / pass_tokens), 1 without a
        pass limit or a token."""
        return max(1, -(-int(tokens) // self.pass_tokens)) if self.pass_tokens else 1

    def handshake_s(self, descriptors) -> float:
        """Seconds a fresh pair's first load waits for the handshake with one remote rank whose whole pool is
        `descriptors` (region, block) descriptors (13.): kv_handshake_fixed_s + descriptors x
        kv_handshake_descriptor_s where the profile carries the per-descriptor law, else the one figure
        kv_handshake_s (0 where neither was measured)."""
        if not self.kv_handshake_descriptor_s:
            return self.kv_handshake_s
        return self.kv_handshake_fixed_s + descriptors * self.kv_handshake_descriptor_s

    def connector_s(self, descriptors):
        """Seconds the engine's KV connector takes to move `descriptors` (KV region, block) descriptors of one
        request between a prefill and a decode instance (10.): kv_transfer_s + descriptors x kv_descriptor_s; 0
        where it was not measured."""
        if not self.kv_descriptor_s:
            return 0.0 * descriptors
        return self.kv_transfer_s + descriptors * self.kv_descriptor_s

    def post_s(self, descriptors):
        """Host seconds the engine's KV connector spends posting a request's `descriptors` READs on the worker's
        thread (10.): kv_post_s + descriptors x kv_post_descriptor_s; 0 where it was not measured."""
        if not self.kv_post_descriptor_s:
            return 0.0 * descriptors
        return self.kv_post_s + descriptors * self.kv_post_descriptor_s

    def sampler_s(self, hardware_name: str, rows, vocab: int):
        """GPU seconds of the engine's sampler over `rows` sampled sequences of a `vocab`-token vocabulary on
        `hardware_name` (9.): latency_s + rows x vocab / elements_per_s; 0 where it was not measured (or no row)."""
        law = self.sampler.get(hardware_name)
        if law is None:
            return 0.0
        latency_s, elements_per_s = law
        return (rows > 0) * (latency_s + rows * vocab / elements_per_s)

    def host_s(self, batch, tokens=None) -> float:
        """Host work of one step of `batch` sequences carrying `tokens` tokens (a decode step's own: one a sequence),
        s: step_s + per_seq_s x batch + token_s x tokens (17.)."""
        return self.step_s + self.per_seq_s * batch + self.token_s * (batch if tokens is None else tokens)

    def draft_pass_host_s(self, draft_layers: int) -> float:
        """Host seconds of one pass of a draft of `draft_layers` layers (7.): draft_pass_s + draft_layer_s x layers;
        the pass takes at least this long whatever its GPU work."""
        return self.draft_pass_s + self.draft_layer_s * draft_layers

    def eager_above(self, prefill: bool = False) -> int:
        """The most tokens a step runs under a CUDA graph (8.): the largest capture size, or for a prefill step the
        largest prefill graph where the engine captures those apart (prefill_capture_tokens); 0 without graphs."""
        if not self.capture_sizes:
            return 0
        return self.prefill_capture_tokens if prefill and self.prefill_capture_tokens else self.capture_sizes[-1]

    def eager_host_s(self, tokens: int, layers: int, moe_layers: int, prefill: bool = False) -> float:
        """Host seconds of launching a step of `tokens` tokens through `layers` decoder layers (`moe_layers` of them
        with routed experts) without CUDA graphs (8.); 0 for a step within the largest capture size (a prefill step:
        eager_above(True)), or an engine with no such measurement."""
        if not self.capture_sizes or tokens <= self.eager_above(prefill):
            return 0.0
        return self.eager_launch_s(layers, moe_layers)

    def eager_launch_s(self, layers: int, moe_layers: int) -> float:
        """Host seconds of one step's launches without CUDA graphs (8.): eager_step_s + eager_layer_s x layers +
        eager_moe_layer_s x moe_layers; 0 where the engine's eager step is not measured."""
        if not self.eager_layer_s:
            return 0.0
        return self.eager_step_s + self.eager_layer_s * layers + self.eager_moe_layer_s * moe_layers

    def padded(self, batch: int) -> int:
        """The batch a decode step runs at: the smallest capture size >= batch (batch itself past the largest)."""
        sizes = self.capture_sizes
        if not sizes or batch > sizes[-1]:
            return batch
        return sizes[bisect.bisect_left(sizes, batch)]

    def step(self, gpu_s: float, batch: int, eager_s: float = 0.0) -> float:
        """Wall time of one step: max(gpu, host) when the host work overlaps the GPU's, else gpu + host. `eager_s`
        (eager_host_s) is the launch work of a step run without CUDA graphs: the same thread schedules the step and
        then launches its kernels, ahead of their GPU work, so with overlap the step takes max(gpu, host + eager_s),
        without it host + max(gpu, eager_s); where that cost adds to the GPU's (eager_serial, 15.) host + gpu +
        eager_s. The host's work holds its tokens' (host_s, 17.)."""
        host = self.host_s(batch)
        if self.eager_serial:  # each kernel waits on its launch (15.)
            return host + gpu_s + eager_s
        return max(gpu_s, host + eager_s) if self.overlap else host + max(gpu_s, eager_s)

    def kernel_ceilings(self, hardware_name: str) -> dict[str, float]:
        """Ceilings this engine's kernels set on `hardware_name` (empty where they were not measured there)."""
        return dict(self.kernels.get(hardware_name, {}))

    def op_kernels_on(self, hardware_name: str) -> tuple[tuple[str, int], ...]:
        """The op kernel counts that replace the fusion table's where this engine's fused MoE law is measured or
        derived on `hardware_name` (that law times the kernels the table would otherwise count twice), or its own
        per-kernel time is (the counts are its kernels: llama.cpp's unfused residual adds, 16.); () elsewhere."""
        measured = self.kernels.get(hardware_name, {})
        if "grouped_gemm_latency" not in measured and "kernel_time" not in measured:
            return ()
        return tuple(sorted(self.op_kernels.items()))

    def attention_rates(self, hardware_name: str) -> dict[int, float]:
        """Prefill attention FLOP/s per head dim of this engine's kernel on `hardware_name` (empty: unmeasured)."""
        return dict(self.attention_flops.get(hardware_name, {}))


IDEAL = EngineTiming(engine="ideal", version="", sources={"all": "no engine: the GPU work alone"})

# engines that fill and drain their pipeline every step (26.): the others keep their batches in flight
FILL_AND_DRAIN = ("llamacpp", "trtllm")


def pipeline_slots(engine: str, micro, pp: int):
    """Stage-times a pipelined step of `micro` micro-batches (an int or an array) takes on `pp` stages (26.): the
    fill and drain's micro + pp - 1 for an engine that drains its pipeline every step (FILL_AND_DRAIN), else the
    steady state's max(micro, pp); at pp 1 both are micro (an engine's passes one after another)."""
    if engine in FILL_AND_DRAIN:
        return micro + pp - 1
    if getattr(micro, "ndim", 0):
        from roofline.lazy import np

        return np.maximum(micro, pp)
    return max(micro, pp)

# the figures of one host thread's work (module docstring, 11.): divided by the host's speed
HOST_FIELDS = ("step_s", "per_seq_s", "api_request_s", "request_s", "server_step_s", "server_per_seq_s", "spec_step_s",
               "draft_pass_s", "draft_layer_s", "eager_step_s", "eager_layer_s", "eager_moe_layer_s", "kv_post_s",
               "kv_post_descriptor_s", "moe_jit_key_s", "kv_handshake_s", "kv_handshake_fixed_s",
               "kv_handshake_descriptor_s", "sampler_host_element_s", "token_s", "cache_save_s", "cache_save_byte_s",
               "server_graph_s", "mask_cell_s", "mask_copy_s", "api_output_s", "api_chunk_s")
HOST_SPEED_SOURCE = "16.63 ms: validate/results/engines/nvidia-h200-vllm-2026-11-28/tiny-conc1.json median_ttft_ms"

# the routed experts whose Python path mechanism 8's eager_moe_layer_s measured: vLLM's unquantized FusedMoE (bf16
# weights through the fused Triton kernel, UnquantizedFusedMoEMethod); a quantized MoE (mxfp4, fp8, int4 ...) runs
# another backend whose host path is not measured, so its layers pay the dense layer's launches only
EAGER_MOE_DTYPES = ("bf16", "fp16")


def eager_layers(model, workload) -> tuple[int, int]:
    """(decoder layers, layers whose routed experts take the measured MoE path) on one pipeline stage of
    `workload`: the counts EngineTiming.eager_host_s prices."""
    from roofline.accounting import moe_layer_count

    pp = workload.pp
    experts = workload.expert_weight_dtype or workload.weight_dtype
    moe = moe_layer_count(model) if experts in EAGER_MOE_DTYPES else 0
    return -(-model.num_layers // pp), -(-moe // pp)


def on_host(profile: EngineTiming, host_speed: float) -> EngineTiming:
    """`profile` on a host `host_speed` times as fast as the one its host figures were measured on (module
    docstring, 11.): every HOST_FIELDS figure divided by it; the profile itself at 1."""
    if host_speed == 1.0:
        return profile
    if not (host_speed > 0 and host_speed < float("inf")):
        raise SpecError(f"host_speed: {host_speed!r} must be a positive number (1: the profile's own host)")
    return replace(profile, **{f: getattr(profile, f) / host_speed for f in HOST_FIELDS})


def timing_on(engine: str, host_speed: float = 1.0) -> EngineTiming:
    """The time profile of `engine` (timing) on a host `host_speed` times as fast as the profile's own (on_host)."""
    return timing(engine) if host_speed == 1.0 else _timing_on(engine, host_speed)


@cache
def _timing_on(engine: str, host_speed: float) -> EngineTiming:
    return on_host(timing(engine), host_speed)


API_LOOP_WARN = 0.9  # the API server's loop busier than this: a new request's GIL wait is not timed (25.)


def api_server_load(engine: str, host_speed: float, tokens_per_s: float) -> dict[str, float] | None:
    """The API server's one loop at `tokens_per_s` streamed tokens a second (25.): its busy share tokens_per_s x
    (api_output_s + api_chunk_s) on a host `host_speed` times the profile's; None where the engine's profile has no
    such figures."""
    t = timing_on(engine, host_speed)
    per_token = t.api_output_s + t.api_chunk_s
    if not per_token:
        return None
    return {"load": tokens_per_s * per_token, "tokens_per_s": tokens_per_s, "per_token_s": per_token,
            "output_s": t.api_output_s, "chunk_s": t.api_chunk_s, "warn_at": API_LOOP_WARN}


@cache
def timing(engine: str) -> EngineTiming:
    """The time profile of `engine` from profiles/<engine>.json; IDEAL (no engine cost) when none is committed."""
    path = PROFILES / f"{engine}.json"
    if engine == "ideal" or not path.is_file():
        return IDEAL if engine == "ideal" else EngineTiming(engine=engine, version="unmeasured",
                                                            sources={"all": "no time profile measured"})
    try:
        d = json.loads(path.read_text())
        profile = EngineTiming(
            engine=engine, version=d["version"], step_s=float(d["step_s"]), per_seq_s=float(d["per_seq_s"]),
            overlap=bool(d["overlap"]), capture_sizes=tuple(sorted(int(s) for s in d["capture_sizes"])),
            prefill_capture_tokens=int(d.get("prefill_capture_tokens", 0)),
            api_request_s=float(d["api_request_s"]), request_s=float(d["request_s"]),
            server_step_s=float(d.get("server_step_s", d["step_s"])),
            server_per_seq_s=float(d.get("server_per_seq_s", d["per_seq_s"])),
            spec_step_s=float(d.get("spec_step_s", 0.0)), draft_pass_s=float(d.get("draft_pass_s", 0.0)),
            draft_layer_s=float(d.get("draft_layer_s", 0.0)),
            eager_step_s=float(d.get("eager_step_s", 0.0)), eager_layer_s=float(d.get("eager_layer_s", 0.0)),
            eager_moe_layer_s=float(d.get("eager_moe_layer_s", 0.0)),
            kernels={g: {k: float(v) for k, v in ks.items() if _kernel_key(k)} for g, ks in d["kernels"].items()},
            attention_flops={g: {int(h): float(v) for h, v in r.items()} for g, r in d.get("attention_flops",
                                                                                          {}).items()},
            sources=dict(d["sources"]), op_kernels={str(k): int(v) for k, v in d.get("op_kernels", {}).items()},
            sampler={g: (float(v["latency_s"]), float(v["elements_per_s"])) for g, v in d.get("sampler", {}).items()},
            activation_bytes=int(d.get("activation_bytes", 0)),
            kv_transfer_s=float(d.get("kv_transfer_s", 0.0)), kv_descriptor_s=float(d.get("kv_descriptor_s", 0.0)),
            kv_post_s=float(d.get("kv_post_s", 0.0)), kv_post_descriptor_s=float(d.get("kv_post_descriptor_s", 0.0)),
            moe_jit_key_s=float(d.get("moe_jit_key_s", 0.0)), kv_handshake_s=float(d.get("kv_handshake_s", 0.0)),
            kv_handshake_fixed_s=float(d.get("kv_handshake_fixed_s", 0.0)),
            kv_handshake_descriptor_s=float(d.get("kv_handshake_descriptor_s", 0.0)),
            graph_ops=tuple(str(x) for x in d.get("graph_ops", ())), eager_serial=bool(d.get("eager_serial", False)),
            sampler_host_element_s=float(d.get("sampler_host_element_s", 0.0)), token_s=float(d.get("token_s", 0.0)),
            cache_save_s=float(d.get("cache_save_s", 0.0)), cache_save_byte_s=float(d.get("cache_save_byte_s", 0.0)),
            pass_tokens=int(d.get("pass_tokens", 0)), server_graph_s=float(d.get("server_graph_s", 0.0)),
            fa_span=bool(d.get("fa_span", False)), mask_cell_s=float(d.get("mask_cell_s", 0.0)),
            mask_copy_s=float(d.get("mask_copy_s", 0.0)), api_output_s=float(d.get("api_output_s", 0.0)),
            api_chunk_s=float(d.get("api_chunk_s", 0.0)))
    except (KeyError, TypeError, ValueError, AttributeError, json.JSONDecodeError) as exc:
        raise SpecError(f"engine profile {path.name}: {exc}") from None
    return _with_derived(profile, PROFILES / f"{engine}-derived.json")


def _with_derived(profile: EngineTiming, path: Path) -> EngineTiming:
    """`profile` plus the derived kernels of `path` for every GPU the measured profile has none for (a measured
    GPU keeps its own figures, every one of them)."""
    if not path.is_file():
        return profile
    try:
        d = json.loads(path.read_text())
        kernels = {g: {k: float(v) for k, v in ks.items() if _kernel_key(k)} for g, ks in d["kernels"].items()}
        rates = {g: {int(h): float(v) for h, v in r.items()} for g, r in d.get("attention_flops", {}).items()}
        sources = {f"derived:{g}": str(src) for g, src in d["sources"].items()}
    except (KeyError, TypeError, ValueError, AttributeError, json.JSONDecodeError) as exc:
        raise SpecError(f"engine profile {path.name}: {exc}") from None
    measured = set(profile.kernels) | set(profile.attention_flops)
    return replace(profile, kernels={**{g: k for g, k in kernels.items() if g not in measured}, **profile.kernels},
                   attention_flops={**{g: r for g, r in rates.items() if g not in measured},
                                    **profile.attention_flops},
                   sources={**profile.sources, **{k: v for k, v in sources.items()
                                                  if k.split(":", 1)[1] not in measured}})


def engine_options(engine: str, hardware):
    """RooflineOptions carrying `engine`'s kernels measured on `hardware` (None: the device's own laws stand)."""
    t = timing(engine)
    kernels = t.kernel_ceilings(hardware.name)
    rates = t.attention_rates(hardware.name)
    if not kernels and not rates:
        return None
    from roofline.costmodel.device import RooflineOptions
    from roofline.costmodel.fusion import EXPERT_CALLS

    if kernels.get("grouped_gemm_latency"):  # one fused call's alpha over the grouped calls the graph charges
        kernels["grouped_gemm_latency"] /= EXPERT_CALLS

    # a burst-measured prefill rate takes the clock ratio like every burst figure (Roofline.steady_state): the
    # device's sustained figure for that head dim is the generic kernel's, so it steps aside
    extra = [(f"attn_flops:{h}", r) for h, r in rates.items()] + [(f"sustained_attn:{h}", None) for h in rates]
    return RooflineOptions(kernels=tuple(sorted(kernels.items())) + tuple(extra))
