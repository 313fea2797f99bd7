"""zack: the persistent split-K heterogeneous-head decode kernel against its torch reference under the
interpreter, its chunking rule, its task lists against roofline's costs and makespan, its bytes against
roofline's ZACK cache and attention ops, its sm_90 shared memory, and the prediction (roofline time x the
imbalance of the kernel's own task list)."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run on the CPU

import random  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from roofline.costmodel.attention import SPLIT_TOKENS  # noqa: E402
from roofline.methods import build_cache  # noqa: E402
from roofline.methods.zack import POLICIES, Zack, assign, makespan, task_imbalance  # noqa: E402
from roofline.units import B, L  # noqa: E402
from validate.common.sm90 import H100_SHARED_BYTES, shared_bytes  # noqa: E402
from validate.common.testing import relative_rms  # noqa: E402
from validate.model.families import zack as predicted  # noqa: E402
from validate.model.hardware import load_hardware  # noqa: E402
from validate.model.predict import decode_model, find_op  # noqa: E402
from validate.ops.zack import cases as fam  # noqa: E402
from validate.ops.zack import kernel, reference  # noqa: E402

# (batch, query heads, KV heads, context, head_dim, d_qk per KV head, d_v per KV head, programs, policy, chunk):
# non-power-of-two dims (48, 80: padded classes 64, 128), GQA groups 2, 4 and 1, fewer programs than
# tasks (several tasks per program) and more (idle programs), non-power-of-two contexts, chunks of whole
# 16-token tiles and not (the last chunk shorter), one chunk per head (77 < 100)
SHAPES = [
    (2, 6, 3, 37, 64, [16, 48, 64], [32, 16, 48], 4, "lpt", 16),
    (3, 8, 2, 100, 128, [80, 32], [128, 16], 3, "naive", 24),
    (1, 4, 4, 300, 64, [16, 32, 48, 64], [64, 48, 32, 16], 5, "lpt", 48),
    (2, 8, 2, 77, 128, [128, 48], [96, 112], 7, "naive", 100),
]


def inputs(batch, heads, kv_heads, context, qk, v):
    g = torch.Generator().manual_seed(1234 + context)
    group = heads // kv_heads
    return (torch.randn(batch, group * sum(qk), generator=g).to(torch.bfloat16),
            torch.randn(batch, context * sum(qk), generator=g).to(torch.bfloat16),
            torch.randn(batch, context * sum(v), generator=g).to(torch.bfloat16))


@pytest.mark.parametrize(("batch", "heads", "kv_heads", "context", "dim", "qk", "v", "programs", "policy", "chunk"),
                         SHAPES)
def test_kernel_matches_reference(batch, heads, kv_heads, context, dim, qk, v, programs, policy, chunk,
                                  capsys) -> None:
    q, k, vv = inputs(batch, heads, kv_heads, context, qk, v)
    group, scale = heads // kv_heads, dim ** -0.5
    offsets, tasks = kernel.schedule(qk, v, group, batch, context, chunk, programs, policy)
    want = reference.reference(q, k, vv, qk, v, context, scale)
    errors = []
    for dtype in (torch.float32, torch.bfloat16):  # fp32: no output rounding; bf16 as on the GPU
        out = torch.full((batch, group * sum(v)), float("nan"), dtype=dtype)
        kernel.decode(q, k, vv, qk, v, context, chunk, offsets, tasks, scale, out, block_n=16)
        assert torch.isfinite(out).all(), "unwritten output elements"
        errors.append(relative_rms(out, want))
    with capsys.disabled():
        print(f"\n  B={batch} H={heads} Hkv={kv_heads} L={context} d_qk={qk} d_v={v} P={programs} {policy} C={chunk}: "
              f"fp32 out {errors[0]:.1e}, bf16 out {errors[1]:.1e}")
    assert errors[0] < 1e-5
    assert errors[1] < 1e-2  # the interpreter truncates fp32 -> bf16 where the GPU rounds to nearest


def test_reference_is_softmax_attention_per_head() -> None:
    # two KV heads of 16 and 32 dims, one query each, one token each: the output is that token's value
    qk, v = [16, 32], [32, 16]
    q, k, vv = inputs(1, 2, 2, 1, qk, v)
    torch.testing.assert_close(reference.reference(q, k, vv, qk, v, 1, 1.0), vv.float())


@pytest.mark.parametrize("policy", POLICIES)
def test_task_lists_are_roofline_makespan(policy: str) -> None:
    rng = random.Random(7)
    for _ in range(50):
        costs = [rng.choice([65, 97, 161, 257]) * 4 for _ in range(rng.randint(1, 300))]
        programs = rng.randint(1, 140)
        lists = assign(costs, programs, policy)
        assert sorted(t for tasks in lists for t in tasks) == list(range(len(costs)))
        assert max(sum(costs[t] for t in tasks) for tasks in lists) == makespan(costs, programs, policy)
        if policy == "lpt":
            assert all(costs[a] >= costs[b] for tasks in lists for a, b in zip(tasks, tasks[1:], strict=False))
    offsets, tasks = kernel.csr([[2, 0], [], [1]])
    assert (offsets, tasks) == ([0, 2, 2, 3], [2, 0, 1])


def test_task_costs_are_roofline_costs_per_token() -> None:
    model = decode_model("zack-test", 32, 8, 128)
    per_kv = Zack(qk_dims=fam.DIMS, v_dims=fam.DIMS).kv_task_costs(model)  # g x (d_qk + d_v + 1) per token
    assert per_kv[:2] == [4 * 65, 4 * 257]
    # 300 tokens in chunks of 128: 128, 128, 44 tokens, chunk fastest within (sequence, KV head)
    got = predicted.task_costs(fam.DIMS, fam.DIMS, 4, 3, 300, 128)
    assert got == [c * n for c in per_kv for n in (128, 128, 44)] * 3


@pytest.mark.parametrize(("batch", "context", "programs", "want"), [
    (1, 131072, 264, 2048),  # 8 (b, h): 4 x 264 / 8 = 132 chunks, capped at MAX_SPLITS = 64
    (1, 4096, 264, 512),  # capped at L / MIN_CHUNK_TOKENS = 8 chunks
    (8, 131072, 264, 7808),  # ceil(1056 / 64) = 17 chunks: ceil(131072 / 17) = 7711 -> 61 tiles of 128
    (32, 4096, 264, 896),  # 5 chunks of 820 -> 896 tokens: 896 x 4 + 512
    (256, 4096, 264, 4096),  # 2048 (b, h) tasks already: one chunk
    (1, 300, 264, 384),  # shorter than a chunk: one
])
def test_chunk_rule(batch, context, programs, want) -> None:
    chunk = predicted.chunk_tokens(batch, 8, context, programs)
    assert chunk == want and chunk % predicted.BLOCK_N == 0
    chunks = -(-context // chunk)
    assert chunks <= predicted.MAX_SPLITS and (chunks == 1 or chunk >= predicted.MIN_CHUNK_TOKENS)


@pytest.mark.parametrize(("batch", "context"), [(1, 37), (3, 4096), (32, 131072)])
@pytest.mark.parametrize(("heads", "kv_heads", "dim", "qk", "v"), [
    (32, 8, 128, fam.DIMS, fam.DIMS), (6, 3, 64, [16, 48, 64], [32, 16, 48]), (8, 2, 128, [80, 32], [128, 16])])
def test_bytes_are_roofline_cache_and_attention_op(batch, context, heads, kv_heads, dim, qk, v) -> None:
    model = decode_model("zack-test", heads, kv_heads, dim)
    zack = Zack(qk_dims=qk, v_dims=v)
    # roofline's decode attention is split-K: fp32 partials per split of SPLIT_TOKENS, merged by
    # "attention_reduce", which writes the output; the kernel's layout at that many chunks is the same bytes
    splits = max(1, -(-context // SPLIT_TOKENS))
    sizes = fam.layout_bytes(batch, context, qk, v, heads // kv_heads, splits)
    (layer,) = build_cache(zack, model).layers
    resident = {t.name: int(t.resident["data"].subs(L, context)) for t in layer.tensors}
    assert {"k": sizes["k"], "v": sizes["v"]} == {"k": batch * resident["K"], "v": batch * resident["V"]}
    assert sum(int(t.resident_bytes.subs(L, context)) for t in layer.tensors) * batch == sizes["k"] + sizes["v"]
    at = {B: batch, L: context}
    _, attention = find_op(model, zack, "attention")
    _, reduce = find_op(model, zack, "attention_reduce")
    assert int(attention.traffic["kv_read"].subs(at)) == sizes["k"] + sizes["v"]
    assert int(attention.traffic["act_read"].subs(at)) == sizes["q"]
    assert int(attention.traffic["act_write"].subs(at)) == sizes["partials"]
    assert int(reduce.traffic["act_read"].subs(at)) == sizes["partials"]
    assert int(reduce.traffic["act_write"].subs(at)) == sizes["out"]


def test_bench_bytes_within_chunking_difference() -> None:
    # the kernel's S chunks vs roofline's ceil(L / SPLIT_TOKENS) splits: only the partials differ, by at most
    # 1.2% of the bytes over the bench grid on an H200 (132 SMs)
    programs, group = 132 * fam.PROGRAMS_PER_SM, fam.HEADS // fam.KV_HEADS
    worst = 0.0
    for batch in fam.BATCHES:
        for context in fam.CONTEXTS:
            chunks = -(-context // predicted.chunk_tokens(batch, fam.KV_HEADS, context, programs))
            ours, roof = (fam.layout_bytes(batch, context, fam.DIMS, fam.DIMS, group, s)
                          for s in (chunks, max(1, -(-context // SPLIT_TOKENS))))
            moved = [sum(x.values()) + x["partials"] for x in (ours, roof)]  # partials written and read
            worst = max(worst, abs(moved[0] - moved[1]) / moved[1])
    assert worst < 0.0121


def test_allocated_tensors_are_the_layout() -> None:
    batch, heads, kv_heads, context, _, qk, v, _, _, chunk = SHAPES[0]
    group, chunks = heads // kv_heads, -(-context // chunk)
    out = torch.empty(batch, group * sum(v), dtype=torch.bfloat16)
    tensors = (*inputs(batch, heads, kv_heads, context, qk, v), out)
    sizes = fam.layout_bytes(batch, context, qk, v, group, chunks)
    assert [x.numel() * x.element_size() for x in tensors] == [sizes["q"], sizes["k"], sizes["v"], sizes["out"]]
    partials = kernel.partials(batch, group, v, chunks, "cpu")
    assert sum(x.numel() * x.element_size() for x in partials) == sizes["partials"]


def test_head_table_and_classes() -> None:
    assert kernel.head_table([16, 48, 128], [32, 80, 16]) == [
        [16, 48, 128], [32, 80, 16], [0, 16, 64], [0, 32, 112], [16, 64, 128], [32, 128, 16]]
    with pytest.raises(ValueError, match="multiple of 16"):
        kernel.dim_class(40)


def test_shared_memory_fits_h100() -> None:
    # the persistent grid needs its PROGRAMS_PER_SM programs co-resident on an SM (1 KiB reserved per block)
    mixed = [16, 32, 48, 64, 80, 96, 112, 128]
    results = shared_bytes([*fam.sm90_specs(), *fam.sm90_specs(mixed, mixed[::-1])])
    for r in results:
        assert 0 < r["shared"] and fam.PROGRAMS_PER_SM * (r["shared"] + 1024) <= H100_SHARED_BYTES + 1024, r


def test_grid_and_prediction() -> None:
    family = fam.ZackAttention()
    full = family.cases(quick=False)
    assert len(full) == 18 and all(c.params["qk_dims"] == [32, 128] * 4 for c in full)
    assert len(family.cases(quick=True)) < len(full)
    hw = load_hardware("H100-SXM").model_copy(update={"measured": None})
    by_name = {c.name: c for c in full}
    programs = 132 * fam.PROGRAMS_PER_SM
    for policy in POLICIES:
        case = by_name[f"{policy}_b32_l131072"]
        pred = family.predict(case, hw)
        chunk = predicted.chunk_tokens(32, 8, 131072, programs)
        imbalance = task_imbalance(predicted.task_costs(fam.DIMS, fam.DIMS, 4, 32, 131072, chunk), programs, policy)
        assert pred["imbalance"] == imbalance and pred["programs"] == programs and pred["chunk_tokens"] == chunk
        assert pred["bound"] == "memory" and pred["balanced_time_s"] == pytest.approx(pred["bytes"] / 3.35e12)
        assert pred["time_s"] == pytest.approx(pred["memory_s"] * imbalance)
    lpt, naive = (family.predict(by_name[f"{s}_b32_l131072"], hw)["imbalance"] for s in ("lpt", "naive"))
    assert 1 <= lpt < naive
