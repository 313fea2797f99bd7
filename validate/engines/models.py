"""Weight-less Hugging Face model folders for an engine's `--load-format dummy`, from the published configs the
roofline catalogue was imported from (tests/data/hf/<name>/config.json, each a vendored copy of the model's
config.json on the Hub), plus a tiny model whose step time is the engine's own fixed cost.

Standard library only (it runs on the GPU machine). The tokenizer is a WordLevel model over the words w0..w{V-1}
(special tokens at the config's bos/eos ids), WhitespaceSplit, no decoder, so decode(ids) re-encodes to the same ids
and `vllm bench serve --dataset-name random` hits its lengths (recipe: ../shared/recipes/vllm-h200/make_models.py).

Usage: python3 -m validate.engines.models OUTDIR [NAME ...]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HF = Path(__file__).resolve().parents[2] / "tests" / "data" / "hf"

# Llama-2-7B (multi-head attention) has no vendored copy: its published config.json
# (https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json), the fields roofline's catalogue
# models/Llama-2-7B.yaml was written from.
LLAMA2_7B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "max_position_embeddings": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "torch_dtype": "float16", "use_cache": True, "vocab_size": 32000,
}

# The engine's fixed cost per step: a model whose GPU work is negligible (2 layers of width 256), so its decode step
# is the scheduler, input preparation, graph launch, sampling and output processing (a microbenchmark of the engine,
# not one of the judged models).
TINY = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 256, "intermediate_size": 512, "max_position_embeddings": 32768,
    "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 4, "head_dim": 64,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 128256,  # Llama-3's vocabulary, so the sampler's per-step work is the judged Llama's
}

# The host cost of a step past the largest CUDA-graph capture size (run 5): models of the judged layer structure
# (depth, attention kind, expert count and top-k, vocabulary) at widths whose GPU work is negligible, so a prompt
# past 512 tokens times the engine launching every kernel of every layer from Python, per layer kind. Each is the
# published config (tests/data/hf) with its widths narrowed; nothing else changes.
NARROW = {
    "tiny-llama-32": ("tiny-llama", {"num_hidden_layers": 32}),
    # run 14: the same folder under a second name, so one cases file times it at tp 1 (this name) and tp 2 (above):
    # the host cost a tp 2 step adds at the judged depth (run 12's Llama-3.1-8B prefills at tp 2)
    "tiny-llama-32-tp1": ("tiny-llama", {"num_hidden_layers": 32}),
    # run 11: the draft-depth series at negligible width (2, 16, 32 layers): a draft pass's host cost per layer
    "tiny-llama-16": ("tiny-llama", {"num_hidden_layers": 16}),
    "tiny-qwen3moe-48": ("Qwen3-30B-A3B", {"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64,
                                           "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 64}),
    # MLA keeps its latent widths (kv_lora_rank 512, rope 64: the MLA kernels' supported shapes)
    "tiny-dsv2-27": ("DeepSeek-V2-Lite", {"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64,
                                          "num_attention_heads": 4}),
}

INLINE = {"Llama-2-7B": LLAMA2_7B, "tiny-llama": TINY}

# Llama-3.2-3B (a 28-layer draft with Llama-3's vocabulary: the third draft depth of run 8) is Llama-3.2-1B's vendored
# config.json with the fields its published config.json differs in
# (https://huggingface.co/meta-llama/Llama-3.2-3B/blob/main/config.json; roofline's models/Llama-3.2-3B.yaml).
DERIVED = {"Llama-3.2-3B": ("Llama-3.2-1B", {"hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
                                             "head_dim": 128, "num_hidden_layers": 28, "intermediate_size": 8192})}


def config(name: str) -> dict:
    """The config.json of `name`: an inline published config, else the vendored copy under tests/data/hf."""
    if name in INLINE:
        return dict(INLINE[name])
    if name in NARROW or name in DERIVED:
        base, fields = NARROW.get(name) or DERIVED[name]
        return {**config(base), **fields}
    return json.loads((HF / name / "config.json").read_text())


def _ids(value) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def write(outdir: str, name: str) -> str:
    """Write OUTDIR/name/{config,tokenizer,tokenizer_config,generation_config}.json; return the folder."""
    cfg = config(name)
    cfg.pop("quantization_config", None)  # dummy weights are bf16 here; a quantized run names it explicitly
    cfg.pop("auto_map", None)  # the engine's own implementation, never the Hub's remote code
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    text = cfg.get("text_config", cfg)
    vocab_size = text["vocab_size"]
    bos, eos = _ids(text.get("bos_token_id", cfg.get("bos_token_id"))), _ids(
        text.get("eos_token_id", cfg.get("eos_token_id")))
    special = {"<unk>": 0}
    if bos:
        special["<s>"] = bos[0]
    for i, tid in enumerate(eos):
        special[f"</s>{i or ''}"] = tid
    by_id = {i: t for t, i in special.items()}
    vocab = {by_id.get(i, f"w{i}"): i for i in range(vocab_size)}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for t, i in sorted(special.items(), key=lambda x: x[1])]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f, separators=(",", ":"))
    tc = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>" if bos else None,
          "eos_token": "</s>" if eos else None, "unk_token": "<unk>",
          "model_max_length": text.get("max_position_embeddings", 32768), "add_bos_token": False,
          "add_eos_token": False, "clean_up_tokenization_spaces": False}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=1)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos[0] if bos else None, "eos_token_id": eos[0] if eos else None}, f)
    return d


if __name__ == "__main__":
    for n in sys.argv[2:]:
        print(write(sys.argv[1], n))
