"""What roofline's SGLang rules read (roofline/engines/sglang.py, scheduling.py), taken from one SGLang start:
the resolved settings in /server_info (or Engine.get_server_info) and the start-up log's memory lines.

Standard library only (it runs on the GPU machine beside the engine; CPU tests read saved files).
Usage: python3 sglang_summary.py SERVER_INFO.json [SERVER.log]   -> JSON on stdout
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# server_info keys -> the summary's names; each looked up first in internal_states[0] (the scheduler's resolved
# arguments), then at the top level (server arguments and the scheduler's init info)
KEYS = {
    "mem_fraction_static": "mem_fraction_static",
    "max_total_num_tokens": "max_total_num_tokens",
    "chunked_prefill_size": "chunked_prefill_size",
    "max_prefill_tokens": "max_prefill_tokens",
    "max_running_requests": "max_running_requests",
    "effective_max_running_requests_per_dp": "max_running_requests_effective",
    "attention_backend": "attention_backend",
    "prefill_attention_backend": "prefill_attention_backend",
    "decode_attention_backend": "decode_attention_backend",
    "sampling_backend": "sampling_backend",
    "page_size": "page_size",
    "context_length": "context_length",
    "max_req_input_len": "max_req_input_len",
    "kv_cache_dtype": "kv_cache_dtype",
    "disable_radix_cache": "disable_radix_cache",
    "schedule_policy": "schedule_policy",
    "enable_mixed_chunk": "enable_mixed_chunk",
    "cuda_graph_config": "cuda_graph_config",
    "memory_usage": "memory_usage",
    "tp_size": "tp_size",
    "version": "version",
}

# start-up log lines that carry the memory profile (weights, KV pool, CUDA graphs), kept verbatim
LOG_PATTERNS = ("Load weight end", "KV Cache is allocated", "Memory pool end", "max_total_num_tokens",
                "Capture cuda graph", "Capture prefill", "cuda graph", "avail mem", "mem usage", "attention backend",
                "Attention backend", "The server is fired up")


def summary(info: dict) -> dict:
    """The KEYS found in a server_info dict (None where absent), plus the decode capture sizes' max."""
    states = info.get("internal_states") or [{}]
    first = states[0] if isinstance(states[0], dict) else {}
    out = {}
    for key, name in KEYS.items():
        out[name] = first.get(key, info.get(key))
    graphs = out.get("cuda_graph_config") or {}
    decode = graphs.get("decode") if isinstance(graphs, dict) else None
    decode = decode if isinstance(decode, dict) else {}
    out["cuda_graph_max_bs"] = decode.get("max_bs")
    out["cuda_graph_bs"] = decode.get("bs")
    return out


def log_lines(text: str, limit: int = 80) -> list[str]:
    """The log's memory and graph lines (the first `limit`; per-batch lines skipped), ANSI colours stripped."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    keep = []
    for line in text.splitlines():
        if "Prefill batch" in line or "Decode batch" in line:
            continue
        if any(p in line for p in LOG_PATTERNS):
            keep.append(line.strip()[:400])
            if len(keep) == limit:
                break
    return keep


def main() -> None:
    """Print the summary of SERVER_INFO.json (and the log lines of SERVER.log when given) as JSON."""
    try:
        info = json.loads(Path(sys.argv[1]).read_text())
    except (OSError, json.JSONDecodeError) as e:
        info = {"error": f"{type(e).__name__}: {e}"}
    out = summary(info) if "error" not in info else info
    if len(sys.argv) > 2 and Path(sys.argv[2]).exists():
        out["log"] = log_lines(Path(sys.argv[2]).read_text(errors="replace"))
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
