"""A GGUF of a catalogue Llama with dummy weights, for llama.cpp (numpy and llama.cpp's own gguf-py; no roofline).

The architecture comes from the vendored Hugging Face config (validate.engines.models.config: Llama-3.1-8B, or
tiny-llama for the CPU check), the vocabulary from llama.cpp's test vocabulary models/ggml-vocab-llama-bpe.gguf
(Llama-3's BPE, 128,256 tokens: every tokenizer.* field copied as it is). Weights are F16 (GGML type 1, file type
MOSTLY_F16): ggml's native half type on CUDA (cuBLAS FP16 GEMMs, the F16 mat-vec and flash-attention paths); a
BF16 file holds the same bytes, so roofline's prediction at --weight-dtype fp16 or bf16 is the same. The values are
one fixed pool of N(0, 0.02) halves (seed 0) tiled over every matrix, norms 1.0: the step time does not depend on
them, and the file is written at disk speed. Tensor names and the llama.* keys follow llama.cpp's LLM_ARCH_LLAMA
(gguf-py/gguf/constants.py MODEL_TENSORS[LLAMA]; src/llama-model.cpp's llm_load_hparams).

Usage: python3 -m validate.engines.llamacpp_model GGUF_PY VOCAB_GGUF OUT.gguf [NAME]   (NAME default Llama-3.1-8B)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from validate.engines import models

POOL_ELEMENTS = 1 << 24  # 32 MiB of halves, tiled over each tensor
GGUF_VERSION_FIELDS = ("GGUF.version", "GGUF.tensor_count", "GGUF.kv_count")


def refuse(message: str) -> None:
    """Bad input: one line naming the field and its rule, exit 2."""
    print(f"llamacpp_model: {message}", file=sys.stderr)
    raise SystemExit(2)


def hparams(cfg: dict) -> dict:
    """The llama.* fields llama.cpp reads for LLM_ARCH_LLAMA, from a Hugging Face config; refuses what it cannot write
    (a tied embedding would drop output.weight, and the file would not time the same LM head)."""
    if cfg.get("model_type") != "llama":
        refuse(f"model_type: {cfg.get('model_type')!r} must be 'llama' (this writer knows LLM_ARCH_LLAMA only)")
    if cfg.get("tie_word_embeddings"):
        refuse("tie_word_embeddings: must be false (output.weight is written apart from token_embd)")
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    return {"n_vocab": cfg["vocab_size"], "n_embd": cfg["hidden_size"], "n_layer": cfg["num_hidden_layers"],
            "n_ff": cfg["intermediate_size"], "n_head": heads, "n_head_kv": cfg.get("num_key_value_heads", heads),
            "head_dim": head_dim, "n_ctx_train": cfg["max_position_embeddings"],
            "eps": cfg["rms_norm_eps"], "rope_theta": float(cfg.get("rope_theta", 10000.0))}


def tensors(h: dict) -> list[tuple[str, tuple[int, ...]]]:
    """(name, numpy shape) of every tensor in file order; numpy's (rows, cols) is ggml's ne = [cols, rows]."""
    e, q, kv, ff = h["n_embd"], h["n_head"] * h["head_dim"], h["n_head_kv"] * h["head_dim"], h["n_ff"]
    out = [("token_embd.weight", (h["n_vocab"], e))]
    for i in range(h["n_layer"]):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (e,)), (b + "attn_q.weight", (q, e)), (b + "attn_k.weight", (kv, e)),
                (b + "attn_v.weight", (kv, e)), (b + "attn_output.weight", (e, q)), (b + "ffn_norm.weight", (e,)),
                (b + "ffn_gate.weight", (ff, e)), (b + "ffn_up.weight", (ff, e)), (b + "ffn_down.weight", (e, ff))]
    return out + [("output_norm.weight", (e,)), ("output.weight", (h["n_vocab"], e))]


def tokenizer_fields(gguf, vocab: Path) -> list[tuple[str, object, object, object]]:
    """(key, value, type, array sub-type) of every tokenizer.* field of the vocabulary file."""
    out = []
    for f in gguf.GGUFReader(vocab).fields.values():
        if f.name.startswith("tokenizer."):
            sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
            out.append((f.name, f.contents(), f.types[0], sub))
    return out


# The llama.* keys of the file, in the order it writes them: (GGUFWriter's add_<name>, the hparams key of its value)
HPARAM_KEYS = (("context_length", "n_ctx_train"), ("embedding_length", "n_embd"), ("block_count", "n_layer"),
               ("feed_forward_length", "n_ff"), ("head_count", "n_head"), ("head_count_kv", "n_head_kv"),
               ("rope_dimension_count", "head_dim"), ("key_length", "head_dim"), ("value_length", "head_dim"),
               ("rope_freq_base", "rope_theta"), ("layer_norm_rms_eps", "eps"), ("vocab_size", "n_vocab"))


def add_hparams(w, h: dict) -> None:
    """Adds the model's hyperparameters H (hparams) to the GGUFWriter W, in HPARAM_KEYS's order."""
    for name, key in HPARAM_KEYS:
        getattr(w, f"add_{name}")(h[key])


def write(gguf_py: Path, vocab: Path, out: Path, name: str = "Llama-3.1-8B") -> dict:
    """Writes OUT.gguf; returns its hparams with the file's size and tensor count."""
    sys.path.insert(0, str(gguf_py))
    import gguf

    h = hparams(models.config(name))
    tok = tokenizer_fields(gguf, vocab)
    n_tokens = next(len(v) for k, v, _, _ in tok if k == "tokenizer.ggml.tokens")
    if n_tokens != h["n_vocab"]:
        refuse(f"vocab: {vocab.name} has {n_tokens} tokens, the config's vocab_size is {h['n_vocab']}")
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(f"{name} (dummy weights, roofline validate/engines/llamacpp_model.py)")
    add_hparams(w, h)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    for key, value, vtype, sub in tok:
        w.add_key_value(key, value, vtype, sub_type=sub)
    shapes = tensors(h)
    for tname, shape in shapes:
        dtype = np.float32 if len(shape) == 1 else np.float16
        w.add_tensor_info(tname, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    pool = (np.random.default_rng(0).standard_normal(POOL_ELEMENTS, dtype=np.float32) * 0.02).astype(np.float16)
    for _, shape in shapes:
        w.write_tensor_data(np.ones(shape, np.float32) if len(shape) == 1 else np.resize(pool, shape))
    w.close()
    return {**h, "tensors": len(shapes), "bytes": out.stat().st_size}


def main() -> None:
    if len(sys.argv) not in (4, 5):
        refuse("usage: " + __doc__.strip().splitlines()[-1].removeprefix("Usage: "))
    info = write(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), *sys.argv[4:])
    print(" ".join(f"{k}={v}" for k, v in info.items()))


if __name__ == "__main__":
    main()
