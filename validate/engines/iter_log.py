"""vLLM's per-step log (`vllm serve --enable-logging-iteration-details`, EngineCore.log_iteration_details,
vllm/v1/engine/core.py@v0.24.0:434-472) read back: one row per engine step, its context (prefill) requests and tokens,
generation (decode) requests and tokens, the wait for its result ("iteration elapsed time", the span the context
manager wraps: core.py:583-587, future.result() only) and the log line's stamp (millisecond stamps with
logging-iter.json). A step with context tokens past the largest capture size (512) runs eagerly (timing mechanism 8).

    python -m validate.engines.iter_log SERVER_LOG [--run NAME]   (a run's steps: between run 23's '== run NAME'
                                                                   markers)
"""

from __future__ import annotations

import argparse
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from validate import stored

LINE = re.compile(r"(\d\d):(\d\d):(\d\d)\.(\d{3}) \[core\.py:\d+\] Iteration\((\d+)\): (\d+) context requests, "
                  r"(\d+) context tokens, (\d+) generation requests, (\d+) generation tokens, iteration elapsed "
                  r"time: ([\d.]+) ms")
MARK = re.compile(r"^== run (\S+)")


@dataclass(frozen=True)
class Step:
    stamp_s: float  # seconds since midnight of the log line (written after the step's result was taken)
    index: int
    ctx_reqs: int
    ctx_tokens: int
    gen_reqs: int
    gen_tokens: int
    wait_ms: float

    @property
    def eager(self) -> bool:
        return self.ctx_tokens + self.gen_tokens > 512


def steps(text: str, run: str | None = None) -> list[Step]:
    """The steps logged in `text` (a server log), or only those after the '== run RUN' marker up to the next."""
    out, inside = [], run is None
    for line in text.splitlines():
        if (m := MARK.match(line)) and run is not None:
            inside = m.group(1) == run
            continue
        if not inside or (m := LINE.search(line)) is None:
            continue
        h, mi, s, ms = (int(m.group(i)) for i in range(1, 5))
        out.append(Step(h * 3600 + mi * 60 + s + ms / 1e3, *(int(m.group(i)) for i in range(5, 10)),
                        float(m.group(10))))
    return out


def summary(st: list[Step]) -> dict:
    """Counts and medians of a run's steps: prefill steps (any context request), prompts per prefill step (context
    requests, a chunked prompt counted in each of its steps), the period between consecutive steps' stamps split by
    whether the later step ran eagerly."""
    pre = [s for s in st if s.ctx_reqs]
    periods = [(b.stamp_s - a.stamp_s) * 1e3 for a, b in zip(st, st[1:], strict=False)]
    eager = [p for p, b in zip(periods, st[1:], strict=True) if b.eager]
    graphed = [p for p, b in zip(periods, st[1:], strict=True) if not b.eager and not b.ctx_reqs]
    return {"steps": len(st), "prefill_steps": len(pre), "eager_steps": sum(s.eager for s in st),
            "context_requests": sum(s.ctx_reqs for s in pre),
            "prompts_per_prefill_step": sum(s.ctx_reqs for s in pre) / len(pre) if pre else None,
            "eager_period_ms": statistics.median(eager) if eager else None,
            "decode_period_ms": statistics.median(graphed) if graphed else None,
            "eager_wait_ms": statistics.median(s.wait_ms for s in st if s.eager) if any(s.eager for s in st)
            else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log", type=Path)
    p.add_argument("--run")
    a = p.parse_args()
    for k, v in summary(steps(stored.read_text(a.log), a.run)).items():
        print(f"{k:26s} {v:.2f}" if isinstance(v, float) else f"{k:26s} {v}")


if __name__ == "__main__":
    main()
