"""What handshake_probe.py builds and times, without NIXL or torch: a remote pool laid out as vLLM 0.24's (Case),
vLLM's metadata structs, and its _build_fa_remote verbatim (VllmWorkerMirror); the probe's settings, order and
summary. The probe's docstring says what each part is and cites vLLM's lines."""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass

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
