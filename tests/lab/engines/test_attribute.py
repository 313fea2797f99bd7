"""validate/engines/attribute.py: a vLLM step's kernels mapped to the planner's ops, on small synthetic inputs whose
expected attribution is worked out by hand."""

import json

import pytest

from validate.engines.attribute import assign_gemms, attribute, main
from validate.engines.kernel_names import classify

FA3 = ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
       "CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, "
       "cute::tuple<cute::C<64>, cute::C<128>")
COMBINE = ("void cutlass::device_kernel<flash::FlashAttnFwdCombine<cute::tuple<cute::C<8>, cute::C<128> >, 5, 256, 1, "
           "false, true, cutlass::bfloat16_t, float, cutlass::arch::Sm90> >")
SPLITK_REDUCE = "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false>"
KV = "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"


@pytest.mark.parametrize(("name", "kind", "inferred"), [
    (FA3, "attention", False),
    (COMBINE, "attention_combine", False),
    ("void flash::prepare_varlen_num_blocks_kernel<16, false>(int, int)", "attention", False),
    (KV, "kv_write", False),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "gemm", False),
    (SPLITK_REDUCE, "gemm_splitk_reduce", False),
    ("fused_moe_kernel", "moe_experts", False),
    ("void vllm::moe::moe_align_block_size_kernel<long>(long const*)", "moe_experts", False),
    ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::"
     "BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>", "moe_sum", False),
    ("triton_red_fused__to_copy_embedding_rms_norm_0", "embedding", False),
    ("triton_red_fused_fused_add_rms_norm_2", "norm", False),
    ("triton_poi_fused_mul_silu_slice_1", "activation", False),
    ("triton_poi_fused_3", "rope", True),
    ("triton_red_fused_2", "qk_norm", True),
    ("_gumbel_sample_kernel", "sampler", False),
    ("_gather_block_tables_kernel", "engine_inputs", False),
    ("Memcpy DtoH (Device -> Pinned)", "copies", False),
])
def test_kernel_names_map_to_the_kind_their_source_names(name, kind, inferred):
    rule = classify(name)
    assert rule is not None and rule.kind == kind and rule.inferred == inferred


def test_a_kernel_no_rule_names_stays_unmapped():
    assert classify("my_custom_kernel_v2") is None


def _op(name, count, time_s, gemm=True):
    """A planner row as Roofline.evaluate gives it (only the fields attribute reads)."""
    return {"name": name, "count": count, "time_s": time_s, "matmul_flops": 1.0 if gemm else 0.0,
            "traffic": {"weights": 1.0 if gemm else 0.0}}


def test_a_steady_kernel_goes_to_a_per_layer_op_even_when_the_lm_head_is_nearer_per_call():
    # lm_head 70 us once a step, mlp_up 63 us x32: a kernel of 32 calls at 68 us cannot be the once-a-step lm_head
    ops = {r["name"]: r for r in (_op("lm_head", 1, 70e-6), _op("mlp_up", 32, 63e-6), _op("o_proj", 32, 14e-6))}
    kernels = {"k_up": {"s": 32 * 68e-6, "calls": 32.0}, "k_o": {"s": 32 * 15e-6, "calls": 32.0},
               "k_head": {"s": 90e-6, "calls": 1.0}}
    assert assign_gemms(kernels, ops) == {"k_up": "mlp_up", "k_o": "o_proj", "k_head": "lm_head"}


def test_steady_kernels_pair_with_ops_in_order_of_time_per_call():
    # both kernels run 48 times; the slower one per call is the op predicted slower per call, though each kernel's
    # time per call is nearer the other op's prediction (57 is nearer 58 than 71)
    ops = {r["name"]: r for r in (_op("qkv_proj", 48, 71e-6), _op("o_proj", 48, 58e-6))}
    kernels = {"big": {"s": 48 * 57e-6, "calls": 48.0}, "small": {"s": 48 * 43e-6, "calls": 48.0}}
    assert assign_gemms(kernels, ops) == {"big": "qkv_proj", "small": "o_proj"}


def test_a_split_k_reduce_is_shared_by_the_calls_of_the_split_k_gemms():
    rows = [_op("mlp_down", 32, 30e-6), _op("o_proj", 32, 10e-6), _op("attention", 32, 50e-6, gemm=False)]
    kernels = {"nvjet_a_splitK_TNT": {"s": 30 * 30e-6, "calls": 30.0},
               "nvjet_b_splitK_TNT": {"s": 10 * 10e-6, "calls": 10.0},
               SPLITK_REDUCE: {"s": 40e-6, "calls": 40.0}, FA3: {"s": 32 * 55e-6, "calls": 32.0}}
    res = {r["op"]: r for r in attribute(kernels, rows)["rows"]}
    # the reduce's 40 us: 30 of 40 splitK calls are mlp_down's, 10 of 40 o_proj's
    assert res["mlp_down"]["measured_s"] == pytest.approx(900e-6 + 30e-6)
    assert res["o_proj"]["measured_s"] == pytest.approx(100e-6 + 10e-6)
    assert res["attention"]["measured_s"] == pytest.approx(32 * 55e-6)
    assert res["attention"]["error"] == pytest.approx(50 / 55 - 1)


