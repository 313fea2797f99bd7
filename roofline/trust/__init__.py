"""How far to trust a number: where its ceilings come from and the error band the committed validation supports.

Floor: below report/ and cli/, above planner/ and analysis/ (validation/ supplies the results folder). Every figure
is computed from the committed data (roofline.trust.bands reads the lab's compare reports; roofline.trust.source the
catalogue's measured sections against their datasheets), never typed in.

A number's trust has three parts:
- the ceilings: measured here / calibrated by the user / derived from a database / estimated from a sibling /
  datasheet only, with the real decoders' error where it was measured (decode and prefill bands);
- the method's kernels: the kernel cases timed for that method on the device, or "not validated" for a method no
  kernel case covers (it never borrows another family's error);
- per quantity (roofline.trust.quantities: decode step, prefill, capacity, serving TTFT / TPOT / throughput) the band
  of the validation that covers it: the real decoders by default, the real engine's own runs and the published
  runs under `--engine vllm`, SGLang's own runs under `--engine sglang` where they were committed (which then replace
  the decoders' bands and text: the engine is what is predicted).
"""

from __future__ import annotations

from typing import Any

from roofline.trust.bands import decoder_bands, kernel_bands, method_key, pooled_decoder_bands
from roofline.trust.engines import llamacpp_bands, llamacpp_text
from roofline.trust.quantities import (
    QUANTITIES,
    disaggregated_bands,
    disaggregated_text,
    engine_text,
    fmt,
    quantity_bands,
)
from roofline.trust.source import SOURCES, datasheet_gap, datasheet_line, measured_devices, source_kind

__all__ = ["QUANTITIES", "SOURCES", "ceilings_trust", "datasheet_gap", "datasheet_line", "fmt", "method_trust",
           "plan_trust", "serving_trust", "source_kind", "annotate_claims", "claim_trust"]


def _band_text(phase: str, b: dict[str, Any] | None) -> str:
    if not b:
        return f"{phase} not validated"
    return f"{phase} ±{b['median_ape_pct']:.1f} % (median; p90 {b['p90_ape_pct']:.1f} %, {b['cases']} steps)"


def ceilings_trust(hardware, fusion: str = "typical", engine: str | None = None, model=None) -> dict[str, Any]:
    """{"source", "decode", "prefill", "validated_on", "bands", "text"} for a device as the plan uses it (after
    with_ceilings): `_decoder_trust`'s, with the band of every quantity (`bands`); under a real engine its runs
    validate (vLLM, SGLang: quantities.quantity_bands), its bands replace the decoders' and the text cites its runs."""
    out = _decoder_trust(hardware, fusion)
    bands, engine_info = quantity_bands(hardware, fusion, engine, model)
    out["bands"] = bands
    if engine is not None:
        out["engine"] = engine
    if engine_info is not None:
        own = engine_info["own_run"]
        out["engine_validation"] = {"own_run": own and own["file"], "models": own and own["models"],
                                    "published": engine_info["published"] and engine_info["published"]["group"],
                                    "model_class": engine_info["model_class"]}
        out.update(decode=bands["decode_step"], prefill=bands["prefill"])
        out["text"] = f"{out['ceilings_text']}; under {engine}: {engine_text(hardware.name, engine_info)}"
    elif engine == "llamacpp" and (runs := llamacpp_bands()) is not None:
        out["text"] += f"; under llamacpp: {llamacpp_text(hardware.name, runs)}"
    elif engine is not None and engine != "ideal":
        out["text"] += f"; {engine}'s own step times: no real {engine} run validated here"
    return out


def serving_trust(hardware, engine: str, model=None, disaggregated: bool = False) -> dict[str, Any]:
    """ceilings_trust for `roofline simulate`'s figures (TTFT, TPOT, throughput): under an engine whose runs are
    committed (vLLM; SGLang on its device) the engine's runs (ceilings_trust's engine text); under any other scheduler
    the serving figures are not validated (no real run of it), and only the steps they are built from carry the real
    decoders' band. `disaggregated` (a --disaggregate
    run): the disaggregated pairs the engine's reports hold, their own band (a pair of servers is not one engine)."""
    out = ceilings_trust(hardware, "typical", engine, model)
    runs = llamacpp_bands() if engine == "llamacpp" else None
    if runs is not None:
        out["text"] = f"{out['ceilings_text']}; under llamacpp: {llamacpp_text(hardware.name, runs)}"
    elif out.get("engine_validation") is None:
        decode = out["bands"]["decode_step"]
        steps = f"its steps: decode {fmt(decode)} ({decode['basis']})" if decode else "its steps not validated"
        out["text"] = (f"{out['ceilings_text']}; serving figures (TTFT, TPOT, throughput) not validated under the "
                       f"{engine} scheduler (no real run of it committed); {steps}")
    if disaggregated:
        pairs = disaggregated_bands(hardware, engine)
        out["disaggregated"] = pairs
        out["text"] += ("; disaggregated pairs: " + disaggregated_text(pairs) if pairs
                        else f"; disaggregated pairs not validated under {engine} on {hardware.name}")
    return out


