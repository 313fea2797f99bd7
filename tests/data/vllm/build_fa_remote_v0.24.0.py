# vLLM 0.24.0, vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py lines 1308-1364, verbatim
# (NixlConnectorWorker._build_fa_remote; Apache-2.0, https://github.com/vllm-project/vllm): the function
# validate/engines/handshake_layout.py mirrors, kept here so tests/lab/test_handshake_probe.py checks it on any machine.
# source file sha256 39b88fc8ba9be0d9918ddb49929a8826b6ef5c505047ca321e120b4e89d00a9d
# ruff: noqa
def _build_fa_remote(
    self,
    plan: TPMapping,
    nixl_agent_meta: NixlAgentMetadata,
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
