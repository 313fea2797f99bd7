"""A local .gguf file's header: its metadata, every tensor's ggml type and shape, and the model they describe.

The GGUF layout (ggml/include/gguf.h and ggml/src/gguf.cpp at llama.cpp 0c1e570; little-endian): magic `GGUF`,
uint32 version (2 or 3), uint64 tensor count, uint64 KV count; each KV a string key (uint64 length + UTF-8), a uint32
gguf_type and its value (arrays: uint32 element type, uint64 count, the elements); each tensor a string name, uint32
n_dims, n_dims uint64 ne (ne0, the row, first), uint32 ggml_type, uint64 offset into the data section. Only the header
is read (the tensor data can be many GB); the bytes of each tensor follow from its type and shape
(roofline.ggml_types), exactly what llama.cpp allocates for it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from stat import S_ISREG
from typing import Any, BinaryIO

from roofline.errors import SpecError
from roofline.ggml_types import GGML_TYPE_IDS
from roofline.gguf_quant import GgufWeights, Tensor

# gguf_type -> struct format of a scalar (8 string, 9 array: read apart)
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
# llama.cpp's general.file_type (enum llama_ftype, include/llama.h) -> the preset's name
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
              12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
              32: "BF16"}
# GGUF general.architecture -> the Hugging Face architecture the catalogue names (the dense and MoE decoders
# gguf_quant models; Mixtral is arch llama with experts)
ARCHS = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
         "qwen3moe": "Qwen3MoeForCausalLM", "qwen2moe": "Qwen2MoeForCausalLM", "phi3": "Phi3ForCausalLM"}


@dataclass(frozen=True)
class GgufHeader:
    """What a GGUF file's header says: its metadata (arrays of more than 16 elements kept as their length) and its
    tensors in file order."""

    metadata: dict[str, Any]
    tensors: tuple[Tensor, ...]

    @property
    def arch(self) -> str:
        """general.architecture (llama, qwen2, ...)."""
        return str(self.metadata.get("general.architecture", ""))

    def weights(self) -> GgufWeights:
        """The file's tensors as GgufWeights (GPU part and the host's token_embd), preset from general.file_type."""
        preset = FILE_TYPES.get(self.metadata.get("general.file_type", -1), "file")
        return GgufWeights(preset, self.tensors)


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise SpecError(f"{getattr(f, 'name', 'GGUF')}: the header ends early (truncated file?)")
    return struct.unpack(fmt, data)[0]


def _string(f: BinaryIO) -> str:
    n = _read(f, "<Q")
    if n > os.fstat(f.fileno()).st_size - f.tell():  # a length past the file's end: never allocate it
        raise SpecError(f"{getattr(f, 'name', 'GGUF')}: the header ends early (a string of {n:,} bytes; truncated "
                        "file?)")
    return f.read(n).decode("utf-8", errors="replace")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind == 8:
        return _string(f)
    if kind == 9:
        inner, n = _read(f, "<I"), _read(f, "<Q")
        items = [_value(f, inner) for _ in range(n)]
        return items if n <= 16 else n
    if kind not in SCALARS:
        raise SpecError(f"GGUF: unknown value type {kind}")
    return _read(f, SCALARS[kind])


def read_header(path: str | Path) -> GgufHeader:
    """The header of the GGUF file at `path` (SpecError naming the file when it is not one); read once per file
    version (its size and modification time)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as err:
        raise SpecError(f"{path}: (file): cannot read: {err.strerror or err}") from None
    if not S_ISREG(stat.st_mode):  # a FIFO or a device would block the read: refused by what it is
        raise SpecError(f"{path}: (not a regular file): a GGUF model is a file llama.cpp wrote")
    try:
        return _read_header(path.resolve(), stat.st_size, stat.st_mtime_ns)
    except OSError as err:
        raise SpecError(f"{path}: (file): cannot read: {err.strerror or err}") from None


@lru_cache(maxsize=8)
def _read_header(path: Path, size: int, mtime_ns: int) -> GgufHeader:
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise SpecError(f"{path}: not a GGUF file (no GGUF magic)")
        version = _read(f, "<I")
        if version not in (2, 3):
            raise SpecError(f"{path}: GGUF version {version} (2 and 3 are read)")
        n_tensors, n_kv = _read(f, "<Q"), _read(f, "<Q")
        metadata = {}
        for _ in range(n_kv):
            key = _string(f)
            metadata[key] = _value(f, _read(f, "<I"))
        tensors = []
        for _ in range(n_tensors):
            name = _string(f)
            shape = tuple(_read(f, "<Q") for _ in range(_read(f, "<I")))
            type_id = _read(f, "<I")
            _read(f, "<Q")  # offset
            if type_id not in GGML_TYPE_IDS:
                raise SpecError(f"{path}: tensor {name} has ggml type {type_id}, unknown at llama.cpp 0c1e570")
            tensors.append(Tensor(name, shape, GGML_TYPE_IDS[type_id]))
    return GgufHeader(metadata, tuple(tensors))


