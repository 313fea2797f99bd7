"""A fresh disaggregated vLLM pair's first NIXL handshake at several remote pool sizes, two processes on ONE GPU
(roofline/engines/timing.py mechanism 13).

What vLLM 0.24's decode worker does when it first meets a prefill engine
(vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py@v0.24.0), each part timed apart here:
- meta: _nixl_handshake asks the remote's side channel over a ZMQ REQ socket (:559-572; the remote answers from bytes
  encoded at start on a ROUTER socket, base_scheduler.py:289-321) and decodes NixlHandshakePayload, then
  NixlAgentMetadata with msgspec (:575-625);
- add: add_remote_agent's NIXL call, nixl_wrapper.add_remote_agent(agent_metadata) (:1491-1493: loadRemoteMD);
- build: one (address, length, device) tuple per (layer region, K|V, block) of the remote's WHOLE pool in Python,
  _build_fa_remote (:1308-1364), mirrored verbatim below (VllmWorkerMirror);
- descs: nixl_wrapper.get_xfer_descs(blocks_data, "VRAM") (:1582);
- prep: nixl_wrapper.prep_xfer_dlist(remote_agent_name, descs) (:1583-1585).
The rest of add_remote_agent (TransferTopology and TP-mapping bookkeeping, the compatibility check) is a few
attribute writes, not timed.

The pool is vLLM 0.24's FlashAttention one (HND, blocks first: flash_attn.py get_kv_cache_shape (num_blocks, 2, 16,
heads, head_dim)): one registered region per layer of num_blocks x page bytes (register_kv_caches :927-1132; one
cache per layer since split_k_and_v is off for a blocks-first layout, kv_connector/utils.py:511-515, 597-620), and
_build_fa_remote emits a K and a V descriptor of page / 2 per block of each region (virtually_split_kv_in_blocks).
Llama-3.1-8B: 32 regions, page 2 x 16 x 8 x 128 x 2 = 65,536 bytes (run 17's decode log: remote_block_len=65536),
its 839,648-token pool (0.85 of an H200) 52,478 blocks: 3,358,592 descriptors. The default cases are 1/8, 1/4 and
1/2 of that pool at its page and the whole pool's blocks at half the page (4 KV heads' blocks: 51.2 GiB, under the
~60 GiB the remote may register beside the rest of a kit; a descriptor's bytes are not read by any timed part).

Every (rep, case) is a fresh pair: the remote registers that case's pool (separate allocations, as vLLM's per-layer
KV tensors) and publishes its metadata; the local side creates a fresh agent as vLLM does (uuid name, num_threads
4, telemetry on: base_worker.py:319-331) with the process's heap frozen as the engine core's is
(vllm/utils/gc_utils.py:96-108, v1/engine/core.py:232), then times the handshake in its main thread. Cases rotate
across reps, so a host that changes speed mid-run does not load one size. `calib_s` beside each rep: a fixed
100,000-tuple build, the host's Python speed at that moment. After the timing (not in it) one READ of the last
descriptor checks the addresses against a byte pattern the remote wrote there (read_ok).

Usage: python3 -m validate.engines.handshake_probe OUT_JSON [--dry]   (from the repo root; processes: handshake_pair.py)
  HS_CASES   blocks:page_bytes,...  (default 6560:65536,13120:65536,26239:65536,52478:32768)
  HS_LAYERS  regions (32)    HS_REPS  reps per case (5)    HS_BUDGET_S  stop starting reps past this (100)
  HS_MEM     VRAM (default; torch, GPU 0 for both processes) or DRAM (numpy: a CPU-only check of the logic)
--dry prints the plan (no torch, no NIXL). OUT_JSON is rewritten after every rep, so a killed run keeps its reps.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

LLAMA_8B_POOL_BLOCKS = 52_478  # run 17's decode log: "GPU KV cache size: 839,648 tokens", blocks of 16
BLOCK_TOKENS = 16
DEFAULT_CASES = "6560:65536,13120:65536,26239:65536,52478:32768"
GET_META_MSG = b"get_meta_msg"  # nixl/metadata.py@v0.24.0:21
CALIB_TUPLES = 100_000


def page_bytes(kv_heads: int, head_dim: int, dtype_bytes: int = 2, block_tokens: int = BLOCK_TOKENS) -> int:
    """Bytes of one block of one layer's region, K and V (vLLM's page_size_bytes for a full-attention layer)."""
    return 2 * block_tokens * kv_heads * head_dim * dtype_bytes


@dataclass(frozen=True)
class Case:
    """One remote pool: `blocks` blocks of `page` bytes in each of `layers` regions."""

    blocks: int
    page: int
    layers: int = 32

    @property
    def descriptors(self) -> int:
        """What _build_fa_remote emits: a K and a V descriptor per (region, block)."""
        return self.layers * 2 * self.blocks

    @property
    def registered_bytes(self) -> int:
        return self.layers * self.blocks * self.page

    def plan(self) -> dict:
        return {"blocks": self.blocks, "page_bytes": self.page, "layers": self.layers,
                "descriptors": self.descriptors, "descriptor_bytes": self.page // 2,
                "pool_tokens": self.blocks * BLOCK_TOKENS, "registered_gib": self.registered_bytes / 2 ** 30,
                "of_llama_8b_pool": self.descriptors / (2 * 32 * LLAMA_8B_POOL_BLOCKS)}


def parse_cases(text: str, layers: int) -> tuple[Case, ...]:
    """HS_CASES: 'blocks:page_bytes,...', each a positive block count and an even positive page."""
    cases = []
    for item in text.split(","):
        try:
            blocks, page = (int(x) for x in item.split(":"))
        except ValueError:
            raise ValueError(f"HS_CASES: {item!r} is not blocks:page_bytes") from None
        if blocks < 1 or page < 2 or page % 2:
            raise ValueError(f"HS_CASES: {item!r} needs blocks >= 1 and an even page_bytes >= 2")
        cases.append(Case(blocks, page, layers))
    return tuple(cases)


@dataclass
class NixlAgentMetadata:
    """vLLM's metadata struct (nixl/metadata.py@v0.24.0:46-58), encoded and decoded the same way."""

    engine_id: str
    agent_metadata: bytes
    kv_caches_base_addr: list[int]
    device_id: int
    num_blocks: int
    block_lens: list[int]
    kv_cache_layout: str
    block_size: int
    ssm_sizes: tuple[int, int]
    attn_backend_name: str
    physical_blocks_per_logical_kv_block: int


