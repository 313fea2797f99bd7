"""A checkpoint's folder stands for its config.json (as `vllm serve PATH` takes a folder): the same model, with the
hf_quant_config.json beside it read, and one-line refusals for a folder without one."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.catalogue.store import load_model
from roofline.errors import SpecError

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
ROOT = Path(__file__).resolve().parents[2]


def test_a_folder_is_its_config_json(tmp_path):
    """Qwen3-8B's folder and its config.json give the same model; the name is the folder's."""
    folder = tmp_path / "Qwen3-8B"
    shutil.copytree(HF / "Qwen3-8B", folder)
    by_file, by_folder = load_model(str(folder / "config.json")), load_model(str(folder))
    assert by_folder.model_dump() == by_file.model_dump()
    # by hand from the config: 36 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 147,456 bytes a token
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * 2 * 2 == 147456
    assert by_folder.num_layers == 36


def test_a_modelopt_folder_reads_its_quant_settings():
    """nvidia/Llama-3.1-70B-Instruct-FP8's folder: config.json has no quantization_config, hf_quant_config.json beside
    it says FP8; the folder plans the same FP8 weights as the config.json path (not bf16)."""
    folder = HF / "Llama-3.1-70B-Instruct-FP8"
    assert (folder / "hf_quant_config.json").is_file()
    model = load_model(str(folder))
    # hf_quant_config.json says quant_algo FP8, kv_cache_quant_algo FP8
    assert (model.quantization.weight_dtype, model.quantization.kv_cache_dtype) == ("fp8", "fp8")
    assert model.model_dump() == load_model(str(folder / "config.json")).model_dump()


def test_a_folder_without_config_json_is_refused_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match=r"empty: \(folder\): holds no config.json"):
        load_model(str(tmp_path / "empty"))
    r = subprocess.run([sys.executable, "-m", "roofline.cli", "kv", "--model", str(tmp_path / "empty")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