def model_from_gguf(header: GgufHeader, name: str):
    """The catalogue Model a dense or MoE GGUF describes ({arch}.block_count, embedding_length, feed_forward_length,
    attention.head_count(_kv), attention.key_length, context_length, expert_*; the vocabulary from token_embd's
    shape; tied when there is no output.weight; q/k/v biases and q/k norms from block 0's tensors)."""
    from roofline.specs import Model

    arch, m = header.arch, header.metadata
    if arch not in ARCHS:
        raise SpecError(f"{name}: GGUF architecture {arch!r} is not read (known: {', '.join(ARCHS)})")
    names = {t.name: t for t in header.tensors}

    def key(k: str, default: Any = None) -> Any:
        value = m.get(f"{arch}.{k}", default)
        if value is None:
            raise SpecError(f"{name}: GGUF key {arch}.{k} missing")
        return value

    heads, hidden = key("attention.head_count"), key("embedding_length")
    spec: dict[str, Any] = {
        "name": name, "source": f"GGUF header ({name})", "architecture": ARCHS[arch],
        "num_layers": key("block_count"), "hidden_size": hidden, "num_heads": heads,
        "num_kv_heads": key("attention.head_count_kv", heads),
        "head_dim": key("attention.key_length", hidden // heads),
        "intermediate_size": key("feed_forward_length", 0) or key("expert_feed_forward_length"),
        "vocab_size": names["token_embd.weight"].shape[1], "tie_word_embeddings": "output.weight" not in names,
        "qkv_bias": "blk.0.attn_q.bias" in names, "qk_norm": "blk.0.attn_q_norm.weight" in names,
        "max_position_embeddings": key("context_length"),
    }
    if m.get(f"{arch}.expert_count"):
        shared = m.get(f"{arch}.expert_shared_count", 1 if "blk.0.ffn_up_shexp.weight" in names else 0)
        spec["moe"] = {"num_experts": key("expert_count"), "experts_per_token": key("expert_used_count"),
                       "num_shared_experts": shared,
                       "expert_intermediate_size": key("expert_feed_forward_length", spec["intermediate_size"])}
        if shared:
            spec["moe"]["shared_expert_intermediate_size"] = names["blk.0.ffn_up_shexp.weight"].shape[1] // shared
    return Model.model_validate(spec)


def file_weight_dtype(model_ref: str | None) -> str | None:
    """`gguf:<preset>` for a --model that is a .gguf file of one of gguf_quant's presets (its general.file_type), so
    the planner counts its tensors at llama-quantize's types; None otherwise."""
    from roofline.gguf_quant import PREFIX, PRESETS

    if not model_ref or not model_ref.endswith(".gguf") or not Path(model_ref).is_file():
        return None
    preset = FILE_TYPES.get(read_header(model_ref).metadata.get("general.file_type", -1))
    return PREFIX + preset if preset in PRESETS else None


def rules_note(model_ref: str | None, model, weight_dtype: str | None) -> str | None:
    """A note when a .gguf --model's own tensor types differ from what llama-quantize's rules give its file type (an
    importance matrix, --tensor-type overrides, another llama.cpp version): the planner counts the rules' bytes, and
    the note gives the file's. None when they agree (tensors the rules do not write, such as rope_freqs, aside)."""
    from roofline.gguf_quant import gguf_weights, preset_of

    preset = preset_of(weight_dtype) if weight_dtype else None
    if preset is None or not model_ref or not model_ref.endswith(".gguf") or not Path(model_ref).is_file():
        return None
    planned = {t.name: t for t in gguf_weights(model, preset).tensors}
    own = [t for t in read_header(model_ref).tensors if t.name in planned]
    differ = [t for t in own if t.type != planned[t.name].type]
    if not differ:
        return None
    file_bytes, rule_bytes = sum(t.bytes for t in own), sum(planned[t.name].bytes for t in own)
    first = differ[0]
    return (f"{model_ref}: {len(differ)} tensors differ from llama-quantize's {preset} rules (e.g. {first.name} is "
            f"{first.type}, the rules give {planned[first.name].type}): the file holds {file_bytes:,} B where the "
            f"planner counts {rule_bytes:,} B")
