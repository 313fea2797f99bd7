"""On the GPU machine, before any engine starts: the carried sgl_kernel loads its sm_90 library and its FlashAttention-3
(flash_ops, pruned to head dims 64 and 128 in bf16) computes decode attention over a KV cache as SGLang's FA3 backend
calls it (page size 1: a page table of token slots), checked against torch's SDPA.

Usage: python3 sglang_smoke.py   -> one line per case, then "FA3_OK" or "FA3_FAIL" (exit 1)
"""
import sys

import torch


def reference(q, k, v, lens):
    """softmax(q k^T / sqrt(d)) v per sequence over its first lens[b] cached tokens, KV heads repeated for GQA."""
    outs = []
    group = q.shape[2] // k.shape[2]
    for b in range(q.shape[0]):
        kb = k[b, : lens[b]].repeat_interleave(group, dim=1).transpose(0, 1).float()  # [H, L, D]
        vb = v[b, : lens[b]].repeat_interleave(group, dim=1).transpose(0, 1).float()
        qb = q[b].transpose(0, 1).float()  # [H, 1, D]
        outs.append(torch.nn.functional.scaled_dot_product_attention(qb, kb, vb).transpose(0, 1))
    return torch.stack(outs)


def case(heads: int, kv_heads: int, dim: int, lens: list[int]) -> float:
    """Relative RMS error of FA3's paged decode (page size 1) against the reference."""
    from sgl_kernel.flash_attn import flash_attn_with_kvcache

    torch.manual_seed(0)
    b, cap = len(lens), max(lens)
    q = torch.randn(b, 1, heads, dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, cap, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, cap, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
    # the pool: every token of every sequence in one slot of shape [1, kv_heads, dim], shuffled
    slots = torch.randperm(b * cap, device="cuda", dtype=torch.int32).view(b, cap)
    k_pool = torch.empty(b * cap, 1, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
    v_pool = torch.empty_like(k_pool)
    k_pool[slots.flatten().long(), 0] = k.flatten(0, 1)
    v_pool[slots.flatten().long(), 0] = v.flatten(0, 1)
    seqlens = torch.tensor(lens, device="cuda", dtype=torch.int32)
    out = flash_attn_with_kvcache(q, k_pool, v_pool, cache_seqlens=seqlens, page_table=slots, causal=True)
    ref = reference(q, k, v, lens)
    return ((out.float() - ref).norm() / ref.norm()).item()


def main() -> None:
    """Run the cases of both kept head dims; exit 1 on any error or an error above 2 %."""
    import sgl_kernel

    print("sgl_kernel", sgl_kernel.__version__, "ops", sgl_kernel.common_ops.__file__, flush=True)
    ok = True
    for heads, kv_heads, dim, lens in [(32, 8, 128, [300, 1024, 17]), (4, 4, 64, [128, 77])]:
        try:
            err = case(heads, kv_heads, dim, lens)
            ok &= err < 2e-2
            print(f"FA3 decode h{heads}/kv{kv_heads} d{dim} lens {lens}: rel rms {err:.2e}", flush=True)
        except Exception as e:  # noqa: BLE001 - any failure sends the engine to another attention backend
            ok = False
            print(f"FA3 decode d{dim}: {type(e).__name__}: {str(e)[:300]}", flush=True)
    print("FA3_OK" if ok else "FA3_FAIL", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
