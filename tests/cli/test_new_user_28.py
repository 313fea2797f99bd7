"""Trying the tool as a new user (session 28, validate/notes/2026-11-30-new-user-28.md): real configs of families
not tried before (tests/data/hf/<name>/SOURCE.md says where each comes from), each counted by hand here, and the
defects the session found, each by the invocation that showed it; expected figures derived by hand or from the
source each docstring cites (vLLM v0.24.0 for the engine's reading)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from cli_run import run

from roofline.accounting import parameter_count, state_bytes_per_layer
from roofline.catalogue import load_model
from roofline.catalogue.hf import model_from_hf_config
from roofline.errors import SpecError

DATA = Path(__file__).resolve().parents[1] / "data" / "hf"


def _path(name: str) -> str:
    return str(DATA / name / "config.json")


def _config(name: str) -> dict:
    return json.loads((DATA / name / "config.json").read_text())


def _json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


# --- parameters and KV bytes per token, by hand -----------------------------------------------------------------

# Trinity-Nano-Preview (afmoe; transformers v5.24.0 modeling_afmoe.py): d 1,024, 56 layers, 8 / 2 heads of 128,
# vocab 200,192 untied.
#   embeddings + lm_head 2 x 200,192 x 1,024                                   =   409,993,216
#   attention per layer: q 1,024 x 1,024 + k, v 2 x 1,024 x 256 + o 1,024^2 + output gate 1,024^2 + q/k norms 2 x 128
#     = 3 x 1,048,576 + 524,288 + 256 = 3,670,272; x 56                        =   205,535,232
#   dense MLP (num_dense_layers 2): 2 x 3 x 1,024 x 3,072                      =    18,874,368
#   MoE layers (54): 128 experts x 3 x 1,024 x 256 = 100,663,296, shared 3 x 1,024 x 256 = 786,432, router
#     1,024 x 128 + expert_bias 128 = 131,200: 101,580,928 x 54                =  5,485,370,112
#   norms: 4 x 1,024 per layer x 56 + final 1,024                              =       230,400
#   total                                                                      =  6,120,003,328
# KV per token at long context: only the 14 full layers grow (every 4th): 14 x 2 x 2 x 128 x 2 B = 14,336.
#
# Ministral-3-3B-Instruct-2512 text (ministral3): d 3,072, 26 layers, 32 / 8 heads of 128, MLP 9,216, vocab 131,072
# tied: embed 402,653,184; per layer q 3,072 x 4,096 + k, v 2 x 3,072 x 1,024 + o 4,096 x 3,072 = 31,457,280,
# MLP 3 x 3,072 x 9,216 = 84,934,656, norms 6,144 -> 116,398,080 x 26 = 3,026,350,080; final norm 3,072;
# total 3,429,006,336. KV per token 26 x 2 x 8 x 128 x 2 B = 106,496.
#
# Qwen3.5-0.8B text (qwen3_5_text): d 1,024, 24 layers (6 full, 18 Gated DeltaNet), vocab 248,320 tied.
#   embed 254,279,680; full attention (gated q: 2 x 8 x 256): q 1,024 x 4,096 + k, v 2 x 1,024 x 512 + o 2,048 x
#   1,024 + q/k norms 2 x 256 = 7,340,544 (x 6 = 44,043,264); DeltaNet: in_proj_qkv 1,024 x 6,144 + z 1,024 x 2,048
#   + b, a 2 x 1,024 x 16 + conv 6,144 x 4 + dt_bias, A_log 2 x 16 + gated norm 128 + out 2,048 x 1,024
#   = 10,543,264 (x 18 = 189,778,752); MLP 3 x 1,024 x 3,584 = 11,010,048 and norms 2,048 per layer (x 24 =
#   264,290,304); final norm 1,024; total 752,393,024. KV per token: 6 x 2 x 2 x 256 x 2 B = 12,288.
#
# Apertus-8B-Instruct-2509 (apertus): d 4,096, 32 layers, 32 / 8 heads of 128, MLP 21,504 ungated (up, down),
# vocab 131,072 untied: embeddings 2 x 536,870,912; per layer attention 41,943,040 + q/k norms 256 + MLP
# 2 x 4,096 x 21,504 = 176,160,768 + norms 8,192 + xIELU alpha_p, alpha_n 2 = 218,112,258 (x 32 = 6,979,592,256);
# final norm 4,096; total 8,053,338,176. KV per token 32 x 2 x 8 x 128 x 2 B = 131,072.
#
# AFM-4.5B-Base (arcee): d 2,560, 36 layers, 20 / 4 heads of 128, MLP 18,432 ungated (ReLU^2), vocab 128,004
# untied: embeddings 2 x 327,690,240; per layer q 2,560^2 + k, v 2 x 2,560 x 512 + o 2,560^2 = 15,728,640, MLP
# 2 x 2,560 x 18,432 = 94,371,840, norms 5,120 -> 110,105,600 (x 36 = 3,963,801,600); final norm 2,560;
# total 4,619,184,640. KV per token 36 x 2 x 4 x 128 x 2 B = 73,728.
BY_HAND = {
    "Trinity-Nano-Preview": (409_993_216 + 205_535_232 + 18_874_368 + 5_485_370_112 + 230_400, 14_336),
    "Ministral-3-3B-Instruct-2512": (402_653_184 + 3_026_350_080 + 3_072, 106_496),
    "Qwen3.5-0.8B": (254_279_680 + 44_043_264 + 189_778_752 + 264_290_304 + 1_024, 12_288),
    "Apertus-8B-Instruct-2509": (2 * 536_870_912 + 6_979_592_256 + 4_096, 131_072),
    "AFM-4.5B-Base": (2 * 327_690_240 + 3_963_801_600 + 2_560, 73_728),
}


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_real_config_parameters_and_kv_bytes_by_hand(capsys, name):
    params, per_token = BY_HAND[name]
    counted = parameter_count(load_model(_path(name)))
    total = sum(getattr(counted, f) for f in ("embedding", "lm_head", "attention", "mlp_dense", "mlp_experts_total",
                                              "router", "norms"))
    assert total == params
    cap = _json(capsys, "capacity", "--model", _path(name), "--hardware", "H200", "--engine", "vllm",
                "--max-model-len", "32768")
    assert cap["bytes_per_token"] == per_token


def test_trinity_nano_pool_and_concurrency_under_vllm_by_hand(capsys):
    """vLLM v0.24.0 groups Trinity's 14 full and 42 sliding layers into 4 groups of 14 sharing one pool
    (kv_cache_utils._get_kv_cache_groups_uniform_page_size): a block is 16 tokens x 1,024 B x 14 layers = 229,376 B.
    A request of 32,768 tokens holds 32,768 / 16 = 2,048 blocks of the full group and, per sliding group,
    cdiv(min(2,048 - 1 + 8,192, 32,768), 16) + 1 = 641 (SlidingWindowSpec.max_admission_blocks_per_request, the
    api server's 8,192-token step): 2,048 + 3 x 641 = 3,971 blocks; max concurrency = num_blocks / 3,971."""
    cap = _json(capsys, "capacity", "--model", _path("Trinity-Nano-Preview"), "--hardware", "H200", "--engine",
                "vllm", "--max-model-len", "32768")
    assert cap["kv_groups"] == 4 and cap["block_size"] == 16
    assert cap["num_blocks"] == int(cap["kv_pool_bytes"] // (16 * 1_024 * 14))
    assert cap["max_concurrency"] == pytest.approx(cap["num_blocks"] / (2_048 + 3 * 641), rel=1e-12)


# --- Qwen3.5: the recurrent state at the config's mamba_ssm_dtype ----------------------------------------------


def test_qwen3_5_recurrent_state_is_stored_at_mamba_ssm_dtype(capsys):
    """Qwen/Qwen3.5-35B-A3B's text_config says "mamba_ssm_dtype": "float32" (tests/data/hf/Qwen3.5-35B-A3B, verbatim),
    and vLLM v0.24.0 stores the Gated DeltaNet recurrent state at it (models/config.py
    Qwen3_5ForConditionalGenerationConfig sets mamba_ssm_cache_dtype; mamba_utils._mamba_state_dtype). The planner
    kept it at bf16: half the state, a 16 x cdiv(1,097,728, 32,768) = 544-token block instead of 1,056. By hand,
    per linear layer:
    32 value heads x 128 x 128 = 524,288 elements x 4 B = 2,097,152, conv (4 - 1) x (2 x 16 x 128 + 32 x 128) =
    24,576 x 2 B = 49,152: 2,146,304 B. vLLM raises the attention block to 16 x cdiv(2,146,304, 16 x 2,048 B/token
    (2 x 2 KV heads x 256 x 2 B)) = 16 x 66 = 1,056 tokens (HybridAttentionMambaModelConfig); a 32,768-token request
    holds cdiv(32,768, 1,056) = 32 full-attention blocks and one block in each of the 3 DeltaNet groups: 35."""
    model = load_model(_path("Qwen3.5-35B-A3B"))
    assert model.linear_attention.recurrent_dtype == "fp32"
    assert state_bytes_per_layer(model) == 524_288 * 4 + 24_576 * 2 == 2_146_304
    cap = _json(capsys, "capacity", "--model", _path("Qwen3.5-35B-A3B"), "--hardware", "H200", "--engine", "vllm",
                "--max-model-len", "32768")
    assert cap["block_size"] == 16 * 66 == 1_056
    assert cap["max_concurrency"] == pytest.approx(cap["num_blocks"] / 35, rel=1e-12)


def test_qwen3_5_without_the_key_keeps_the_model_dtype_and_a_bad_value_is_refused(tmp_path, capsys):
    """Qwen3.5-0.8B's fixture has no mamba_ssm_dtype: the state stays bf16, 16 x 128 x 128 x 2 + 3 x 6,144 x 2 =
    524,288 + 36,864 = 561,152 B (block 16 x cdiv(561,152, 32,768) = 288); with "float32" 1,048,576 + 36,864 =
    1,085,440 B (block 16 x 34 = 544); 'auto' is the model dtype; anything else is one line naming the key."""
    base = _config("Qwen3.5-0.8B")
    assert state_bytes_per_layer(model_from_hf_config(base, name="q")) == 561_152
    f32 = copy.deepcopy(base)
    f32["text_config"]["mamba_ssm_dtype"] = "float32"
    assert state_bytes_per_layer(model_from_hf_config(f32, name="q")) == 1_085_440
    auto = copy.deepcopy(base)
    auto["text_config"]["mamba_ssm_dtype"] = "auto"
    assert state_bytes_per_layer(model_from_hf_config(auto, name="q")) == 561_152
    for path, block in ((_path("Qwen3.5-0.8B"), 288), (None, 544)):
        if path is None:
            (tmp_path / "f32").mkdir()
            (tmp_path / "f32" / "config.json").write_text(json.dumps(f32))
            path = str(tmp_path / "f32" / "config.json")
        cap = _json(capsys, "capacity", "--model", path, "--hardware", "H200", "--engine", "vllm")
        assert cap["block_size"] == block
    bad = copy.deepcopy(base)
    bad["text_config"]["mamba_ssm_dtype"] = "float64"
    with pytest.raises(SpecError, match=r"text_config: mamba_ssm_dtype: 'float64' is not one of float32"):
        model_from_hf_config(bad, name="q")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text(json.dumps(bad))
    code, out, err = run(capsys, "plan", "--model", str(tmp_path / "bad" / "config.json"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "mamba_ssm_dtype" in err


# --- a multimodal tower left out is said, and counted in the published form ---------------------------------------

# Pixtral (transformers v5.24.0 modeling_pixtral.py) of Ministral-3-3B: patch conv 3 x 14 x 14 x 1,024 = 602,112 (no
# bias), ln_pre 1,024, 24 layers of q/k/v/o 4 x 1,024^2 + gated MLP 3 x 1,024 x 4,096 + 2 norms 2,048 = 16,779,264
# (x 24 = 402,702,336): 403,305,472; Mistral3 projector: norm 1,024, patch merger 4,096 x 1,024 = 4,194,304,
# linear_1 1,024 x 3,072 = 3,145,728, linear_2 3,072 x 3,072 = 9,437,184: 16,778,240. Tower + projector 420,083,712.
PIXTRAL = 602_112 + 1_024 + 24 * (4 * 1_024**2 + 3 * 1_024 * 4_096 + 2_048) + 1_024 + 4_194_304 + 3_145_728 + 9_437_184


def _ministral_fp8() -> dict:
    """The wrapper as the published checkpoint names it (model_type mistral3) with an FP8 quantization_config of the
    form Mistral's FP8 releases carry (quant_method fp8, static activations, weight_block_size null: one scale per
    matrix), its vision tower, projector and (tied) lm_head not converted."""
    config = _config("Ministral-3-3B-Instruct-2512")
    config["model_type"] = "mistral3"
    config["quantization_config"] = {"activation_scheme": "static", "dequantize": False, "quant_method": "fp8",
                                     "weight_block_size": None,
                                     "modules_to_not_convert": ["model.vision_tower", "model.multi_modal_projector",
                                                                "lm_head"]}
    return config


def test_a_tower_left_out_of_the_weights_is_said_in_plan_capacity_and_json(capsys):
    """mlc-llm's Ministral-3 preset names the wrapper 'ministral3' (tests/data/hf/Ministral-3-3B-Instruct-2512): no
    WRAPPERS row, so the 420,083,712-parameter pixtral tower is left out and the weights are 0.78 GiB low. Only the
    JSON said so; `plan`'s text and `capacity` printed the low figure alone."""
    path = _path("Ministral-3-3B-Instruct-2512")
    [tower] = load_model(path).encoders
    assert not tower.counted and tower.kind.startswith("pixtral (wrapper type 'ministral3'")
    code, out, err = run(capsys, "plan", "--model", path, "--hardware", "H200", "--method", "bf16")
    assert code == 0, err
    warning = next(line for line in out.splitlines() if line.startswith("warning: vision tower pixtral"))
    assert "NOT counted" in warning and "the weights memory is low by its size" in warning
    assert out.splitlines().index(warning) == 3  # right under the memory line it corrects
    result = _json(capsys, "plan", "--model", path, "--hardware", "H200", "--method", "bf16")
    assert result["encoders"]["uncounted"] in warning
    code, out, err = run(capsys, "capacity", "--model", path, "--hardware", "H200", "--engine", "vllm")
    assert code == 0 and "note: vision tower pixtral" in out
    code, out, err = run(capsys, "simulate", "--model", path, "--hardware", "H200", "--method", "bf16", "--engine",
                         "vllm", "--rate", "2", "--requests", "20")
    assert code == 0 and "warning: vision tower pixtral" in out, err
    assert PIXTRAL == 420_083_712


def test_ministral_fp8_stored_bytes_by_hand(tmp_path, capsys):
    """With model_type mistral3 the tower counts (PIXTRAL, bf16), and the FP8 checkpoint is planned at its stored
    bytes: codes 26 x (31,457,280 + 84,934,656) = 3,026,190,336 B; scales: per-tensor weight_scale + static
    input_scale, 4 B each, for 7 matrices a layer: 26 x 56 = 1,456 B; kept at bf16: the tied embedding 402,653,184
    and 162,816 norm weights (26 x 6,144 + 3,072): 805,632,000 B; the tower 2 x 420,083,712 = 840,167,424 B.
    Weights 3,026,190,336 + 1,456 + 805,632,000 + 840,167,424 = 4,671,991,216 B."""
    (tmp_path / "Ministral-3-3B-Instruct-2512").mkdir()
    path = tmp_path / "Ministral-3-3B-Instruct-2512" / "config.json"
    path.write_text(json.dumps(_ministral_fp8()))
    [tower] = load_model(str(path)).encoders
    assert tower.counted and tower.parameters == PIXTRAL
    result = _json(capsys, "plan", "--model", str(path), "--hardware", "H200", "--method", "bf16")
    stored = result["quantization"]["stored_bytes"]
    assert (stored["codes"], stored["scales_and_zero_points"], stored["kept_at_bf16"]) == (
        3_026_190_336, 1_456, 805_632_000)
    assert result["encoders"]["bytes"] == 2 * PIXTRAL and result["encoders"]["uncounted"] is None
    assert result["results"][0]["memory"]["weights_bytes"] == 3_026_190_336 + 1_456 + 805_632_000 + 2 * PIXTRAL


# --- the answer first -------------------------------------------------------------------------------------------


def test_a_method_given_twice_is_refused(capsys):
    """`plan --method bf16 --method fp8 --method bf16` printed two identical bf16 rows ranked 1 and 3 ('3 of 3 methods
    fit'); `simulate` two identical rows. Now one line, exit 2, nothing on stdout."""
    for argv in (("plan", "--method", "bf16", "--method", "fp8", "--method", "bf16"),
                 ("simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "bf16", "--method", "bf16",
                  "--rate", "1", "--requests", "10")):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "", err
        assert err.strip().splitlines() == ["roofline: error: --method: 'bf16' is given twice; give each SPEC once "
                                            "(its rows would be identical)"]


def test_an_evicting_best_says_what_attention_still_sees(capsys):
    """The answer ranked h2o-2048 best at context 65,536 ('max context 65,536') with nothing saying it keeps 2,048 of
    the 65,536 tokens per layer (2,048 / 65,536 = 3.1 %): now the answer line, `best` and the row's note say so;
    keyformer-50 keeps ceil(65,536 x 0.5) = 32,768. A budget at or above the context evicts nothing and says
    nothing."""
    argv = ("plan", "--model", _path("Apertus-8B-Instruct-2509"), "--hardware", "H100-SXM", "--batch", "32",
            "--context", "65536", "--method", "kivi-2", "--method", "h2o-2048", "--method", "keyformer-50")
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    answer = out.splitlines()[1]
    assert "best by most tokens/s at the batch and context: h2o-2048" in answer
    assert answer.endswith("; it evicts: attends to 2,048 of the 65,536 tokens per layer, accuracy not modelled)")
    assert "h2o-2048: evicts: keeps 2,048 of the 65,536 tokens per layer (3.1%; h2o chooses which)" in out
    rows = {r["method"]: r for r in _json(capsys, *argv)["results"]}
    assert rows["h2o-2048"]["limits"]["kept_tokens"] == 2_048
    assert rows["keyformer-50"]["limits"]["kept_tokens"] == 32_768
    # README's `best` example: h2o-2048 ranks first for Qwen3-8B at 40,960 tokens, keeping 2,048 of them
    code, out, err = run(capsys, "best", "--model", "Qwen3-8B", "--hardware", "H200", "--context", "40960",
                         "--batch", "1")
    assert code == 0, err
    first = out.splitlines()[1]
    assert first.startswith("answer: h2o-2048: ") and ", evicts: attends to 2,048 of 40,960 tokens [" in first
    assert all("evicts" not in line for line in out.splitlines()[2:] if "h2o" not in line and "keyformer" not in line)
    short = _json(capsys, "plan", "--context", "1024", "--batch", "1", "--method", "h2o-2048")
    assert short["results"][0]["notes"] == [] and short["results"][0]["limits"]["kept_tokens"] == 1_024


# --- hostile inputs that were accepted ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a\nb", "tab\there", "x" * 201])
def test_a_name_that_is_not_one_printable_line_is_refused(capsys, name):
    """`plan --model config.json --name $'a\\nb'` printed its header over two lines ('a' / 'b on 1 x H100-SXM ...');
    a 201-character name is past the 200 a label can hold. One line, exit 2, naming the field."""
    code, out, err = run(capsys, "plan", "--model", _path("AFM-4.5B-Base"), "--name", name, "--method", "bf16")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "name: " in err and "printable characters on one line" in err


def test_expert_weight_dtype_on_a_dense_model_is_refused(capsys):
    """`plan --expert-weight-dtype mxfp4` on a dense model printed 'experts mxfp4' in its header as if it applied
    (it sets nothing there); `capacity` took it silently. Refused as --ep > 1 is; a MoE model still takes it."""
    for command in (("plan", "--method", "bf16"), ("capacity", "--engine", "vllm")):
        code, out, err = run(capsys, *command, "--model", _path("AFM-4.5B-Base"), "--expert-weight-dtype", "mxfp4")
        assert code == 2 and out == "", err
        assert err.strip() == ("roofline: error: --expert-weight-dtype: mxfp4 sets the routed experts' width; "
                               "AFM-4.5B-Base has no routed experts (use --weight-dtype for its weights)")
    code, out, err = run(capsys, "plan", "--model", _path("Trinity-Nano-Preview"), "--expert-weight-dtype", "fp8",
                         "--method", "bf16")
    assert code == 0 and "experts fp8" in out.splitlines()[0], err


def test_an_unknown_flag_is_named_with_its_command(capsys):
    """`plan --gpu-memory-utilization 0.9` (capacity's flag) said 'roofline: error: roofline: unrecognized arguments:
    ...': the program twice and not the command that refused it."""
    code, out, err = run(capsys, "plan", "--gpu-memory-utilization", "0.9")
    assert (code, out) == (2, "")
    assert err == "roofline: error: plan: unrecognized arguments: --gpu-memory-utilization 0.9\n"
    code, out, err = run(capsys, "frobnicate")
    assert code == 2 and err.startswith("roofline: error: argument command: invalid choice: 'frobnicate'")


def test_apertus_counts_xielu_scalars_only_with_the_xielu_activation(tmp_path):
    """ApertusMLP's act_fn is ACT2FN[hidden_act]: XIELUActivation's alpha_p and alpha_n (2 a layer, 64 over 32
    layers) exist only for hidden_act "xielu" (the config default); with "silu" the MLP holds no parameter of its
    activation."""
    data = json.loads(Path(_path("Apertus-8B-Instruct-2509")).read_text())
    counts = {}
    for act in ("xielu", "silu", None):
        changed = {k: v for k, v in data.items() if k != "hidden_act"} | ({"hidden_act": act} if act else {})
        path = tmp_path / f"apertus-{act}" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(changed))
        counts[act] = parameter_count(load_model(str(path))).total
    assert counts["xielu"] == counts[None] == BY_HAND["Apertus-8B-Instruct-2509"][0]
    assert counts["xielu"] - counts["silu"] == 2 * 32
