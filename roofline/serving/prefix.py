"""Prefix caching: shared prompt content as a tree of token segments, and the pool's cache of its pages.

Workload (PrefixTree): node k is a segment of `length[k]` tokens starting at token `start[k]` of every sequence
whose path runs through it (its parent's segment ends where it starts). Request i's sequence begins with the content
of the path from a root to its node `leaf[i]`, for its first `shared[i]` tokens. Builders: `system_prompts` (K roots
of S tokens, prepended to every prompt), `hit_rate` (one root: request i shares floor(h x prompt_i) tokens),
`prefix_tree` (levels of fan-out and length, e.g. 4 templates x 8 few-shot sets) and `sessions` (a chat: turn j's
prompt is turn j - 1's prompt and answer plus the new user message; each turn is a child of the last).

The cache of their pages: serving.prefix_cache.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from roofline.errors import SpecError
from roofline.serving.requests import Requests


@dataclass(frozen=True)
class PrefixTree:
    """Shared content: nodes (parent, start, length) and per request its deepest node and shared tokens."""

    parent: np.ndarray
    start: np.ndarray
    length: np.ndarray
    leaf: np.ndarray
    shared: np.ndarray
    kind: str

    def path(self, node: int) -> list[int]:
        """Nodes from the root to `node`."""
        out = []
        while node >= 0:
            out.append(node)
            node = int(self.parent[node])
        return out[::-1]


def _tree(parent, start, length, leaf, shared, kind: str) -> PrefixTree:
    a = (np.asarray(x, dtype=np.int64) for x in (parent, start, length, leaf, shared))
    return PrefixTree(*a, kind)


MAX_PREFIX_NODES = 1 << 20  # segments of a prefix workload: each is a row of PrefixCache's per-node arrays, and
# tree:1000x1000,1000x1000 (1,001,000 nodes) builds in seconds on the project's 2-core machine; 1e10 never ends


def _check_nodes(nodes: int, text: str) -> None:
    if nodes > MAX_PREFIX_NODES:
        raise SpecError(f"--prefix: {text} makes more than {MAX_PREFIX_NODES:,} shared segments, the most a run "
                        "holds (each request uses one path: more leaves than requests are never all used)")


def system_prompts(requests: Requests, tokens: int, count: int, seed: int) -> tuple[Requests, PrefixTree]:
    """Every prompt starts with one of `count` system prompts of `tokens` tokens (chosen uniformly)."""
    if tokens < 1 or count < 1:
        raise SpecError("--prefix: system:TOKENS[:COUNT] needs TOKENS >= 1 and COUNT >= 1")
    _check_nodes(count, f"system:{tokens}:{count}")
    n = len(requests)
    pick = np.random.default_rng(seed + 1).integers(0, count, size=n)
    tree = _tree(np.full(count, -1), np.zeros(count), np.full(count, tokens), pick, np.full(n, tokens), "system")
    return replace(requests, prompt_tokens=requests.prompt_tokens + tokens, prefix=tree), tree


def hit_rate(requests: Requests, rate: float) -> tuple[Requests, PrefixTree]:
    """One shared root: request i's first floor(rate x prompt_i) tokens are shared content."""
    if not 0 <= rate < 1:
        raise SpecError(f"--prefix: hit:{rate:g} needs a rate in [0, 1)")
    top = int(requests.prompt_tokens.max())
    shared = np.floor(rate * requests.prompt_tokens).astype(np.int64)
    tree = _tree([-1], [0], [top], np.zeros(len(requests)), shared, "hit")
    return replace(requests, prefix=tree), tree


