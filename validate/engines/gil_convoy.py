"""The tokeniser's GIL convoy against a busy asyncio loop, by itself (issue 33; run 25's note, "What is left" 1).

    python validate/engines/gil_convoy.py OUT.json      (~3 min; transformers and tokenizers only, no vLLM)

vLLM 0.24's API server tokenises a prompt on a thread pool (renderers/base.py:86-93, `make_async(tokenizer.encode)`)
while its one asyncio loop serves the streams. Run 25 found the tokenise leg growing 2-8x past the one hop loop() gives
it at 64 streams. This times that leg alone, with no vLLM: an asyncio loop whose callbacks keep it busy in spells of
`spell` seconds (pure Python, the GIL held) separated by idle gaps (the loop in epoll, the GIL free), at a duty cycle
rho, each spell a chain of 50 us callbacks (the server's work is many small callbacks, so a request's handler runs
between them, inside a spell, not only in its gaps), and a probe coroutine that awaits run_in_executor(tokenizer.encode)
of run 24's probe prompt (1,500 words, models.write's tiny-llama tokenizer: WordLevel, Llama-3's 128,256 ids), 20 times
a point, spaced at random phases. Per point: the leg's median and its excess over the idle loop's. The grid: switch
intervals 1 and 5 ms (sys.setswitchinterval), spells 0.5 / 2 / 8 ms, rho 0.3 / 0.6 / 0.9, and a loop that is never idle
(rho 1).

What it is for: CPython's GIL hands a waiting thread the lock when the holder blocks (the loop's idle gap) or, if the
holder keeps running, after the switch interval (the waiter's drop request). A tokeniser that needs the lock k times
should then wait about k x min(residual spell, switch interval) while the loop is busy, and k x switch interval when it
never idles: this measures whether that holds and what k is, before any of it enters api_loop.loop()."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VOCAB, PROBE_WORDS, PROBES = 128256, 1500, 20
SWITCH_S = (1e-3, 5e-3)
SPELLS_S = (0.5e-3, 2e-3, 8e-3)
RHOS = (0.3, 0.6, 0.9)
PIECES_S = (1.0, 50e-6)  # a spell as one callback (one loop iteration), or as 50 us callbacks, one an iteration


def _tokenizer():
    spec = importlib.util.spec_from_file_location("_gil_models", HERE / "models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(mod.write(tempfile.mkdtemp(), "tiny-llama"))


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(50))


async def _point(tok, texts: list[str], spell: float, rho: float, rng: random.Random, piece: float) -> list[float]:
    """The probe's leg (submit -> the coroutine resumed with the ids), PROBES times, while the loop runs spells of
    `spell` s at duty cycle `rho` (rho 0: idle; rho 1: back to back, never idle), each spell callbacks of `piece` s
    chained by call_soon, one a loop iteration (piece >= spell: the spell is one callback, one iteration)."""
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    stop = False

    piece = min(piece, spell) if spell else piece
    done = loop.create_future()

    def work(left: float) -> None:
        if stop:
            done.set_result(None)
            return
        _spin(piece)
        if left > piece:
            loop.call_soon(work, left - piece)  # the spell goes on; timers due meanwhile run between pieces
        else:
            gap = spell * (1 - rho) / rho * rng.uniform(0.5, 1.5)
            loop.call_later(gap, work, spell) if gap > 0 else loop.call_soon(work, spell)

    if rho:
        loop.call_soon(work, spell)
    else:
        done.set_result(None)
    await asyncio.sleep(0.02)
    legs = []
    for text in texts:
        await asyncio.sleep(rng.uniform(0.005, 0.015))  # a random phase
        t = time.perf_counter()
        await loop.run_in_executor(pool, tok.encode, text)
        legs.append(time.perf_counter() - t)
    stop = True
    await done
    pool.shutdown()
    return legs


def main(out: Path) -> None:
    tok = _tokenizer()
    rng = random.Random(7)
    texts = [" ".join(f"w{rng.randrange(3, VOCAB)}" for _ in range(PROBE_WORDS)) for _ in range(PROBES)]
    tok.encode(texts[0])  # warm
    before = sys.getswitchinterval()
    points = []
    try:
        for si in SWITCH_S:
            sys.setswitchinterval(si)
            idle = asyncio.run(_point(tok, texts, 0.0, 0.0, rng, 1.0))
            points.append({"switch_s": si, "spell_s": 0.0, "rho": 0.0, "piece_s": 0.0, "legs_s": idle})
            base = statistics.median(idle)
            for piece, spell, rho in itertools.product(PIECES_S, SPELLS_S, (*RHOS, 1.0)):
                legs = asyncio.run(_point(tok, texts, spell, rho, rng, piece))
                points.append({"switch_s": si, "spell_s": spell, "rho": rho, "piece_s": min(piece, spell),
                               "legs_s": legs})
                print(f"switch {si * 1e3:.0f} ms  iteration {min(piece, spell) * 1e3:4.2f} ms  spell "
                      f"{spell * 1e3:4.1f} ms  rho {rho:.1f}: leg p50 {statistics.median(legs) * 1e3:6.2f} ms  "
                      f"(+{(statistics.median(legs) - base) * 1e3:6.2f} over idle {base * 1e3:.2f})", flush=True)
    finally:
        sys.setswitchinterval(before)
    out.write_text(json.dumps({"about": __doc__.splitlines()[0], "python": sys.version.split()[0],
                               "date": time.strftime("%Y-%m-%d"), "points": points}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
