"""Expert parallelism (Workload.ep, `plan --ep`) and routed experts stored at their own dtype
(Workload.expert_weight_dtype, `plan --expert-weight-dtype`), against counts made by hand from published configs.

Mixtral-8x7B (models/Mixtral-8x7B.yaml, https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json):
d = 4096, 32 layers, 32 query / 8 KV heads of 128, expert width 14336 (gated: 3 matrices), 8 experts, top-2,
vocabulary 32000, untied embeddings, two RMSNorms per layer and a final one.
gpt-oss-20b (models/gpt-oss-20b.yaml, tests/data/hf/gpt-oss-20b/config.json): d = 2880, 24 layers, 32 experts of
width 2880, top-4; the checkpoint stores the experts in MXFP4 (quantization_config) and the rest in bf16.
"""

import json

import pytest
from cli_run import run
from pydantic import ValidationError

from roofline.catalogue import load_hardware, load_model
from roofline.costmodel import build_graph, roofline_for
from roofline.methods import parse_method
from roofline.planner.memory import weights_per_gpu
from roofline.specs import Workload
from roofline.units import B

GIB = 2**30

# Mixtral-8x7B by hand from its config (parameters)
D, LAYERS, VOCAB, WIDTH, EXPERTS, TOP_K = 4096, 32, 32000, 14336, 8, 2
ATTENTION = D * 32 * 128 + 2 * D * 8 * 128 + 32 * 128 * D  # q, k, v, o
ROUTER = D * EXPERTS
ONE_EXPERT = 3 * D * WIDTH  # gate, up, down
NORMS = 2 * D
ROUTED = LAYERS * EXPERTS * ONE_EXPERT  # 45,097,156,608
REST = LAYERS * (ATTENTION + ROUTER + NORMS) + D + 2 * VOCAB * D  # final norm, embedding, LM head




def test_hand_count_matches_the_published_total() -> None:
    # Mistral's "46.7B parameters" (https://mistral.ai/news/mixtral-of-experts): the hand count above is that total
    assert REST + ROUTED == 46_702_792_704


