"""What a KV cache stores: tensor layouts tagged by role, the one shared quantizer, the cache builder."""
