"""vLLM's per-step log (`vllm serve --enable-logging-iteration-details`, EngineCore.log_iteration_details,
vllm/v1/engine/core.py@v0.24.0:434-472) read back: one row per engine step, its context (prefill) requests and tokens,
generation (decode) requests and tokens, the wait for its result ("iteration elapsed time", the span the context
manager wraps: core.py:583-587, future.result() only) and the log line's stamp (millisecond stamps with
logging-iter.json). A step with context tokens past the largest capture size (512) runs eagerly (timing mechanism 8).

    python -m validate.engines.iter_log SERVER_LOG [--stages STAGES_LOG --run NAME]   (one run's steps: from its line
        in the kit's stages.log, 'NAME HH:MM:SS', to the next line's)
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
STAGE = re.compile(r"^(\S+) (\d\d):(\d\d):(\d\d)$")


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


def steps(text: str, window: tuple[float, float] = (0.0, float("inf"))) -> list[Step]:
    """The steps logged in `text` (a server log) whose stamps fall in `window` (seconds since midnight)."""
    out = []
    for line in text.splitlines():
        if (m := LINE.search(line)) is None:
            continue
        h, mi, s, ms = (int(m.group(i)) for i in range(1, 5))
        t = h * 3600 + mi * 60 + s + ms / 1e3
        if window[0] <= t < window[1]:
            out.append(Step(t, *(int(m.group(i)) for i in range(5, 10)), float(m.group(10))))
    return out


def windows(stages: str) -> dict[str, tuple[float, float]]:
    """Each stage's span from a kit's stages.log ('NAME HH:MM:SS' a line, detach.sh's `stage`): from its line to the
    next one's (the last to the end of the day). The server log's stamps are the same clock (the GPU machine's)."""
    marks = [(m.group(1), int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4)))
             for line in stages.splitlines() if (m := STAGE.match(line.strip()))]
    ends = [t for _, t in marks[1:]] + [float("inf")]
    return {name: (t, end) for (name, t), end in zip(marks, ends, strict=True)}


def summary(st: list[Step]) -> dict:
    """Counts and medians of a run's steps: prefill steps (any context request), prompts per prefill step (context
    requests, a chunked prompt counted in each of its steps), and the period between consecutive lines by what the
    engine launched in it. Under asynchronous scheduling step n's line is written when its result is taken, which is
    after step n + 1 was scheduled and launched (EngineCore.step_with_batch_queue, core.py:539-587: the queue of two
    fills first), so the period from line n - 1 to line n holds step n + 1's launch: an eager step's launch (mechanism
    8's host work) shows in the period that ends at the line before its own."""
    pre = [s for s in st if s.ctx_reqs]
    periods = [(b.stamp_s - a.stamp_s) * 1e3 for a, b in zip(st, st[1:], strict=False)]
    # periods[i] ends at st[i + 1]'s line and holds st[i + 2]'s launch
    launched = st[2:]
    eager = [p for p, n in zip(periods, launched, strict=False) if n.eager]
    graphed = [p for p, n, b in zip(periods, launched, st[1:], strict=False)
               if not n.eager and not n.ctx_reqs and not b.ctx_reqs]
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
    p.add_argument("--stages", type=Path)
    p.add_argument("--run")
    a = p.parse_args()
    try:
        spans = windows(stored.read_text(a.stages)) if a.stages and a.run else {}
        text = stored.read_text(a.log)
    except (OSError, UnicodeDecodeError) as err:
        p.exit(2, f"iter_log: {err}\n")
    if a.run and a.stages and a.run not in spans:
        p.exit(2, f"iter_log: --run {a.run!r} is not a stage of {a.stages} (stages: {', '.join(spans)})\n")
    window = spans[a.run] if a.run and a.stages else (0.0, float("inf"))
    for k, v in summary(steps(text, window)).items():
        print(f"{k:26s} {v:.2f}" if isinstance(v, float) else f"{k:26s} {v}")


if __name__ == "__main__":
    main()
