"""roofline.gguf_file reads a GGUF header written by ggml-org's own gguf-py writer (the `gguf` package, an independent
implementation of the format and of the block sizes: its GGML_QUANT_SIZES)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from roofline.errors import SpecError
from roofline.gguf_file import model_from_gguf, read_header
from roofline.gguf_quant import gguf_weights
from roofline.specs import Model

gguf = pytest.importorskip("gguf")

TINY = Model(name="tiny", source="test", architecture="LlamaForCausalLM", num_layers=4, hidden_size=512,
             num_heads=8, num_kv_heads=2, head_dim=64, intermediate_size=1024, vocab_size=1000,
             tie_word_embeddings=False, max_position_embeddings=4096)


def _write(path, model: Model, preset: str) -> int:
    """A GGUF of `model` whose tensors have the types gguf_quant gives `preset`, sized by gguf-py's own block table;
    returns the tensor bytes gguf-py counted."""
    return _write_tensors(path, model, gguf_weights(model, preset).tensors)


def _write_tensors(path, model: Model, tensors) -> int:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(model.num_layers)
    w.add_context_length(model.max_position_embeddings)
    w.add_embedding_length(model.hidden_size)
    w.add_feed_forward_length(model.intermediate_size)
    w.add_head_count(model.num_heads)
    w.add_head_count_kv(model.num_kv_heads)
    w.add_file_type(15)  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    w.add_token_list([f"t{i}" for i in range(model.vocab_size)])
    total = 0
    for t in tensors:
        qtype = gguf.GGMLQuantizationType[t.type.upper()]
        numpy_shape = tuple(reversed(t.shape))
        byte_shape = gguf.quant_shape_to_byte_shape(numpy_shape, qtype) if qtype not in (
            gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) else numpy_shape
        dtype = {gguf.GGMLQuantizationType.F32: "float32", gguf.GGMLQuantizationType.F16: "float16"}.get(qtype, "uint8")
        data = np.zeros(byte_shape, dtype=dtype)
        total += data.nbytes
        w.add_tensor(t.name, data, raw_dtype=qtype)  # gguf-py derives the element shape from the byte shape
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return total


def test_header_round_trip(tmp_path):
    path = tmp_path / "tiny-Q4_K_M.gguf"
    written = _write(path, TINY, "Q4_K_M")
    header = read_header(path)
    weights = header.weights()
    assert weights.preset == "Q4_K_M"
    assert weights.total_bytes == written  # gguf-py's byte count for the same types and shapes
    assert weights.tensors == gguf_weights(TINY, "Q4_K_M").tensors
    # the data section: each tensor padded to general.alignment (32); the file ends with the last one's bytes
    assert os.path.getsize(path) >= written
    model = model_from_gguf(header, "tiny")
    for field in ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "intermediate_size",
                  "vocab_size", "tie_word_embeddings", "max_position_embeddings"):
        assert getattr(model, field) == getattr(TINY, field), field


def test_not_a_gguf_is_refused(tmp_path):
    path = tmp_path / "x.gguf"
    path.write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(SpecError, match="not a GGUF file"):
        read_header(path)


def test_a_missing_file_or_a_fifo_is_one_line_not_a_traceback_or_a_hang(tmp_path):
    with pytest.raises(SpecError, match=r"missing\.gguf: \(file\): cannot read: No such file"):
        read_header(tmp_path / "missing.gguf")
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)  # opening it to read would block until a writer comes
    with pytest.raises(SpecError, match=r"pipe\.gguf: \(not a regular file\)"):
        read_header(fifo)


def test_a_length_past_the_files_end_is_refused_not_allocated(tmp_path):
    import struct

    path = tmp_path / "huge.gguf"  # one metadata key whose length claims 2**62 bytes
    path.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 1, 1, 2 ** 62) + b"abc")
    with pytest.raises(SpecError, match="ends early"):
        read_header(path)


def test_cli_reads_a_gguf_model_at_its_file_type(tmp_path, capsys):
    """capacity --model FILE.gguf: the header's config, the weights at the file's Q4_K_M (general.file_type 15)."""
    import json

    from roofline.cli import main

    path = tmp_path / "tiny-Q4_K_M.gguf"
    _write(path, TINY, "Q4_K_M")
    assert main(["capacity", "--model", str(path), "--engine", "llamacpp", "--hardware", "H200",
                 "--max-model-len", "4096", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    w = gguf_weights(TINY, "Q4_K_M")
    assert any(f"{w.gpu_bytes:,} B on the GPU" in r for r in result["rules"])
    assert main(["capacity", "--model", str(path), "--engine", "vllm"]) == 2
    assert "--engine vllm loading GGUF" in capsys.readouterr().err


def test_a_file_off_the_rules_gets_a_note(tmp_path, capsys):
    """A Q4_K_M file whose attn_v are all q8_0 (an override): capacity plans the rules' bytes and says so."""
    import json

    from roofline.cli import main
    from roofline.gguf_quant import GgufWeights, Tensor

    rules = gguf_weights(TINY, "Q4_K_M")
    overridden = tuple(Tensor(t.name, t.shape, "q8_0") if "attn_v" in t.name else t for t in rules.tensors)
    path = tmp_path / "tiny-override.gguf"
    _write_tensors(path, TINY, overridden)
    assert main(["capacity", "--model", str(path), "--engine", "llamacpp", "--hardware", "H200",
                 "--max-model-len", "4096", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("4 tensors differ" in n and "blk.0.attn_v.weight is q8_0" in n for n in notes)
    assert GgufWeights("x", overridden).total_bytes > rules.total_bytes