def _decoder_trust(hardware, fusion: str) -> dict[str, Any]:
    """{"source", "decode", "prefill", "validated_on", "text"}: the real decoders' error bands where this device's
    ceilings were measured, the devices measured here pooled for a calibration (same microbenchmarks, not validated
    on the user's device itself), nothing for a database-derived, estimated or datasheet-only section (each says
    why, and quotes the published engine runs on this GPU where there are some)."""
    kind = source_kind(hardware)
    m = hardware.measured
    head = _head(hardware, kind)
    out: dict[str, Any] = {"source": kind, "decode": None, "prefill": None, "validated_on": None,
                           "ceilings_text": head}
    if kind == "measured":
        bands = decoder_bands(m.client_source, fusion)
        if bands and (bands["decode"] or bands["prefill"]):
            out.update(decode=bands["decode"], prefill=bands["prefill"], validated_on=hardware.name,
                       models=bands["models"], file=bands["file"])
            text = (f"{head}; real decoders ({len(bands['models'])} models) on it: "
                    f"{_band_text('decode', bands['decode'])}, {_band_text('prefill', bands['prefill'])}")
        else:
            text = f"{head}; no real decoder validated on it"
    elif kind == "calibrated":
        devices = measured_devices()
        pooled = pooled_decoder_bands([c for _n, _s, c in devices if c], fusion)
        names = ", ".join(n for n, _s, _c in devices)
        if pooled:
            out.update(decode=pooled["decode"], prefill=pooled["prefill"], validated_on=names)
        text = (f"{head}; not validated on your device itself; with the same "
                f"microbenchmarks on {names or 'no device'}: {_band_text('decode', (pooled or {}).get('decode'))}")
    elif kind == "derived":
        text = f"{head}; not validated against real decoders on this device"
    elif kind == "estimated":
        text = f"{head}; not validated on this device"
    else:
        text = head
    out["text"] = text + _published_here(hardware, kind)
    return out


def _head(hardware, kind: str) -> str:
    """The ceilings' part of a trust text: where they come from (the datasheet line for datasheet-only)."""
    m = hardware.measured
    if kind == "measured":
        return "ceilings measured on this device"
    if kind == "calibrated":
        return f"ceilings calibrated by you ({m.source})"
    if kind == "derived":  # "aiconfigurator-core 0.12.0 (...), vllm 0.14.0 tables: <files>": the files stay in JSON
        return f"ceilings derived from a measured database ({m.source.split(': ', 1)[0]})"
    if kind == "estimated":
        origin = m.estimate.split(":", 1)[0]  # "estimate from H100-SXM, H200: rates at ..." (catalogue.ceilings)
        return f"ceilings not measured on this device: {origin} (their datasheet fractions carried over)"
    return datasheet_line()


def _published_here(hardware, kind: str) -> str:
    """'; published vLLM runs on A100-80GB: TPOT 44 % under ...' for an unmeasured device the published runs cover."""
    from roofline.trust.engines import public_bands
    from roofline.trust.quantities import published_text

    if kind == "measured":
        return ""
    published = public_bands(hardware.name)
    return f"; {published_text(published)}" if published and published["own_device"] else ""


def method_trust(spec: str, hardware) -> dict[str, Any]:
    """{"kernels": band + families + presets, or None; "text"} for the method `spec` on `hardware`: the kernel cases
    timed for its method where the device's ceilings were measured; "not validated" for a method none covers."""
    from roofline.methods import parse_method

    config = parse_method(spec)
    key = method_key(config)
    m = hardware.measured
    bands = kernel_bands(m.source) if m is not None and source_kind(hardware) == "measured" else {}
    b = bands.get(key)
    if b is None:
        where = "on this device" if bands else "here (no kernel measured on this device)"
        return {"kernels": None, "text": f"{key} kernels not validated {where}"}
    return {"kernels": b, "text": f"{key} kernels ±{b['median_ape_pct']:.1f} % ({b['cases']} cases)"}