@dataclass
class NixlHandshakePayload:
    """nixl/metadata.py@v0.24.0:61-76."""

    compatibility_hash: str
    agent_metadata_bytes: bytes


@dataclass(frozen=True)
class _Plan:
    """The TP mapping of a tp 1 / tp 1 pair (nixl/tp_mapping.py@v0.24.0:111-141): one source rank, no offset."""

    source_ranks_per_group: tuple = ((0,),)
    rank_offset_factor: int = 0


class _Topology:
    """TransferTopology of a blocks-first FlashAttention cache (kv_connector/utils.py@v0.24.0:432-508)."""

    virtually_split_kv_in_blocks = True


def _is_attention_spec(spec_type) -> bool:
    return spec_type == "FullAttentionSpec"


class VllmWorkerMirror:
    """The state _build_fa_remote reads from the decode worker (base_worker.py@v0.24.0), for a homogeneous pair
    of a full-attention model: the local pool's block lengths equal the remote's."""

    def __init__(self, block_lens: list[int]) -> None:
        self.transfer_topo = _Topology()
        self._group_spec_types = ["FullAttentionSpec"]
        self.block_len_per_layer = list(block_lens)
        self._region_is_mla = [False] * len(block_lens)

    def _is_region_replicated(self, region_idx: int) -> bool:
        # base_worker.py:223-231
        return region_idx < len(self._region_is_mla) and self._region_is_mla[region_idx]

    def get_backend_aware_kv_block_len(self, layer_idx: int, first_split: bool = True, mamba_view: bool = False):
        # base_worker.py:2250-2290 (no mamba view here)
        virtually_split = self.transfer_topo.virtually_split_kv_in_blocks
        half_block = virtually_split and not self._is_region_replicated(layer_idx)
        return self.block_len_per_layer[layer_idx] // (2 if half_block else 1)

    # base_worker.py@v0.24.0:1308-1364, verbatim (tests/lab/test_handshake_probe.py compares the two ASTs)
    def _build_fa_remote(
        self,
        plan,
        nixl_agent_meta,
        block_size_ratio: int,
    ) -> list[tuple[int, int, int]]:
        """Build remote FA descriptors for all layers."""
        assert self.transfer_topo is not None
        fa_group_idx = next(
            i for i, t in enumerate(self._group_spec_types) if _is_attention_spec(t)
        )
        # SPLIT regions read their head slice from this many remote ranks at a
        # per-rank offset; REPLICATE regions read the whole block once.
        split_reads = len(plan.source_ranks_per_group[fa_group_idx])
        num_blocks = nixl_agent_meta.num_blocks
        result: list[tuple[int, int, int]] = []
        for i, base_addr in enumerate(nixl_agent_meta.kv_caches_base_addr):
            replicated = self._is_region_replicated(i)
            # Read our whole local region size from remote..
            local_block_len = self.get_backend_aware_kv_block_len(
                layer_idx=i, first_split=True, mamba_view=False
            )
            remote_kv_block_len = local_block_len // block_size_ratio
            if block_size_ratio > 1:
                # ..using remote kv_block_len as transfer unit
                local_block_len = remote_kv_block_len

            # REPLICATE reads the whole block once at offset 0; SPLIT gathers
            # its head slice from `split_reads` remote ranks at a per-rank offset.
            num_reads = 1 if replicated else split_reads
            rank_offset = (
                0 if replicated else plan.rank_offset_factor * remote_kv_block_len
            )
            local_block_len = local_block_len // num_reads

            page_size = nixl_agent_meta.block_lens[i]
            for block_id in range(num_blocks):
                block_offset = block_id * page_size
                # For each block, grab the kv heads chunk belonging to current local
                # tp rank of size local_block_len.
                addr = base_addr + block_offset + rank_offset
                result.append((addr, local_block_len, nixl_agent_meta.device_id))

            emits_v = self.transfer_topo.virtually_split_kv_in_blocks and not replicated
            if emits_v:
                # With FlashInfer index V separately to allow head splitting.
                second_split = self.get_backend_aware_kv_block_len(
                    layer_idx=i, first_split=False, mamba_view=False
                )
                second_split = second_split // num_reads
                for block_id in range(num_blocks):
                    block_offset = block_id * page_size
                    addr = base_addr + block_offset + rank_offset
                    # Hop over the first split of remote page, K, to read V.
                    v_addr = addr + nixl_agent_meta.block_lens[i] // 2
                    result.append((v_addr, second_split, nixl_agent_meta.device_id))
        return result