@pytest.mark.parametrize(("ep", "expected"), [(1, 93_405_585_408), (2, 48_308_428_800), (4, 25_759_850_496)])
def test_mixtral_weights_per_gpu_split_over_ep(ep: int, expected: int) -> None:
    # bf16: 2 x (everything but the routed experts, whole on every GPU + the routed experts / ep)
    assert 2 * (REST + ROUTED // ep) == expected
    w = Workload(context_tokens=4096, ep=ep)
    assert weights_per_gpu(load_model("Mixtral-8x7B"), w) == expected


def test_ep_with_tp_splits_both_the_dense_part_and_the_experts() -> None:
    # tp 2 x ep 2: matrices over tp, the routed experts over tp x ep, norms whole
    matrices = LAYERS * (ATTENTION + ROUTER) + 2 * VOCAB * D
    norms = LAYERS * NORMS + D
    expected = 2 * (matrices / 2 + ROUTED / 4 + norms)
    w = Workload(context_tokens=4096, tp=2, ep=2)
    assert weights_per_gpu(load_model("Mixtral-8x7B"), w) == pytest.approx(expected, rel=1e-12)
    assert w.gpus == 4


def test_decode_all_to_all_bytes_and_time() -> None:
    model = load_model("Mixtral-8x7B")
    graph = build_graph(model, parse_method("bf16"), "decode", ep=4)
    ops = graph.by_name()
    assert [op.count for op in ops["moe_dispatch"] + ops["moe_combine"]] == [LAYERS, LAYERS]
    # batch 16: 16 tokens x top-2 x d x 2 bytes, the 3/4 bound for the 3 other replicas
    message = 16 * TOP_K * D * 2 * 3 // 4
    assert message == 196_608
    for op in ops["moe_dispatch"] + ops["moe_combine"]:
        assert op.comm_bytes.subs(B, 16) == message and op.collective == "alltoall" and op.ranks == 4
    # the H100-SXM spec's NVLink: 450 GB/s per direction, 1 us per hop; 3 peers
    h100 = load_hardware("H100-SXM")
    link = h100.scale_up
    seconds = roofline_for(h100).op_times(ops["moe_dispatch"][0]).total.subs(B, 16)
    # plus, as every kernel of a CUDA graph, the measured per-kernel time of a graph chain (1.024 us on H100)
    per_kernel = h100.measured.kernel_overhead_s
    assert float(seconds) == pytest.approx(message / link.bytes_per_s + 3 * link.latency_s + per_kernel, rel=1e-12)
    assert "moe_dispatch" not in build_graph(model, parse_method("bf16"), "decode").by_name()


def test_local_experts_touched_by_every_replica() -> None:
    # ep 4, batch 1: each GPU holds 2 of the 8 experts; the 4 replicas' 4 tokens each pick 2 of 8, so a local
    # expert stays idle with probability (1 - 2/8)^4: 2 (1 - 81/256) experts of 3 d I bf16 weights are read
    model = load_model("Mixtral-8x7B")
    experts = build_graph(model, parse_method("bf16"), "decode", ep=4).by_name()["experts"][0]
    assert experts.traffic["weights"].subs(B, 1) == 2 * (256 - 81) * ONE_EXPERT * 2 // 256 == 481_689_600
    # FLOPs per GPU stay batch x top-k rows of the whole expert (the group's 4 B k rows over 4 GPUs)
    assert experts.matmul_flops.subs(B, 1) == 2 * TOP_K * ONE_EXPERT


def test_bad_ep_is_one_line(capsys) -> None:
    cases = [(["--ep", "2"], "ep: 2 needs a mixture-of-experts model; Llama-3.1-8B"),
             (["--model", "Mixtral-8x7B", "--ep", "3"], "ep: 3 does not divide the 8 routed experts"),
             (["--model", "Mixtral-8x7B", "--ep", "0"], "--ep: 0 must be positive"),
             (["--model", "Mixtral-8x7B", "--ep", "8", "--tp", "2", "--hardware", "RTX-4090"],
              "ep: 8 replicas (16 GPUs with tp) exceed RTX-4090's scale-up domain"),
             (["--model", "Mixtral-8x7B", "--ep", "1048576", "--tp", "2"], "ep: tp x pp x ep = 2,097,152 GPUs"),
             (["--model", "gpt-oss-20b", "--expert-weight-dtype", "fp5"], "--expert-weight-dtype")]
    for argv, needle in cases:
        code, _, err = run(capsys, "plan", "--method", "bf16", *argv)
        assert code == 2, argv
        assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_workload_fields() -> None:
    with pytest.raises(ValidationError, match="ep"):
        Workload(context_tokens=4096, ep=0)
    w = Workload(context_tokens=4096, weight_dtype="fp8")
    assert (w.ep, w.expert_dtype, w.gpus) == (1, "fp8", 1)
    assert Workload(context_tokens=4096, expert_weight_dtype="mxfp4").expert_dtype == "mxfp4"


def test_plan_ep4_reports_the_all_to_all(capsys) -> None:
    code, out, _ = run(capsys, "plan", "--model", "Mixtral-8x7B", "--ep", "4", "--tp", "1", "--method", "bf16",
                       "--batch", "16", "--context", "4096", "--generated", "256", "--json")
    assert code == 0
    result = json.loads(out)
    row = result["results"][0]
    assert result["gpus"] == 4 and result["workload"]["ep"] == 4
    assert row["memory"]["weights_bytes"] == 25_759_850_496
    # tp 1: the only communication is 32 layers x (dispatch + combine) of 196,608 bytes on NVLink (450 GB/s, 1 us)
    assert row["decode"]["comm_s"] == pytest.approx(2 * LAYERS * (196_608 / 450e9 + 3e-6), rel=1e-9)
    code, out, _ = run(capsys, "plan", "--model", "Mixtral-8x7B", "--ep", "4", "--method", "bf16", "--batch", "16",
                       "--context", "4096", "--generated", "256")
    assert code == 0 and "ep 4: batch per replica" in out and "communication 220.0 us" in out


def test_gpt_oss_20b_as_shipped() -> None:
    # routed experts: 24 layers x 32 x 3 x 2880 x 2880 at 17/32 B (MXFP4: 32 fp4 values + one e8m0 scale byte);
    # the rest (attention with its biases and sinks, router with its bias, the experts' biases, norms, embedding,
    # LM head) in bf16 (transformers GptOssAttention: q/k/v/o biases; GptOssExperts: gate_up_proj_bias 2 x 2880,
    # down_proj_bias 2880 per expert; GptOssTopKRouter: bias of 32)
    d, layers = 2880, 24
    routed = layers * 32 * 3 * d * d
    attention = layers * (d * 4096 + 4096 + 2 * (d * 512 + 512) + 4096 * d + d + 64)  # q, k, v, o with biases; sinks
    experts_bias = layers * 32 * 3 * d
    rest = attention + experts_bias + layers * (d * 32 + 32 + 2 * d) + d + 2 * 201_088 * d  # router; norms; ...
    expected = routed * 17 / 32 + 2 * rest
    model = load_model("gpt-oss-20b")
    got = weights_per_gpu(model, Workload(context_tokens=4096, expert_weight_dtype="mxfp4"))
    assert got == pytest.approx(expected, rel=1e-4)
    # OpenAI's model card (arXiv 2508.10925, Table 1) gives a 12.8 GiB checkpoint
    assert got / GIB == pytest.approx(12.8, abs=0.05)
    assert weights_per_gpu(model, Workload(context_tokens=4096)) / GIB == pytest.approx(38.96, abs=0.01)


def test_gpt_oss_expert_dtype_in_the_graph() -> None:
    model = load_model("gpt-oss-20b")
    ops = build_graph(model, parse_method("bf16"), "decode", expert_weight_dtype="mxfp4").by_name()
    # batch 1 touches its 4 experts: 4 x 3 x 2880^2 x 17/32 bytes; the router stays bf16 (2880 x 32 x 2)
    assert ops["experts"][0].traffic["weights"].subs(B, 1) == 4 * 3 * 2880**2 * 17 // 32
    assert ops["router"][0].traffic["weights"] == 2880 * 32 * 2


def test_prefill_dispatch_carries_every_prompt_token() -> None:
    from roofline.units import P

    graph = build_graph(load_model("Mixtral-8x7B"), parse_method("bf16"), "prefill", ep=2)
    dispatch = graph.by_name()["moe_dispatch"][0]
    # B P tokens x top-2 x d x 2 bytes, half of them bound for the other replica
    assert dispatch.comm_bytes.subs({B: 3, P: 1000}) == 3 * 1000 * TOP_K * D * 2 // 2


def test_shared_experts_keep_the_weight_dtype() -> None:
    # DeepSeek-V3 (models/DeepSeek-V3.yaml, its config.json): d = 7168, one shared expert and 256 routed experts of
    # width 2048, top-8; routed experts in fp8, everything else (the shared expert included) in bf16
    ops = build_graph(load_model("DeepSeek-V3"), parse_method("bf16"), "decode", weight_dtype="bf16",
                      expert_weight_dtype="fp8").by_name()
    assert ops["shared_expert_up"][0].traffic["weights"] == 7168 * 2 * 2048 * 2
    # batch 1 touches 8 experts: 8 x 3 x 7168 x 2048 x 1 byte
    assert ops["experts"][0].traffic["weights"].subs(B, 1) == 8 * 3 * 7168 * 2048


def test_capacity_pool_grows_by_the_experts_saved(capsys) -> None:
    # vLLM's budget subtracts the weights one for one: storing gpt-oss-120b's routed experts
    # (36 layers x 128 x 3 x 2880^2) in MXFP4 instead of bf16 frees (2 - 17/32) bytes each
    routed = 36 * 128 * 3 * 2880**2
    pools = []
    for extra in ([], ["--expert-weight-dtype", "mxfp4"]):
        code, out, _ = run(capsys, "capacity", "--model", "gpt-oss-120b", "--engine", "vllm", "--hardware", "H100-SXM",
                           "--json", *extra)
        assert code == 0
        data = json.loads(out)  # a pool that does not fit is 0 with its shortfall, never negative
        pools.append(data["kv_pool_bytes"] - data.get("kv_pool_shortfall_bytes", 0))
    assert pools[1] - pools[0] == pytest.approx(routed * 47 / 32, rel=1e-12)
    assert pools[0] < 0 < pools[1]  # bf16 experts do not fit one H100; as shipped they do