# every real engine run committed here ran one pipeline stage (pp 1): a pp > 1 figure rests on mechanism 26 as read
# from the engines' source, timed by no run yet (validate/notes/2026-12-02-run28-pp.md)
PIPELINE_TEXT = ("pipeline parallelism (pp {pp}) not timed in any real engine here: its step is timing mechanism 26, "
                 "read from vLLM's and SGLang's source (run 28 on two GPUs: predicted, not yet run)")


def pipeline_caveat(trust: dict[str, Any], pp: int) -> dict[str, Any]:
    """`trust` with PIPELINE_TEXT appended to its text where pp > 1 (the bands it quotes were all measured at pp 1)."""
    if pp > 1:
        trust["text"] += "; " + PIPELINE_TEXT.format(pp=pp)
        trust["pipeline_validated"] = False
    return trust


def plan_trust(result: dict[str, Any], hardware, model=None) -> dict[str, Any]:
    """Adds `trust` to a plan result (the ceilings' source and the bands of every quantity, under the plan's engine)
    and to each row (its method's kernels, the bands of the row's decode step, prefill and capacity, and a short
    text for the table); returns the plan-level trust. A plan at pp > 1 says its pipeline is not timed here
    (pipeline_caveat)."""
    workload = result.get("workload", {})
    engine = workload.get("engine")
    trust = pipeline_caveat(ceilings_trust(hardware, result.get("fusion", "typical"), engine, model),
                            int(workload.get("pp", 1) or 1))
    result["trust"] = trust
    for row in result["results"]:
        bits = row.get("effective_bits")
        method = (method_trust(row["method"], hardware) if bits is not None and bits == bits else
                  {"kernels": None, "text": "state-space layers: no kernel of theirs timed, not validated"})
        row["trust"] = {"source": trust["source"], "decode_band_pct": _pct(trust["decode"]),
                        "kernels": method["kernels"], "kernels_text": method["text"],
                        "text": _row_text(trust, method), **row_bands(trust)}
    return trust


def row_bands(trust: dict[str, Any]) -> dict[str, Any]:
    """A row's per-quantity bands: {"prefill_band_pct", "capacity_band_pct", "bands": {quantity: median APE % or
    None}} (the plan-level `trust.bands` has their bases and files)."""
    bands = trust.get("bands", {})
    return {"prefill_band_pct": _pct(bands.get("prefill")), "capacity_band_pct": _pct(bands.get("capacity")),
            "bands": {q: _pct(bands.get(q)) for q in QUANTITIES}}


def _pct(b: dict[str, Any] | None) -> float | None:
    return b["median_ape_pct"] if b else None


def short(b: dict[str, Any] | None) -> str:
    """A band in a table cell: '±2%', '44% under', 'n/v'."""
    if not b:
        return "n/v"
    text = fmt(b)
    return f"±{b['median_ape_pct']:.0f}%" if text.startswith("±") else text.replace(" %", "%")


def _row_text(trust: dict[str, Any], method: dict[str, Any]) -> str:
    """The table's short trust cell: the ceilings' source and decode band (the engine's under a validated engine),
    and the kernels' state."""
    decode, engine = trust["decode"], trust.get("engine_validation")
    if engine is not None:
        head = f"{trust['source']}; {trust['engine']} {short(decode)}"
    else:
        head = trust["source"] + (f" ±{decode['median_ape_pct']:.0f}%" if decode else "")
    kern = method["kernels"]
    return head + ("; kern " + (f"±{kern['median_ape_pct']:.0f}%" if kern else "n/v"))


# The words of a claim's unit (its quote, roofline.analysis) that make its value a time or a rate: those values are
# computed at datasheet ceilings (the papers' own figures: analysis.verdicts.datasheet_hardware).
TIME_UNIT_WORDS = ("ms", "decode step", "TPOT", "TTFT", "TBT", "time", "latency", "tok/s")


def claim_trust(unit: str) -> dict[str, Any] | None:
    """{"source": "datasheet", "text"} for a claim whose value is a time or a rate (or a ratio of two), None for
    bytes, bits and token counts (exact counts, no ceiling involved)."""
    words = unit.replace("(", " ").replace(")", " ").replace(",", " ")
    if not any(f" {w} " in f" {words} " or (" " in w and w in words) for w in TIME_UNIT_WORDS):
        return None
    return {"source": "datasheet", "text": f"computed at the paper's datasheet figures; {datasheet_line()}"}


def annotate_claims(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`trust` added in place to each claim row whose value is a time or a rate (claim_trust); returns the rows."""
    for c in rows:
        if (trust := claim_trust(c.get("unit", ""))) is not None:
            c["trust"] = trust
    return rows
