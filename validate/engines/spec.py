"""The acceptance per draft position a speculative-decoding run of vLLM measured, from its Prometheus /metrics
before and after the run (vllm/v1/spec_decode/metrics.py, v0.24.0: counters vllm:spec_decode_num_drafts and
vllm:spec_decode_num_accepted_tokens_per_pos{position="k"}, k = 0 .. K-1). The simulator's input is the conditional
acceptance a_k = P(draft k accepted | drafts < k accepted) = accepted_k / accepted_{k-1} (accepted_{-1} = drafts),
since vLLM counts position k as accepted only when every earlier draft was.
"""

from __future__ import annotations

import re
from pathlib import Path

_LINE = re.compile(r'^(vllm:spec_decode_[a-z_]+?)(?:_total)?(?:\{([^}]*)\})?\s+([0-9.eE+-]+)$')


def counters(path: Path) -> dict[tuple[str, int | None], float]:
    """(metric, position or None) -> value, summed over other labels (engine, model_name)."""
    out: dict[tuple[str, int | None], float] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        pos = re.search(r'position="(\d+)"', m.group(2) or "")
        key = (m.group(1), int(pos.group(1)) if pos else None)
        out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def acceptance(before: Path, after: Path, tokens: int) -> tuple[float, ...] | None:
    """The conditional acceptance per draft position over the run (after - before), or None without counts."""
    a, b = counters(after), counters(before)

    def delta(name, pos=None):
        return a.get((name, pos), 0.0) - b.get((name, pos), 0.0)

    drafts = delta("vllm:spec_decode_num_drafts")
    if drafts <= 0:
        return None
    prev, out = drafts, []
    for k in range(tokens):
        acc = delta("vllm:spec_decode_num_accepted_tokens_per_pos", k)
        out.append(min(1.0, acc / prev) if prev > 0 else 0.0)
        prev = acc
    return tuple(out)
