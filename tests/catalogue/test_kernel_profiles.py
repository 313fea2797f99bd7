"""Kernel profiles: the decode kernel's shared-memory work per quantized token is the chosen profile's, derived by
hand here from each profile's description (roofline.catalogue.kernel_profiles), and `plan --kernel-profile` picks it."""

import json

import pytest
from cli_run import run

from roofline.catalogue import kernel_profiles
from roofline.kv.quant import TensorQuant, metadata_loads, operand_loads
from roofline.lazy import sp

E = sp.Symbol("E", positive=True)  # quantized elements
T = sp.Symbol("T", positive=True)  # quantized tokens
KIVI_K = TensorQuant(bits=2, group_along="tokens", group_size=32)  # per-channel keys: groups across q.k^T's reduction


def test_lab_profile_is_the_default_and_reads_each_scale_per_element_and_per_warp() -> None:
    assert kernel_profiles.active().name == "lab-triton" == kernel_profiles.DEFAULT
    # fp16 scale + zero (4 B) per element, plus 4 warps x 4 B per 32 elements
    assert metadata_loads(KIVI_K, E, sp.Integer(4), "channels") == 4 * E + 4 * 4 * E / 32
    # Llama-3.1-8B keys: 8 KV heads x 128 channels, 4 query heads a KV head padded to 16 rows; q (16 x 128 x 2 B
    # per KV head) re-read once per 32 tokens: 8 x 16 x 128 x 2 / 32 = 1024 B per token
    assert operand_loads("key", T, 1024, 8, 4) == 1024 * T
    # p (16 rows x 2 B per token and KV head) written once and read by 4 warps: 8 x 16 x 2 x 5 = 1280 B per token
    assert operand_loads("value", T, 1024, 8, 4) == 1280 * T


def test_engine_profile_reads_q_once_keeps_p_in_registers_and_each_scale_once_per_group() -> None:
    with kernel_profiles.use("engine") as profile:
        assert profile.q_tokens_per_read is None and profile.p_reads == 0
        assert metadata_loads(KIVI_K, E, sp.Integer(4), "channels") == 4 * E / 32
        assert operand_loads("key", T, 1024, 8, 4) == 0
        assert operand_loads("value", T, 1024, 8, 4) == 0
        # element-wise dequant before a GEMM (XQuant's X) reads a scale per element whatever the kernel
        assert metadata_loads(KIVI_K, E, sp.Integer(4), None) == 4 * E
    assert kernel_profiles.active().name == "lab-triton"  # restored after the block


def test_unknown_profile_is_one_line() -> None:
    with pytest.raises(ValueError, match="kernel-profile: unknown 'fa9'; valid: lab-triton, engine"):
        kernel_profiles.get("fa9")


def test_plan_kernel_profile_flag(capsys) -> None:
    code, out, _ = run(capsys, "plan", "--method", "kivi-2", "--method", "fp16", "--json")
    assert code == 0
    lab = json.loads(out)
    assert "kernel_profile" not in lab  # the default's output is unchanged
    code, out, _ = run(capsys, "plan", "--method", "kivi-2", "--method", "fp16", "--kernel-profile", "engine", "--json")
    assert code == 0
    engine = json.loads(out)
    assert engine["kernel_profile"] == "engine"
    by = {name: {r["method"]: r for r in doc["results"]} for name, doc in (("lab", lab), ("engine", engine))}
    # fp16 is FlashAttention's kernel under either profile; KIVI's step loses the lab kernel's shared-memory work
    assert by["engine"]["fp16"]["decode_step_s"] == by["lab"]["fp16"]["decode_step_s"]
    assert by["engine"]["kivi-2"]["decode_step_s"] < by["lab"]["kivi-2"]["decode_step_s"]
    assert by["engine"]["kivi-2"]["kv_bytes"] == by["lab"]["kivi-2"]["kv_bytes"]  # storage is the method's
    code, _, err = run(capsys, "plan", "--kernel-profile", "nope")
    assert code == 2 and "invalid choice: 'nope'" in err
