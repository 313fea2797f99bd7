"""How far to trust the numbers of a dashboard page, in one caption beside them (roofline.trust underneath).

Every page that shows a number calls `page_caption(page, hardware, workload, model)`: the ceilings' source (measured /
calibrated / derived / estimated / datasheet, with the datasheet line for a datasheet-only device) and the band the
committed validation supports for each quantity the page shows (PAGE_QUANTITIES): the real decoders by default, the
real engine's runs and the published runs under a validated engine (vLLM), "not validated" where nothing covers it.
The Validation page's `bands_rows` lists every band the reports support; the Claims page's `claim_cell` marks the
claims computed at datasheet figures. A new page (the serving fleet page) names its quantities in PAGE_QUANTITIES
or calls `page_caption` with `quantities=`.
"""

from __future__ import annotations

from typing import Any

QUANTITY_LABELS = {"decode_step": "TPOT and tok/s (decode step)", "prefill": "TTFT of the batch (prefill)",
                   "capacity": "max context / batch (capacity)", "ttft": "TTFT", "tpot": "TPOT",
                   "throughput": "output tok/s"}
PAGE_QUANTITIES = {
    "plan": ("decode_step", "prefill", "capacity"),
    "sweeps": ("decode_step", "capacity"),
    "compare": ("decode_step", "capacity"),
    "pareto": ("decode_step", "capacity"),
    "roofline": ("decode_step",),
    "serving": ("ttft", "tpot", "throughput"),
    "fleet": ("ttft", "tpot", "throughput"),
}
SERVING_PAGES = ("serving", "fleet")


def _engine(workload) -> str | None:
    return None if workload is None else getattr(workload, "engine", None)


def page_trust(page: str, hardware, workload=None, model=None,
               quantities: tuple[str, ...] | None = None) -> dict[str, Any]:
    """{"text": the ceilings' trust line, "bands": {quantity: band or None}, "quantities": the page's} for `page`
    on `hardware` (as the page plans with it) under the workload's engine and fusion level."""
    from roofline.trust import ceilings_trust, serving_trust

    engine = _engine(workload)
    if page in SERVING_PAGES:
        trust = serving_trust(hardware, engine or "ideal", model)
    else:
        trust = ceilings_trust(hardware, getattr(workload, "fusion", "typical") or "typical", engine, model)
    wanted = quantities or PAGE_QUANTITIES.get(page, ())
    # the bands say it all for measured or calibrated ceilings planned without a validated engine; otherwise the
    # trust line adds what matters (the datasheet gap, the published runs, the engine's runs, an unvalidated scheduler)
    said = trust["source"] in ("measured", "calibrated") and "engine_validation" not in trust \
        and page not in SERVING_PAGES
    return {"text": trust["text"], "source": trust["source"], "quantities": wanted,
            "bands": {q: trust["bands"].get(q) for q in wanted}, "more": None if said else trust["text"]}


def page_caption(page: str, hardware, workload=None, model=None, quantities: tuple[str, ...] | None = None) -> str:
    """One caption: 'Trust (H200, measured): TPOT and tok/s (decode step) ±4.8 % (real decoders on H200, ...);
    ... — <the ceilings' trust line>'."""
    return _caption(page_trust(page, hardware, workload, model, quantities), hardware)


def _caption(t: dict[str, Any], hardware) -> str:
    """page_caption's text from page_trust's answer `t`."""
    from roofline.trust import fmt

    parts = [f"{QUANTITY_LABELS[q]} {fmt(b)}" + (f" ({b['basis']})" if b else "") for q, b in t["bands"].items()]
    head = f"Trust ({hardware.name}, {t['source']} ceilings)"
    more = t["more"]
    if not parts:
        return f"{head}: {t['text']}"
    return f"{head}: {'; '.join(parts)}" + (f". {more[0].upper()}{more[1:]}" if more else "")


def plan_caption_lines(plan_trust_text: str, hardware, workload=None, model=None) -> list[str]:
    """The Plan page's trust lines under its answer: the plan's own trust line ('trust: ...') and the page caption's
    bands, the caption without the trust line it would end with when that is the plan's own (under a validated
    engine, or on ceilings not measured or calibrated: page_trust's `more`), so the line shows once."""
    t = page_trust("plan", hardware, workload, model)
    if t["more"] == plan_trust_text:
        t = {**t, "more": None}
    return [f"trust: {plan_trust_text}", _caption(t, hardware)]


