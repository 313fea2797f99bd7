"""Closed-form limits, the seed papers' claims (computation and verdict), quality figures, KV reports."""