def prefix_tree(requests: Requests, levels: list[tuple[int, int]], seed: int) -> tuple[Requests, PrefixTree]:
    """Levels of (fan-out, tokens): each request follows a uniformly chosen root-to-leaf path; its prompt is the
    path's content followed by its own tokens."""
    if not levels or any(f < 1 or t < 1 for f, t in levels):
        raise SpecError("--prefix: tree:FxT[,FxT...] needs fan-outs and token counts >= 1")
    nodes, width = 0, 1
    for fan, _ in levels:  # stops growing once past the limit (no huge products)
        width = min(width * fan, MAX_PREFIX_NODES + 1)
        nodes = min(nodes + width, MAX_PREFIX_NODES + 1)
    _check_nodes(nodes, "tree:" + ",".join(f"{f}x{t}" for f, t in levels))
    parent, start, length = [], [], []
    frontier = [(-1, 0)]
    for fan, tokens in levels:
        nxt = []
        for node, end in frontier:
            for _ in range(fan):
                parent.append(node), start.append(end), length.append(tokens)
                nxt.append((len(parent) - 1, end + tokens))
        frontier = nxt
    leaves = np.array([node for node, _ in frontier])
    depth = sum(t for _, t in levels)
    pick = leaves[np.random.default_rng(seed + 2).integers(0, len(leaves), size=len(requests))]
    tree = _tree(parent, start, length, pick, np.full(len(requests), depth), "tree")
    return replace(requests, prompt_tokens=requests.prompt_tokens + depth, prefix=tree), tree


MOONCAKE_BLOCK_TOKENS = 512  # tokens per hash_id in Mooncake's traces: each request has ceil(input_length / 512)
# of them (kvcache-ai/Mooncake mooncake_trace.jsonl at d21da178: 6755 tokens -> 14 ids, 7319 -> 15, 2287 -> 5)


def hash_blocks(requests: Requests, blocks, block_tokens: int = MOONCAKE_BLOCK_TOKENS
                ) -> tuple[Requests, PrefixTree]:
    """Shared prompt blocks named by hash ids (Mooncake's hash_ids, one list per request in arrival order, or
    serving.trace_rules.BlockIds): a node per distinct chain of ids (a trie: the same id after a different chain is
    other content), each `block_tokens` long and starting where its parent ends, numbered in the order the chains
    first appear (request by request, root first); request i shares min(prompt_i, its ids x block_tokens) tokens."""
    from roofline.serving.trace_rules import BlockIds

    if isinstance(blocks, BlockIds) and len(blocks.ids) and int(blocks.lengths.max()) <= TRIE_LEVELS:
        parent, depth, leaf = _trie_by_levels(blocks)
        counts = blocks.lengths
    else:
        parent, leaf = _trie(blocks)
        depth = np.zeros(len(parent), dtype=np.int64)
        for k, up in enumerate(parent):  # parents come first (created before their children)
            depth[k] = depth[up] + 1 if up >= 0 else 1
        counts = np.array([len(ids) for ids in blocks], dtype=np.int64)
    start = (depth - 1) * block_tokens
    shared = np.minimum(requests.prompt_tokens, counts * block_tokens)
    leaf_or_root = np.where(leaf >= 0, leaf, 0)  # a request without ids shares nothing (shared 0)
    if not len(parent):
        return requests, None
    tree = _tree(parent, start, np.full(len(parent), block_tokens), leaf_or_root, shared, "hash_ids")
    return replace(requests, prefix=tree), tree


TRIE_LEVELS = 256  # ids per row up to which the trie is built a level at a time (8192-token prompts have 16)


def _trie(blocks) -> tuple[list[int], np.ndarray]:
    """(parent of each node, each request's deepest node or -1) of hash-id chains, one request at a time."""
    parent: list[int] = []
    children: dict[tuple[int, int], int] = {}
    leaf = np.full(len(blocks), -1, dtype=np.int64)
    for i, ids in enumerate(blocks):
        node = -1
        for h in ids:
            key = (node, h)
            if key not in children:
                children[key] = len(parent)
                parent.append(node)
                _check_nodes(len(parent), "the trace's hash_ids")
            node = children[key]
        leaf[i] = node
    return parent, leaf


