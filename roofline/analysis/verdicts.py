"""What a claim is and how a verdict reads: the Claim record, the four verdicts, the tolerances, the seed files,
and the helpers every paper's checks share (datasheet devices, tiered verdicts, asymptotic bits)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.ceiling_sources import with_ceilings
from roofline.lazy import sp
from roofline.methods import build_cache, parse_method

HOLDS, QUALIFIED, FAILS, UNCHECKABLE = (
    "holds", "holds only under stated assumptions", "does not hold", "not checkable by the model")
VERDICTS = (HOLDS, QUALIFIED, FAILS, UNCHECKABLE)
SEEDS = {"xquant": "000_a607c3ad204fc52b.txt", "aquakv": "001_6a95a518950107cd.txt",
         "innerq": "002_74442fd528a9c58d.txt", "zack": "003_7ecb4415d61e84e3.txt", "skvq": "004_3b18b267e69fb508.txt"}
SPEEDUP_REL = 0.05  # "up to 7x", "2x": a claimed factor is met within 5%
FACTOR_REL = 0.01  # XQuant's memory factors: within 1% of the exact ratio
RATE_ABS = 0.005  # ZACK's compression rates are printed to 2 decimals


@dataclass(frozen=True)
class Claim:
    """One headline claim: its quote (paper, section, statement, unit, assumptions), a `compute` returning the
    values the verdict needs (`computed` among them) and a `judge` mapping them to (verdict, one-sentence detail)."""
    id: str
    paper: str
    section: str
    statement: str
    unit: str
    assumptions: str
    compute: Callable[[], dict[str, Any]]
    judge: Callable[[dict[str, Any]], tuple[str, str]]



def datasheet_hardware(name: str):
    """A catalogue device with datasheet ceilings only (roofline.catalogue.ceiling_sources.with_ceilings): the papers'
    claims are computed from the figures the papers used, never from a measured section (which the planner
    uses by default)."""
    return with_ceilings(load_hardware(name), "datasheet")

def tiered(full_model: bool, paper_convention: bool) -> str:
    """HOLDS if the full model meets the claim, QUALIFIED if only the paper's convention does, else FAILS."""
    return HOLDS if full_model else QUALIFIED if paper_convention else FAILS


def preset_bits(spec: str, model: str) -> sp.Expr:
    """Asymptotic bits per cached element of method SPEC on catalogue model `model`."""
    return build_cache(parse_method(spec), load_model(model)).asymptotic_bits()


