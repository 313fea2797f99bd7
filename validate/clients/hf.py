"""The second client: transformers' LlamaForCausalLM with a StaticCache (attn_implementation "sdpa"),
random bf16 weights from the same Model spec, one decode token per sequence at cache position L - 1.

Recorded besides the time: how it calls scaled_dot_product_attention (mask given or not, enable_gqa or
K/V expanded by repeat_kv: the key's head count at the call), and the kernels one step launches.
Timed eagerly (Python launches included, as a user runs it) and, where capture works, as a CUDA graph.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from validate.clients.grid import HF_SHAPES as SHAPES  # noqa: E402
from validate.clients.timing import capture, kernel_census, replay_ms


def _config(m: dict, max_len: int):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=m["vocab_size"], hidden_size=m["hidden_size"],
                       intermediate_size=m["intermediate_size"], num_hidden_layers=m["num_layers"],
                       num_attention_heads=m["num_heads"], num_key_value_heads=m["num_kv_heads"],
                       head_dim=m["head_dim"], max_position_embeddings=max(max_len, 8192), rope_theta=500_000.0,
                       tie_word_embeddings=m["tie_word_embeddings"], attn_implementation="sdpa")


class _SdpaSpy:
    """Wraps F.scaled_dot_product_attention to record how the model calls it (first call of a step)."""

    def __init__(self):
        self.calls: list[dict] = []
        self.original = F.scaled_dot_product_attention

    def __call__(self, q, k, v, *args, **kwargs):
        mask = kwargs.get("attn_mask", args[0] if args else None)
        self.calls.append({"q_heads": q.shape[1], "k_heads": k.shape[1], "mask": mask is not None,
                           "is_causal": bool(kwargs.get("is_causal", False)),
                           "enable_gqa": bool(kwargs.get("enable_gqa", False))})
        return self.original(q, k, v, *args, **kwargs)

    def __enter__(self):
        F.scaled_dot_product_attention = self
        torch.nn.functional.scaled_dot_product_attention = self
        return self

    def __exit__(self, *exc):
        F.scaled_dot_product_attention = self.original
        torch.nn.functional.scaled_dot_product_attention = self.original


def run_hf(name: str, m: dict, deadline: float, log=print) -> list[dict]:
    """Decode steps of LlamaForCausalLM + StaticCache at SHAPES (eager and graph-captured)."""
    import transformers
    from transformers import LlamaForCausalLM

    rows = []
    max_len = max(n for _, n in SHAPES)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(_config(m, max_len)).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    for p in model.parameters():
        p.data.normal_(0.0, 0.02)
    for b, n in SHAPES:
        params = {"model": name, "layers": m["num_layers"], "client": "hf-static", "phase": "decode", "batch": b,
                  "context": n, "transformers": transformers.__version__}
        row = {"family": "client", "name": f"{name}/hf-static/decode/b{b}-c{n}", "params": params}
        if time.time() > deadline:
            rows.append({**row, "skipped": "deadline"})
            continue
        try:
            row.update(_hf_case(model, b, n))
        except torch.cuda.OutOfMemoryError as err:
            row["skipped"] = f"out of memory: {str(err).splitlines()[0][:160]}"
        except Exception as err:
            row["error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
        torch.cuda.empty_cache()
        rows.append(row)
        log(f"  {row['name']}: {row.get('ms', row.get('error') or row.get('skipped'))}")
    del model
    torch.cuda.empty_cache()
    return rows


def _hf_case(model, batch: int, length: int) -> dict:
    from transformers import StaticCache

    cache = StaticCache(config=model.config, max_cache_len=length)
    tokens = torch.randint(0, model.config.vocab_size, (batch, 1), device="cuda")
    position = torch.tensor([length - 1], device="cuda")

    def step():
        with torch.no_grad():
            return model(input_ids=tokens, past_key_values=cache, cache_position=position, use_cache=True,
                         logits_to_keep=1).logits

    with _SdpaSpy() as spy:
        step()
    for layer in getattr(cache, "layers", []):  # random cache contents, never zeros
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):
                t.normal_()
    torch.cuda.synchronize()
    row = {"sdpa_call": spy.calls[0] if spy.calls else None, **kernel_census(step)}
    times = []
    for i in range(35):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        if i >= 5:
            times.append(start.elapsed_time(end))
    times.sort()
    row["eager_ms"] = times[len(times) // 2]
    try:
        graph = capture(step)
        timed = replay_ms(graph)
        row.update(timed)
    except Exception as err:  # the eager time stands; say why the graph did not
        row["ms"] = row["eager_ms"]
        row["graph_error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
    return row