def bands_rows() -> list[dict[str, Any]]:
    """Every band the committed reports support: per device measured here, the real decoders (at typical fusion)
    and each real engine's runs (every model pooled; "one run" where a single report holds them), and the
    measurement's own spread where the same runs were repeated on two leases; per GPU group, the published engine
    runs (TPOT and output tok/s medians)."""
    from roofline.catalogue import hardware_names, load_hardware
    from roofline.trust import fmt
    from roofline.trust.bands import read_report, results_folder
    from roofline.trust.engines import public_groups, repeat_spreads
    from roofline.trust.quantities import ENGINE_NAMES, VALIDATED_ENGINES, decoder_quantities, engine_quantities, stem

    rows = []
    for name in hardware_names():
        hw = load_hardware(name)
        m = hw.measured
        if m is None or m.estimate or getattr(m, "kind", "measured") != "measured":
            continue
        dec = decoder_quantities(hw, "typical")
        file = dec["decode_step"] and dec["decode_step"]["file"]
        rows.append(_row(name, "real decoders (typical fusion)", dec, file))
        for engine in VALIDATED_ENGINES:
            bands, info = engine_quantities(hw, engine)
            if (own := info["own_run"]) is not None:
                one = ", one run" if own["reports"] == 1 else ""
                models = f"{len(own['models'])} model" + ("" if len(own["models"]) == 1 else "s")
                skipped = own.get("steps_not_judged", 0)
                left = f"; {skipped} timed steps not judged, each report says why" if skipped else ""
                rows.append(_row(name, f"{ENGINE_NAMES[engine]} ({models}{one}{left})", bands, own["files_text"]))
        for spread in repeat_spreads():
            if (own_stem := stem(hw)) and spread["file"].startswith(f"engines/{own_stem}-"):
                rows.append(_spread_row(name, spread))
    folder = results_folder()
    public = None if folder is None else folder / "engines" / "public-compare.txt"
    if public is not None and public.is_file():
        for group, q in public_groups(read_report(public)).items():
            tpot = q.get("TPOT median") or q.get("TPOT mean")
            rows.append({"device": group, "validation": "published vLLM runs (median)", "decode step": "-",
                         "prefill": "-", "capacity": "-", "TTFT": "-",
                         "TPOT": fmt(_as_band(tpot)) if tpot else "-",
                         "output tok/s": fmt(_as_band(q["out tok/s"])) if "out tok/s" in q else "-",
                         "report": "engines/public-compare.txt"})
    return rows


def _spread_row(device: str, spread: dict[str, Any]) -> dict[str, Any]:
    """The measurement's own spread (roofline.trust.engines.repeat_spreads) as a row: the same served runs on several
    leases, the largest difference per figure; no model in it."""
    pct = spread["spread_pct"]

    def cell(key: str) -> str:
        return f"{pct[key]:.1f} % apart" if key in pct else "-"

    what = f"the measurement itself: the same runs on several leases ({spread['what']})"
    return {"device": device, "validation": what,
            "decode step": "-", "prefill": "-", "capacity": "-", "TTFT": cell("ttft_p50"), "TPOT": cell("tpot_p50"),
            "output tok/s": cell("throughput"), "report": spread["file"]}


def _as_band(q: dict[str, Any]) -> dict[str, Any]:
    return {"median_ape_pct": q["median_ape_pct"], "median_signed_pct": q["median_signed_pct"]}


def _row(device: str, validation: str, bands: dict[str, Any], file: str | None) -> dict[str, Any]:
    from roofline.trust import fmt

    def cell(key: str) -> str:
        return fmt(bands.get(key)) if bands.get(key) else "-"

    return {"device": device, "validation": validation, "decode step": cell("decode_step"),
            "prefill": cell("prefill"), "capacity": cell("capacity"), "TTFT": cell("ttft"), "TPOT": cell("tpot"),
            "output tok/s": cell("throughput"), "report": file or "-"}


def claim_cell(row: dict[str, Any]) -> str:
    """The Claims table's trust cell: 'datasheet figures' for a time or a rate (roofline.trust.claim_trust), else
    'exact count' (bytes, bits, tokens: no ceiling involved)."""
    return "datasheet figures" if row.get("trust") else "exact count"
