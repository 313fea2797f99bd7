// llama.cpp's host KQ mask on one KV stream, timed alone (timing mechanism 23's microbenchmark).
//
// The loop is llama_kv_cache::set_input_kq_mask's (src/llama-kv-cache.cpp at 0c1e570, set_input_kq_mask_impl with
// causal, no SWA, no M-RoPE, no ALiBi, F16 mask), copied with its cell store (src/llama-kv-cells.h, the engine's own
// header, included): for each token of a ubatch, the first of its sequence walks every cell of the view (empty?
// its sequence's? causal?) and records the cells near the ubatch's positions; a further token of the same sequence
// copies that row and revisits only the recorded cells. The ubatch stand-in holds what the loop reads (tokens'
// sequence ids and positions). Build: g++ -O2 -std=c++17 -I include -I ggml/include -I src kq_mask_bench.cpp
// (headers only). Output: one JSON line per case, the median of its repetitions in microseconds.
#include "llama-kv-cells.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <unordered_map>
#include <vector>

struct ubatch_t {
    uint32_t n_tokens;
    std::vector<llama_seq_id> seq;
    std::vector<llama_pos> pos;
};

// set_input_kq_mask_impl<T = ggml_fp16_t, causal = true, swa = false, is_2d = false, alibi = false>, one stream
static void kq_mask(const llama_kv_cells & cells, const ubatch_t & ub, int64_t n_kv, uint16_t * data) {
    const uint16_t mask_keep = 0x0000;  // llama_cast<ggml_fp16_t>(0.0f)
    const uint16_t mask_drop = 0xFC00;  // llama_cast<ggml_fp16_t>(-INFINITY)
    const uint32_t n_swa = 0;
    llama_pos seq_pos_min[LLAMA_MAX_SEQ];
    std::fill(seq_pos_min, seq_pos_min + LLAMA_MAX_SEQ, INT32_MAX);
    for (uint32_t i = 0; i < ub.n_tokens; ++i) {
        seq_pos_min[ub.seq[i]] = std::min(seq_pos_min[ub.seq[i]], ub.pos[i]);
    }
    std::unordered_map<llama_seq_id, uint32_t> seq_srct;
    std::unordered_map<llama_seq_id, std::vector<uint32_t>> seq_idxs;
    for (uint32_t i = 0; i < ub.n_tokens; ++i) {
        const llama_seq_id seq_id = ub.seq[i];
        llama_pos p0 = -1;
        const llama_pos p1 = ub.pos[i];
        const uint64_t idst = n_kv * i;
        bool prev = false;
        auto & idxs = seq_idxs[seq_id];
        if (seq_srct.find(seq_id) != seq_srct.end()) {
            const uint64_t idst_prev = n_kv * seq_srct[seq_id];
            std::copy(data + idst_prev, data + idst_prev + n_kv, data + idst);
            prev = true;
        } else {
            idxs.clear();
            idxs.reserve(ub.n_tokens + n_swa + 32);
            seq_srct[seq_id] = i;
        }
        for (uint32_t jj = 0; jj < n_kv; ++jj) {
            uint32_t j = jj;
            if (prev) {
                if (jj >= idxs.size()) {
                    break;
                }
                j = idxs[jj];
            }
            if (cells.is_empty(j)) {
                goto skip;
            }
            if (!cells.seq_has(j, seq_id)) {
                goto skip;
            }
            p0 = cells.pos_get(j);
            if (!prev) {
                if (p0 + (int32_t) (n_swa + 32) >= seq_pos_min[seq_id]) {
                    idxs.push_back(j);
                }
            }
            if (p0 > p1) {
                goto skip;
            }
            data[idst + j] = mask_keep;
            continue;
skip:
            data[idst + j] = mask_drop;
        }
    }
}

static uint32_t pad256(uint32_t n) { return std::max(256u, (n + 255) / 256 * 256); }

// one case: `seqs` sequences of `held` cells each already in the stream (cells placed sequence after sequence), then
// a ubatch of `rows` tokens of each of `in_ubatch` sequences (the last ones), their cells placed after
static void run_case(const char * kind, uint32_t seqs, uint32_t held, uint32_t in_ubatch, uint32_t rows, int reps) {
    const uint32_t used = seqs * held + in_ubatch * rows;
    const uint32_t n_kv = pad256(used);
    llama_kv_cells cells;
    cells.resize(n_kv);
    uint32_t c = 0;
    for (uint32_t s = 0; s < seqs; ++s) {
        for (uint32_t p = 0; p < held; ++p, ++c) {
            cells.pos_set(c, (llama_pos) p);
            cells.seq_add(c, (llama_seq_id) s);
        }
    }
    ubatch_t ub;
    ub.n_tokens = in_ubatch * rows;
    for (uint32_t k = 0; k < in_ubatch; ++k) {
        const uint32_t s = seqs - in_ubatch + k;
        for (uint32_t r = 0; r < rows; ++r, ++c) {
            cells.pos_set(c, (llama_pos) (held + r));
            cells.seq_add(c, (llama_seq_id) s);
            ub.seq.push_back((llama_seq_id) s);
            ub.pos.push_back((llama_pos) (held + r));
        }
    }
    std::vector<uint16_t> mask((size_t) n_kv * ub.n_tokens);
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto a = std::chrono::steady_clock::now();
        kq_mask(cells, ub, n_kv, mask.data());
        const auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    std::printf("{\"kind\": \"%s\", \"seqs\": %u, \"held\": %u, \"in_ubatch\": %u, \"rows\": %u, \"n_kv\": %u, "
                "\"us\": %.3f, \"mask\": %u}\n", kind, seqs, held, in_ubatch, rows, n_kv, t[t.size() / 2],
                (unsigned) mask[mask.size() / 2]);
}

int main() {
    // decode: every sequence of the stream has one token in the ubatch
    for (uint32_t b : {1u, 4u, 8u, 16u, 32u}) {
        for (uint32_t held : {512u, 2048u, 8192u}) {
            if (b * held <= 262144u) {
                run_case("decode", b, held, b, 1, 51);
            }
        }
    }
    // a prompt ubatch of 512 tokens of one sequence beside K cells of 4 others (its own none before it)
    for (uint32_t k : {0u, 4096u, 16384u, 36864u}) {
        run_case("prompt", 5, k / 4, 1, 512, 21);
    }
    return 0;
}