def test_norm_kernels_stand_for_the_norms_and_the_residual_adds_they_fuse():
    rows = [_op(n, c, t, gemm=False) for n, c, t in
            (("attn_norm", 2, 1e-6), ("mlp_norm", 2, 1e-6), ("attn_residual", 2, 0.5e-6), ("mlp_residual", 2, 0.5e-6))]
    kernels = {"triton_red_fused_fused_add_rms_norm_0": {"s": 6e-6, "calls": 2.0},
               "triton_red_fused_fused_add_rms_norm_2": {"s": 4e-6, "calls": 2.0}}
    res = attribute(kernels, rows)["rows"]
    assert [r["op"] for r in res] == ["norm"]
    assert res[0]["measured_s"] == pytest.approx(10e-6)
    assert res[0]["predicted_s"] == pytest.approx(6e-6)  # 2 x 1 + 2 x 1 + 2 x 0.5 + 2 x 0.5 us
    assert res[0]["predicted_calls"] == 4  # the residual adds launch nothing of their own


def test_unmapped_kernels_and_ops_without_kernels_are_reported():
    rows = [_op("rope", 32, 2e-6, gemm=False), _op("kv_update", 32, 1e-6, gemm=False)]
    kernels = {"mystery": {"s": 5e-6, "calls": 1.0}, KV: {"s": 96e-6, "calls": 32.0},
               "_gumbel_sample_kernel": {"s": 40e-6, "calls": 1.0}}
    res = attribute(kernels, rows)
    assert res["unmapped"] == [{"kernel": "mystery", "s": 5e-6, "calls": 1.0}]
    by_op = {r["op"]: r for r in res["rows"]}
    assert by_op["rope"]["measured_s"] == 0.0 and by_op["rope"]["error"] is None
    assert by_op["(sampler)"]["predicted_s"] == 0.0 and by_op["(sampler)"]["measured_s"] == 40e-6
    assert by_op["kv_update"]["error"] == pytest.approx(32 / 96 - 1)


@pytest.mark.parametrize(("content", "needle"), [
    (None, "cannot read"),
    ("{not json", "not JSON"),
    ('{"cases": []}', "'cases' must be a non-empty list"),
    ('{"cases": [{"P": 256, "kernels": {"k": {"s": 1.0}}}]}', "cases[0]"),
])
def test_a_bad_profile_is_one_line_and_exit_status_2(tmp_path, capsys, content, needle):
    path = tmp_path / "prof.json"
    if content is not None:
        path.write_text(content)
    assert main([str(path), "--model", "Llama-3.1-8B"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_an_unknown_model_or_case_is_one_line_and_exit_status_2(tmp_path, capsys):
    path = tmp_path / "prof.json"
    path.write_text(json.dumps({"cases": [{"P": 256, "wall_s": 0.02, "kernel_s": 0.01,
                                           "kernels": {"fused_moe_kernel": {"s": 0.01, "calls": 96}}}]}))
    assert main([str(path), "--model", "no-such-model"]) == 2
    assert main([str(path), "--model", "Llama-3.1-8B", "--case", "512"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("error: --model") and "--case 512" in err[1]


def test_a_prefill_case_reports_its_measured_kernels_whole(tmp_path, capsys):
    path = tmp_path / "prof.json"
    kernels = {FA3: {"s": 0.004, "calls": 32},
               "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT": {"s": 0.02, "calls": 32},
               "mystery": {"s": 0.001, "calls": 1}}
    path.write_text(json.dumps({"cases": [{"P": 1024, "wall_s": 0.03, "kernel_s": 0.026, "kernels": kernels}]}))
    assert main([str(path), "--model", "Llama-3.1-8B", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)[0]
    assert rep["case"] == "prefill P=1024"
    by_op = {r["op"]: r for r in rep["rows"]}
    assert by_op["attention"]["measured_s"] == pytest.approx(0.004)
    assert rep["gemm_family"]["measured_s"] == pytest.approx(0.02)
    assert rep["totals"]["unlisted_kernel_s"] == pytest.approx(0.026 - 0.025)
    assert [u["kernel"] for u in rep["unmapped"]] == ["mystery"]