def _trie_by_levels(blocks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_trie's nodes, numbered as it numbers them, and their depths, built a level (an id position) at a time: at
    level d the distinct (node at d - 1, id) pairs of the requests with more than d ids are the level's nodes, each
    first met by the lowest such request; _trie creates nodes in (that request, d) order."""
    lengths, n = blocks.lengths, len(blocks)
    node = np.full(n, -1, dtype=np.int64)  # each request's node so far, as a level-major number
    parents, firsts, depths = [], [], []
    made = 0
    for d in range(int(lengths.max())):
        rows = np.flatnonzero(lengths > d)
        up, ids = node[rows], blocks.ids[blocks.offsets[rows] + d]
        order = np.lexsort((rows, ids, up))  # by (parent, id), lowest request first
        new = np.ones(len(order), dtype=bool)
        new[1:] = (up[order][1:] != up[order][:-1]) | (ids[order][1:] != ids[order][:-1])
        group = np.cumsum(new) - 1
        node[rows[order]] = made + group
        parents.append(up[order][new])
        firsts.append(rows[order][new])
        depths.append(np.full(int(new.sum()), d + 1, dtype=np.int64))
        made += int(new.sum())
        _check_nodes(made, "the trace's hash_ids")
    parent, first, depth = (np.concatenate(x) for x in (parents, firsts, depths))
    created = np.lexsort((depth, first))  # _trie's creation order
    rank = np.empty(made, dtype=np.int64)
    rank[created] = np.arange(made)
    parent = np.where(parent >= 0, rank[np.maximum(parent, 0)], -1)[created]
    leaf = np.where(lengths > 0, rank[np.maximum(node, 0)], -1)
    return parent, depth[created], leaf


def sessions(requests: Requests, turns: int) -> tuple[Requests, PrefixTree]:
    """Chats of `turns` turns (requests kT .. kT + T - 1): turn j's prompt = turn j - 1's prompt + answer + its own
    drawn prompt (the new message); each turn's node extends the last turn's by its whole sequence."""
    prompt = requests.prompt_tokens.copy()
    out = requests.output_tokens
    n = len(prompt)
    parent, start, length = np.full(n, -1), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for i in range(n):
        if i % turns:
            prompt[i] += prompt[i - 1] + out[i - 1]
            parent[i], start[i] = i - 1, prompt[i - 1] + out[i - 1]
        length[i] = prompt[i] + out[i] - start[i]
    tree = _tree(parent, start, length, np.arange(n), prompt + out, "sessions")
    return replace(requests, prompt_tokens=prompt, prefix=tree), tree


def parse_prefix(text: str, requests: Requests, seed: int) -> tuple[Requests, PrefixTree]:
    """--prefix system:TOKENS[:COUNT] | hit:RATE | tree:FxT[,FxT...]."""
    kind, _, rest = text.partition(":")
    try:
        if kind == "system":
            parts = [int(x) for x in rest.split(":")]
            if len(parts) in (1, 2):
                return system_prompts(requests, parts[0], parts[1] if len(parts) == 2 else 1, seed)
        elif kind == "hit":
            return hit_rate(requests, float(rest))
        elif kind == "tree":
            levels = [tuple(int(x) for x in lvl.split("x")) for lvl in rest.split(",")]
            if all(len(lvl) == 2 for lvl in levels):
                return prefix_tree(requests, levels, seed)
    except SpecError:
        raise
    except ValueError:
        pass
    raise SpecError(f"--prefix: {text!r} is not a prefix workload: use system:TOKENS[:COUNT], hit:RATE or "
                    "tree:FxT[,FxT...]")


def own_pages(n: int) -> PrefixTree:
    """The tree of `n` requests that share nothing (kind 'own'): one root of no tokens on every path, none shared. A
    cache of it holds only the requests' own full pages (PrefixCache's spent runs): what a preempted request's
    re-admission can hit (PrefixCache.own_hit)."""
    return _tree([-1], [0], [0], np.zeros(n), np.zeros(n), "own")


def cache_tree(engine, requests: Requests, preloaded=None) -> PrefixTree | None:
    """The tree a run's prefix cache keeps, or None when it keeps none: under an engine with prefix caching on, the
    workload's shared content (requests.prefix) or, where there is none and the engine's cache holds every request's
    own pages (EngineScheduling.own_pages: vLLM V1), own_pages, so that a preempted request's re-admission recomputes
    only what allocations took of its pages since. A run whose requests bring preloaded KV (serving.disagg's decode
    pool) keeps no cache of its own pages: its preempted requests recompute as before."""
    if not engine.prefix_caching:
        return None
    if requests.prefix is not None:
        return requests.prefix
    return own_pages(len(requests)) if engine.own_pages and preloaded is None else None