def build_fa_remote(meta: NixlAgentMetadata) -> list[tuple[int, int, int]]:
    """vLLM's descriptor list of a remote pool described by `meta` (tp 1 / tp 1, same block size: ratio 1)."""
    return VllmWorkerMirror(meta.block_lens)._build_fa_remote(_Plan(), meta, 1)


def pool_metadata(case: Case, bases: list[int], device: int, agent_metadata: bytes) -> NixlAgentMetadata:
    """The metadata a prefill worker publishes for `case`'s pool (register_kv_caches, base_worker.py:1150-1165)."""
    return NixlAgentMetadata(engine_id="probe-prefill", agent_metadata=agent_metadata, kv_caches_base_addr=bases,
                             device_id=device, num_blocks=case.blocks, block_lens=[case.page] * case.layers,
                             kv_cache_layout="HND", block_size=BLOCK_TOKENS, ssm_sizes=(0, 0),
                             attn_backend_name="FLASH_ATTN", physical_blocks_per_logical_kv_block=1)


def calibrate() -> float:
    """Seconds of a fixed build of CALIB_TUPLES tuples, _build_fa_remote's inner statement: the host's speed now."""
    t0 = time.perf_counter()
    result, base, dev = [], 1 << 40, 0
    for block_id in range(CALIB_TUPLES):
        result.append((base + block_id * 65536, 32768, dev))
    return time.perf_counter() - t0


def read_env() -> dict:
    """The probe's settings from its environment (module docstring), one-line errors naming the variable."""
    layers = int(os.environ.get("HS_LAYERS", "32"))
    reps = int(os.environ.get("HS_REPS", "5"))
    budget = float(os.environ.get("HS_BUDGET_S", "100"))
    mem = os.environ.get("HS_MEM", "VRAM")
    if layers < 1 or reps < 1 or not budget > 0:
        raise ValueError("HS_LAYERS, HS_REPS, HS_BUDGET_S: each must be positive")
    if mem not in ("VRAM", "DRAM"):
        raise ValueError(f"HS_MEM: {mem!r} is not VRAM or DRAM")
    return {"cases": parse_cases(os.environ.get("HS_CASES", DEFAULT_CASES), layers), "reps": reps,
            "budget_s": budget, "mem": mem, "num_threads": int(os.environ.get("HS_NUM_THREADS", "4"))}


def order(n_cases: int, rep: int) -> list[int]:
    """The cases' order in rep `rep`: rotated by one each rep."""
    return [(rep + k) % n_cases for k in range(n_cases)]


def summarize(reps: list[dict]) -> list[dict]:
    """Per case (descriptors, page): the median of each part over its reps."""
    keys = ("meta_s", "add_s", "build_s", "descs_s", "prep_s", "handshake_s", "calib_s")
    out = []
    for d, page in sorted({(r["descriptors"], r["page_bytes"]) for r in reps}):
        rows = [r for r in reps if r["descriptors"] == d and r["page_bytes"] == page]
        out.append({"descriptors": d, "page_bytes": page, "reps": len(rows),
                    **{k: statistics.median(r[k] for r in rows) for k in keys}})
    return out



def main(argv: list[str]) -> int:
    t_start = time.perf_counter()
    args = [a for a in argv if a != "--dry"]
    if len(args) != 1 and "--dry" not in argv:
        print("usage: python3 -m validate.engines.handshake_probe OUT_JSON [--dry]", file=sys.stderr)
        return 2
    try:
        env = read_env()
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    if "--dry" in argv:
        print(json.dumps({"mem": env["mem"], "reps": env["reps"], "budget_s": env["budget_s"],
                          "num_threads": env["num_threads"], "order_rep0": order(len(env["cases"]), 0),
                          "cases": [c.plan() for c in env["cases"]]}, indent=1))
        return 0
    from validate.engines.handshake_pair import run

    return run(Path(args[0]), env, t_start)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
