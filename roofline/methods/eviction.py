"""Token eviction (H2O, Keyformer, StreamingLLM-style sinks + recent): the cache keeps at most a budget of
tokens per layer, either a fixed count or a fraction of the context. H2O and Keyformer accumulate a
score per (KV head, token) to choose what to evict: fp32, resident, read and rewritten every step.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, PositiveInt, model_validator

from roofline.kv.builder import Extras, standard_cache
from roofline.kv.layout import CacheModel
from roofline.lazy import sp
from roofline.methods.base import MethodConfig, preset
from roofline.specs import Model
from roofline.units import ceildiv

SCORE_BYTES = 4


class Eviction(MethodConfig):
    """Token eviction (H2O, Keyformer, StreamingLLM-style): each layer keeps at most `budget_tokens`, or
    ceil(budget_ratio·L), unquantized tokens; H2O and Keyformer add fp32 per-(KV head, token) scores."""
    method: ClassVar[str] = "evict"
    family: ClassVar[str] = "eviction"
    summary: ClassVar[str] = "keep a budget of tokens (heavy hitters + recent), evict the rest"

    policy: Literal["h2o", "keyformer", "streaming"] = Field("h2o", description="Eviction policy.")
    budget_tokens: PositiveInt | None = Field(None, description="Tokens kept per layer (fixed budget).")
    budget_ratio: float | None = Field(None, gt=0, le=1, description="Fraction of the context kept.")

    @model_validator(mode="after")
    def _one_budget(self) -> Eviction:
        if (self.budget_tokens is None) == (self.budget_ratio is None):
            raise ValueError("budget_tokens: give exactly one of budget_tokens and budget_ratio")
        return self

    def token_budget(self) -> sp.Expr:
        """Tokens kept per layer and sequence: `budget_tokens`, or ceil(L·budget_ratio), exact."""
        from roofline.units import L
        if self.budget_tokens is not None:
            return sp.Integer(self.budget_tokens)
        ratio = sp.nsimplify(self.budget_ratio, rational=True)
        return ceildiv(L * ratio.p, ratio.q)

    def kept_tokens(self, context: int) -> int:
        """Tokens a sequence of `context` keeps per layer: min(budget_tokens, context), or ceil(context x
        budget_ratio)."""
        if self.budget_tokens is not None:
            return min(self.budget_tokens, context)
        ratio = sp.nsimplify(self.budget_ratio, rational=True)
        return min(context, -(-context * int(ratio.p) // int(ratio.q)))

    def limits(self, model: Model, probe) -> dict:
        """`kept_tokens`: the tokens of the plan's context each layer keeps (what attention sees); the plan's answer
        says so when an eviction row is the best (report.answer.headline)."""
        return {"kept_tokens": self.kept_tokens(probe.context)}

    def plan_notes(self, model: Model, probe, data: dict) -> list[str]:
        """An evicting row's memory and speed are those of a cache of kept_tokens per layer: it says how much of the
        context attention no longer sees (its accuracy cost is not modelled here: the seed papers' figures are in
        `roofline claims`)."""
        kept, context = self.kept_tokens(probe.context), probe.context
        if kept >= context:
            return []
        return [f"evicts: keeps {kept:,} of the {context:,} tokens per layer ({kept / context:.1%}; {self.policy} "
                f"chooses which), so attention sees only those; its fit and speed are of that smaller cache and its "
                f"accuracy cost is not modelled"]

    def extras(self, model: Model) -> Extras:
        """Score bookkeeping: H2O and Keyformer keep one fp32 score per KV head and token, 4·H_kv bytes per
        token and layer (one head for an MLA latent); 'streaming' keeps none."""
        heads = 1 if model.mla is not None else model.num_kv_heads
        scored = self.policy in ("h2o", "keyformer")
        return Extras(score_bytes_per_token=heads * SCORE_BYTES if scored else 0)

    def cache(self, model: Model, bits: sp.Expr | None = None) -> CacheModel:
        """The model's own unquantized K and V (or MLA latent), at most `token_budget` tokens per layer,
        plus the score bytes of `extras`; `bits` replaces the 16-bit width (sweeps)."""
        return standard_cache(self.method, model, None, bits, token_budget=self.token_budget(),
                              extras=self.extras(model))


PRESETS = (
    preset("h2o-2048", "evict", "H2O: 2,048 tokens kept per layer, fp32 scores", policy="h2o", budget_tokens=2048),
    preset("keyformer-50", "evict", "Keyformer keeping half the context", policy="keyformer", budget_ratio=0.5),
)
