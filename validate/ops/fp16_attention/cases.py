"""fp16_attention's grid (Llama-3.1-8B heads), how a case runs on the GPU (checked against torch SDPA), the
sm_90 compile specs, and the prediction (roofline.validation: the roofline "attention" op)."""

from __future__ import annotations

import triton

from roofline.validation.results_file import Case
from validate.common import flash_decode
from validate.common.flash_decode import BLOCK_N, MAX_SPLITS, decode_attention, decode_splits
from validate.common.testing import relative_rms
from validate.model.families import fp16_attention as predicted

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama-3.1-8B
BENCH_BATCHES = (1, 8, 32, 64)
BENCH_CONTEXTS = (4096, 16384, 65536, 131072)
QUICK = ((1, 4096), (8, 16384), (32, 65536), (1, 131072))


def sm90_specs() -> list[dict]:
    """validate.common.sm90 compile specs of both kernels at the bench configuration (Llama-3.1-8B heads)."""
    ints = ("context", "split_len", "num_splits", "stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kt",
            "stride_vb", "stride_vh", "stride_vt")
    split = {**{a: "*bf16" for a in ("q_ptr", "k_ptr", "v_ptr")}, **{a: "*fp32" for a in ("m_ptr", "l_ptr", "acc_ptr")},
             "sm_scale": "fp32", **{a: "i32" for a in ints}}
    group = HEADS // KV_HEADS
    return [
        {"module": flash_decode.__name__, "kernel": "split_kernel", "signature": split, "num_warps": 4, "num_stages": 2,
         "constexprs": {"KV_HEADS": KV_HEADS, "GROUP": group, "GROUP_PAD": max(16, triton.next_power_of_2(group)),
                        "HEAD_DIM": HEAD_DIM, "BLOCK_N": BLOCK_N, "UPCAST": False}},
        {"module": flash_decode.__name__, "kernel": "reduce_kernel", "num_warps": 4, "num_stages": 2,
         "signature": {"m_ptr": "*fp32", "l_ptr": "*fp32", "acc_ptr": "*fp32", "o_ptr": "*bf16",
                       "num_splits": "i32", "stride_ob": "i32", "stride_oh": "i32"},
         "constexprs": {"HEADS": HEADS, "HEAD_DIM": HEAD_DIM, "SPLITS_PAD": MAX_SPLITS}},
    ]


def _run(case: Case) -> dict:
    import torch
    import torch.nn.functional as F

    from validate.common.harness import eager_ms, graph_ms, input_sets

    p = case.params
    batch, context, heads, kv_heads, dim = p["batch"], p["context"], p["num_heads"], p["num_kv_heads"], p["head_dim"]
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    splits = decode_splits(batch * kv_heads, context, sms, p["block_n"])

    def make():
        q = torch.randn(batch, heads, dim, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(batch, kv_heads, context, dim, dtype=torch.bfloat16, device="cuda")
        return q, k, torch.randn_like(k), torch.empty_like(q)

    def kernel(q, k, v, out):
        return decode_attention(q, k, v, splits, p["block_n"], out=out)

    def sdpa(q, k, v, out):
        # GQA without repeating K, V: the group's query heads become the query positions of their KV head
        return F.scaled_dot_product_attention(q.view(batch, kv_heads, heads // kv_heads, dim), k, v)

    sets = input_sets(make, 2 * batch * kv_heads * context * dim * 2)
    error = relative_rms(kernel(*sets[0]), sdpa(*sets[0]).view_as(sets[0][0]))
    if error > 2e-2:
        raise AssertionError(f"kernel differs from torch SDPA: relative RMS {error:.3g}")
    return {"ms": graph_ms(kernel, sets), **predicted.work(case.params), "eager_ms": eager_ms(kernel, sets),
            "sdpa_ms": graph_ms(sdpa, sets), "num_splits": splits, "rotation": len(sets), "check_rel_rms": error}


class FP16Attention:
    name = "fp16_attention"

    def cases(self, quick: bool) -> list[Case]:
        grid = QUICK if quick else [(b, n) for b in BENCH_BATCHES for n in BENCH_CONTEXTS]
        return [Case(self.name, f"b{b}_l{n}", {"batch": b, "context": n, "num_heads": HEADS,
                                               "num_kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "dtype": "bf16",
                                               "block_n": BLOCK_N}) for b, n in grid]

    def run(self, case: Case) -> dict:
        return _run(case)

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)
