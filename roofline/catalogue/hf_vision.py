"""The vision and audio towers of multimodal wrappers, counted apart from the text decoder from their configs.

A multimodal checkpoint (Gemma-3, LLaVA, Mistral-3, Qwen2.5-VL, Qwen3-VL, Qwen2-Audio) loads an encoder and a
projector into the decoder's width beside the text model: their weights occupy GPU memory in an engine but are no
part of the decoder's parameter count. One row per tower type names its parameter rule, one per wrapper type its
default tower and its projector; each rule follows the transformers v5.24.0 modules of that type
(src/transformers/models/<type>/modeling_<type>.py) and reads the vision_config / audio_config keys with the
defaults of the matching config class where a key is absent. A wrapper or tower whose type has no row is listed
with counted false (0 parameters): the plan's `encoders` note says it is left out of the weights.

Checked against tiny transformers models (tests/catalogue/test_hf_vision_towers.py): every parameter of the
wrapper outside its language model and LM head is counted, exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.catalogue.hfconfig import _Config


def _square(cfg: _Config, key: str, default: int) -> int:
    """image_size / patch_size: an int, or a [h, w] pair of equal sides."""
    value = cfg.data.get(key, default)
    if isinstance(value, list | tuple) and len(value) == 2 and value[0] == value[1]:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise cfg.error(key, f"expected a positive integer (or a square [n, n]), got {value!r}")
    return value


def _vit_layers(d: int, inner: int, layers: int) -> int:
    """CLIP / SigLIP encoder layers: two LayerNorms, q/k/v/out with biases, fc1 / fc2 with biases."""
    return layers * (2 * 2 * d + 4 * (d * d + d) + d * inner + inner + inner * d + d)


def _siglip(v: _Config) -> int:
    """SiglipVisionModel: patch conv with bias, learned positions per patch, layers, post LayerNorm, and the
    attention-pooling head when vision_use_head (probe, nn.MultiheadAttention in/out projections, LayerNorm, MLP)."""
    d, inner = v.integer("hidden_size", 768), v.integer("intermediate_size", 3072)
    channels, patch = v.integer("num_channels", 3), _square(v, "patch_size", 16)
    patches = (_square(v, "image_size", 224) // patch) ** 2
    params = channels * patch * patch * d + d + patches * d + _vit_layers(d, inner, v.integer("num_hidden_layers", 12))
    params += 2 * d
    if v.flag("vision_use_head", True):
        params += d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + (d * inner + inner + inner * d + d)
    return params


def _clip(v: _Config) -> int:
    """CLIPVisionModel: class embedding, patch conv without bias, positions for patches + class, pre and post
    LayerNorms, layers."""
    d, inner = v.integer("hidden_size", 768), v.integer("intermediate_size", 3072)
    channels, patch = v.integer("num_channels", 3), _square(v, "patch_size", 32)
    positions = (_square(v, "image_size", 224) // patch) ** 2 + 1
    return d + channels * patch * patch * d + positions * d + 2 * 2 * d \
        + _vit_layers(d, inner, v.integer("num_hidden_layers", 12))


def _qwen_merger(v: _Config, d: int, norm: int, out: int) -> int:
    """A Qwen-VL patch merger: a norm of `norm` weights, then Linear(d m^2, d m^2) and Linear(d m^2, out)."""
    wide = d * v.integer("spatial_merge_size", 2) ** 2
    return norm + wide * wide + wide + wide * out + out


def _qwen2_5_vl(v: _Config) -> int:
    """Qwen2_5_VisionTransformerPretrainedModel: Conv3d patch embed without bias, blocks of two RMSNorms, fused qkv
    and proj with biases and a gated MLP with biases, then the merger (RMSNorm ln_q) into out_hidden_size."""
    d, inner = v.integer("hidden_size", 3584), v.integer("intermediate_size", 3420)
    patch, temporal = _square(v, "patch_size", 14), v.integer("temporal_patch_size", 2)
    channels = v.integer("in_channels", v.integer("in_chans", 3))
    block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * (d * inner + inner) + inner * d + d
    return channels * temporal * patch * patch * d + v.integer("depth", 32) * block \
        + _qwen_merger(v, d, d, v.integer("out_hidden_size", 3584))


def _qwen3_vl(v: _Config) -> int:
    """Qwen3VLVisionModel: Conv3d patch embed with bias, learned positions, blocks of two LayerNorms, qkv / proj
    and fc1 / fc2 with biases, the merger (LayerNorm over d) and one deepstack merger (LayerNorm over d m^2) per
    deepstack_visual_indexes entry."""
    d, inner = v.integer("hidden_size", 1152), v.integer("intermediate_size", 4304)
    patch, temporal = _square(v, "patch_size", 16), v.integer("temporal_patch_size", 2)
    out, wide = v.integer("out_hidden_size", 3584), d * v.integer("spatial_merge_size", 2) ** 2
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + d * inner + inner + inner * d + d
    deepstack = v.data.get("deepstack_visual_indexes", [8, 16, 24])
    if not isinstance(deepstack, list | tuple):
        raise v.error("deepstack_visual_indexes", f"expected a list of layer indexes, got {deepstack!r}")
    return v.integer("in_channels", 3) * temporal * patch * patch * d + d \
        + v.integer("num_position_embeddings", 2304) * d + v.integer("depth", 27) * block \
        + _qwen_merger(v, d, 2 * d, out) + len(deepstack) * _qwen_merger(v, d, 2 * wide, out)


def _qwen3_5(v: _Config) -> int:
    """Qwen3_5VisionModel / Qwen3_5MoeVisionModel (transformers v5.24.0 models/qwen3_5*/): Qwen3-VL's tower
    without deepstack mergers (its config class has no deepstack_visual_indexes; published configs write [])."""
    return _qwen3_vl(_Config({"deepstack_visual_indexes": [], **v.data}, v.where, v.arch))


def _pixtral(v: _Config) -> int:
    """PixtralVisionModel: patch conv without bias, an RMSNorm (ln_pre), layers of two RMSNorms, q/k/v/o and a
    gated MLP, all without biases (rotary positions have no weights)."""
    d, inner = v.integer("hidden_size", 1024), v.integer("intermediate_size", 4096)
    patch = _square(v, "patch_size", 16)
    layer = 2 * d + 4 * d * d + 3 * d * inner
    return v.integer("num_channels", 3) * patch * patch * d + d + v.integer("num_hidden_layers", 24) * layer


def _qwen2_audio(a: _Config) -> int:
    """Qwen2AudioEncoder (Whisper's encoder): two Conv1d with biases (mel bins -> d, d -> d, kernel 3), learned
    positions (max_source_positions x d), layers of LayerNorm, q/v/out with biases and k without, LayerNorm, fc1 /
    fc2 with biases, and a final LayerNorm."""
    d, inner = a.integer("d_model", 1280), a.integer("encoder_ffn_dim", 5120)
    layer = 2 * d + (4 * d * d + 3 * d) + 2 * d + d * inner + inner + inner * d + d
    return a.integer("num_mel_bins", 128) * d * 3 + d + d * d * 3 + d + a.integer("max_source_positions", 1500) * d \
        + a.integer("encoder_layers", 32) * layer + 2 * d


def _gemma3_projector(v: _Config, text_hidden: int, wrapper: _Config) -> int:
    """Gemma3MultiModalProjector: mm_input_projection_weight (vision d x text d) and an RMSNorm over vision d."""
    d = v.integer("hidden_size", 768)
    return d * text_hidden + d


def _llava_projector(v: _Config, text_hidden: int, wrapper: _Config) -> int:
    """LlavaMultiModalProjector: Linear(vision d x feature layers, text d) and Linear(text d, text d), biased by
    multimodal_projector_bias."""
    layers = wrapper.data.get("vision_feature_layer", -2)
    width = v.integer("hidden_size", 768) * (len(layers) if isinstance(layers, list) else 1)
    bias = wrapper.flag("multimodal_projector_bias", True)
    return width * text_hidden + text_hidden * text_hidden + 2 * text_hidden * bias


def _mistral3_projector(v: _Config, text_hidden: int, wrapper: _Config) -> int:
    """Mistral3MultiModalProjector: an RMSNorm over vision d, the patch merger Linear(d m^2, d) without bias, then
    Linear(d x feature layers, text d) and Linear(text d, text d), biased by multimodal_projector_bias (False)."""
    d, merge = v.integer("hidden_size", 1024), wrapper.integer("spatial_merge_size", 2)
    layers = wrapper.data.get("vision_feature_layer", -1)
    width = d * (len(layers) if isinstance(layers, list) else 1)
    bias = wrapper.flag("multimodal_projector_bias", False)
    return d + d * merge * merge * d + width * text_hidden + text_hidden * text_hidden + 2 * text_hidden * bias


def _none(v: _Config, text_hidden: int, wrapper: _Config) -> int:
    return 0


# the tower of a vision_config's model_type
TOWERS: dict[str, Callable[[_Config], int]] = {
    "siglip_vision_model": _siglip,
    "clip_vision_model": _clip,
    "qwen2_5_vl_vision": _qwen2_5_vl,
    "qwen3_vl_vision": _qwen3_vl,
    "qwen3_5_vision": _qwen3_5,
    "qwen3_5_moe_vision": _qwen3_5,
    "pixtral": _pixtral,
}

# wrapper model_type -> (its tower's model_type when the vision_config does not name one, its projector)
WRAPPERS: dict[str, tuple[str, Callable[[_Config, int, _Config], int]]] = {
    "gemma3": ("siglip_vision_model", _gemma3_projector),
    "llava": ("clip_vision_model", _llava_projector),
    "mistral3": ("pixtral", _mistral3_projector),
    "qwen2_5_vl": ("qwen2_5_vl_vision", _none),
    "qwen3_vl": ("qwen3_vl_vision", _none),
    "qwen3_vl_moe": ("qwen3_vl_vision", _none),
    "qwen3_5": ("qwen3_5_vision", _none),
    "qwen3_5_moe": ("qwen3_5_moe_vision", _none),
}


# audio: wrapper model_type -> (its tower's type, the tower's parameters, the projector Linear(d_model, text d) + bias)
AUDIO: dict[str, tuple[str, Callable[[_Config], int]]] = {
    "qwen2_audio": ("qwen2_audio_encoder", _qwen2_audio),
}


def _audio(data: dict[str, Any], where: str, arch: str) -> dict[str, Any] | None:
    """The counted audio tower of a wrapper with a row in AUDIO (Qwen2AudioMultiModalProjector: one biased
    Linear from d_model to the text width), else None."""
    wrapper = data.get("model_type")
    audio, row = data.get("audio_config"), AUDIO.get(wrapper) if isinstance(wrapper, str) else None
    if not isinstance(audio, dict) or row is None:
        return None
    a = _Config(audio, f"{where}: audio_config", arch)
    text = _text_hidden(data, where, arch)
    return {"modality": "audio", "kind": row[0],
            "parameters": row[1](a) + a.integer("d_model", 1280) * text + text}


def _tower_kind(data: dict[str, Any]) -> str | None:
    """The vision tower's type: the vision_config's model_type, else the wrapper's default; None if either the
    wrapper or the tower has no row."""
    wrapper = data.get("model_type")
    vision, row = data.get("vision_config"), WRAPPERS.get(wrapper) if isinstance(wrapper, str) else None
    if not isinstance(vision, dict) or row is None:
        return None
    kind = vision.get("model_type") or row[0]
    if kind == wrapper:  # published Qwen3-VL configs name the wrapper's type in vision_config (transformers
        kind = row[0]    # v4.57 Qwen3VLVisionConfig.model_type = "qwen3_vl", Qwen3VLMoeVisionConfig "qwen3_vl_moe")
    return kind if isinstance(kind, str) and kind in TOWERS else None


def _text_hidden(data: dict[str, Any], where: str, arch: str) -> int:
    text = data.get("text_config")
    sub = text if isinstance(text, dict) else data
    return _Config(sub, f"{where}: text_config" if isinstance(text, dict) else where, arch).integer("hidden_size")


def read_encoders(data: dict[str, Any], where: str, arch: str) -> list[dict[str, Any]]:
    """The Model's `encoders` from a multimodal wrapper's vision_config / audio_config: the counted vision tower,
    or an entry with counted false (parameters 0) for a tower whose wrapper or type has no row here."""
    out = []
    kind = _tower_kind(data)
    if kind is not None:
        v = _Config(data["vision_config"], f"{where}: vision_config", arch)
        projector = WRAPPERS[data["model_type"]][1]
        params = TOWERS[kind](v) + projector(v, _text_hidden(data, where, arch), _Config(data, where, arch))
        out.append({"modality": "vision", "kind": kind, "parameters": params})
    audio = _audio(data, where, arch)
    if audio is not None:
        out.append(audio)
    for key, modality in (("vision_config", "vision"), ("audio_config", "audio")):
        tower = data.get(key)
        counted = kind is not None if modality == "vision" else audio is not None
        if isinstance(tower, dict) and not counted:
            name = tower.get("model_type") or f"{data.get('model_type')}:{modality}"
            if modality == "vision" and name in TOWERS:  # the tower has a rule, its wrapper type none
                name = f"{name} (wrapper type {data.get('model_type')!r} has no row in WRAPPERS)"
            out.append({"modality": modality, "kind": str(name), "parameters": 0, "counted": False})
    return out
