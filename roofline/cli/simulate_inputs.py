"""`roofline simulate`'s requests from its flags: a --trace file (serving.traces), a --dataset or --prompt-tokens /
--output-tokens distributions at --rate, then what the prompts share (--prefix, --session-turns, a Mooncake trace's
hash_ids), with notes wherever the run reads the input in a way a reader would not assume."""

from __future__ import annotations

import argparse


def inputs(args: argparse.Namespace):
    """(requests, SLO, notes) from the flags: a trace (its format read by serving.traces), a dataset or length
    distributions, then shared prefixes or sessions; every refusal names its flag."""
    from roofline.errors import SpecError
    from roofline.serving.datasets import dataset
    from roofline.serving.prefix import parse_prefix, sessions
    from roofline.serving.requests import LengthDist, load_trace_noted, poisson_requests
    from roofline.serving.simulate import Slo

    if (args.slo_ttft_ms is None) != (args.slo_tpot_ms is None):
        missing = "--slo-tpot-ms" if args.slo_tpot_ms is None else "--slo-ttft-ms"
        raise SpecError(f"{missing}: an SLO needs both --slo-ttft-ms and --slo-tpot-ms")
    slo = None if args.slo_ttft_ms is None else Slo(args.slo_ttft_ms / 1e3, args.slo_tpot_ms / 1e3)
    notes, blocks = [], None
    if args.trace:
        from roofline.report.bounds import check_trace_file

        for flag, value in (("--dataset", args.dataset), ("--prompt-tokens", args.prompt_tokens),
                            ("--output-tokens", args.output_tokens)):
            if value:
                raise SpecError(f"{flag}: the trace gives every request's lengths; drop {flag} or --trace")
        if "://" not in args.trace:
            check_trace_file(args.trace)  # a regular file of bounded size: never a FIFO, a device or a huge file
        requests, read_notes, blocks = load_trace_noted(args.trace)
        notes += read_notes
        if args.requests is not None and args.requests < len(requests):
            notes.append(f"--trace: replaying the first {args.requests:,} of its {len(requests):,} rows (--requests)")
            requests = requests.first(args.requests)
            blocks = None if blocks is None else blocks[:args.requests]
        elif args.requests is not None and args.requests > len(requests):
            notes.append(f"--requests {args.requests:,}: the trace has {len(requests):,} rows, all replayed")
    else:
        if args.dataset:
            if args.prompt_tokens or args.output_tokens:
                raise SpecError("--dataset: gives the prompt and output lengths; drop --prompt-tokens/--output-tokens")
            prompt, output, source = dataset(args.dataset)
            notes.append(f"--dataset {args.dataset}: lengths from {source}")
        else:
            prompt = LengthDist.parse(args.prompt_tokens or "4096", "--prompt-tokens")
            output = LengthDist.parse(args.output_tokens or "512", "--output-tokens")
        requests = poisson_requests(args.rate, args.requests or 1000, prompt, output, args.seed)
    if args.trace and blocks is not None:
        requests, note = _trace_blocks(args, requests, blocks)
        notes.append(note)
    if args.session_turns > 1 and args.prefix:
        raise SpecError("--prefix: sessions (--session-turns) already share their conversation; give one or the other")
    if args.session_turns > 1:
        notes += _session_notes(args, len(requests))
        requests, _ = sessions(requests, args.session_turns)
    elif args.prefix:
        requests, _ = parse_prefix(args.prefix, requests, args.seed)
    return requests, slo, notes


def _trace_blocks(args: argparse.Namespace, requests, blocks):
    """A Mooncake trace's hash_ids as the prompts' shared blocks (serving.prefix.hash_blocks), where the run can
    replay them: not beside --prefix or --session-turns (each says what is shared), nor under --disaggregate (its
    pools run without a prefix cache); the note says which."""
    from roofline.errors import SpecError
    from roofline.serving.prefix import MOONCAKE_BLOCK_TOKENS, hash_blocks

    if args.prefix or args.session_turns > 1:
        flag = "--prefix" if args.prefix else "--session-turns"
        raise SpecError(f"{flag}: the trace's hash_ids already say which prompt blocks are shared; give one or the "
                        "other")
    if args.disaggregate:
        return requests, "--trace: its hash_ids are not replayed under --disaggregate (no prefix cache in the pools)"
    out, tree = hash_blocks(requests, blocks)
    if tree is None:
        return requests, "--trace: its rows have no hash_ids: no prefix is shared"
    return out, (f"--trace: its hash_ids replayed as {len(tree.parent):,} shared blocks of {MOONCAKE_BLOCK_TOKENS} "
                 "tokens")


def length_fields(args: argparse.Namespace) -> tuple[str, str]:
    """The flags that set a request's prompt and output lengths, as a too-long request's error names them."""
    source = "--trace" if args.trace else "--dataset" if args.dataset else None
    prompt, output = source or "--prompt-tokens", source or "--output-tokens"
    if args.session_turns > 1:
        prompt = "--session-turns"  # a later turn's prompt holds the whole conversation so far
    elif args.prefix:
        prompt = f"{prompt} + --prefix"
    return prompt, output


def _session_notes(args: argparse.Namespace, n: int) -> list[str]:
    """How requests became sessions (serving.prefix.sessions), where it is not what a reader would assume."""
    turns, notes = args.session_turns, []
    if args.trace:
        notes.append(f"--session-turns {turns}: consecutive trace rows (by arrival) are the turns of one session; a "
                     "later turn's prompt is the conversation so far plus its row's prompt_tokens, sent think time "
                     "after the answer (its row's arrival time is not used)")
    if n % turns:
        full = n // turns
        notes.append(f"--session-turns {turns}: {n:,} requests make {full:,} session{'s' * (full != 1)} of {turns} "
                     f"turns and one of {n % turns}")
    return notes
