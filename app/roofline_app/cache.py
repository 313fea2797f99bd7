"""Cached calls into roofline.report.dashboard, keyed on hashable inputs (sources, SPEC strings, numbers), never on
pydantic objects: a repeated interaction costs a dictionary lookup, not a sympy evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import streamlit as st

from roofline.errors import RooflineError, one_line
from roofline.report import dashboard as appdata


class Scenario(NamedTuple):
    """What every page plans: hardware and model sources, method SPECs, workload fields (sorted items)."""

    hardware: appdata.Source
    model: appdata.Source
    specs: tuple[str, ...]
    workload: tuple[tuple[str, Any], ...]


@st.cache_resource(show_spinner=False, max_entries=64)
def load(kind: str, source: appdata.Source):
    """A Hardware or Model spec (frozen pydantic objects: shared, never copied)."""
    return appdata.load_source(kind, source)


def workload(s: Scenario):
    return appdata.workload_from(dict(s.workload))


@st.cache_data(show_spinner=False, max_entries=2048)
def method_result(hardware: appdata.Source, model: appdata.Source, workload_items: tuple, spec: str) -> dict:
    """{"result": plan row} or {"error": one line}: one method that cannot be planned leaves the others."""
    try:
        return {"result": appdata.method_result(load("model", model), load("hardware", hardware),
                                                appdata.workload_from(dict(workload_items)), spec)}
    except (RooflineError, ValueError) as err:
        return {"error": f"{spec}: {one_line(str(err))}"}


def plan(s: Scenario) -> tuple[dict | None, list[str]]:
    """The plan dict of the scenario's methods that could be planned, and one error line per other method."""
    outcomes = [method_result(s.hardware, s.model, s.workload, spec) for spec in s.specs]
    results = [o["result"] for o in outcomes if "result" in o]
    errors = [o["error"] for o in outcomes if "error" in o]
    if not results:
        return None, errors
    return appdata.plan_dict(load("model", s.model), load("hardware", s.hardware), workload(s), results), errors


@st.cache_data(show_spinner=False, max_entries=256)
def roofline_data(s: Scenario, specs: tuple[str, ...], context: int) -> dict:
    return appdata.roofline_data(load("model", s.model), load("hardware", s.hardware), workload(s), specs, context)


@st.cache_data(show_spinner=False, max_entries=256)
def limits(s: Scenario, specs: tuple[str, ...], context: int) -> list[dict]:
    return appdata.limits_rows(load("model", s.model), load("hardware", s.hardware), workload(s), specs, context)


@st.cache_data(show_spinner=False, max_entries=256)
def quality(benchmark: str, context: int) -> list[dict]:
    return appdata.quality_rows(benchmark, context)


@st.cache_data(show_spinner=False)
def claims() -> list[dict]:
    return appdata.claims_rows()


@st.cache_data(show_spinner=False, max_entries=32)
def validation(path: str, mtime_ns: int) -> dict:
    """One results file's comparison ({"error": line} if it cannot be read); keyed on the file's mtime."""
    try:
        return appdata.validation_report(Path(path))
    except (RooflineError, ValueError, OSError) as err:
        return {"file": Path(path).name, "error": one_line(str(err))}


def validation_reports() -> list[dict]:
    return [validation(str(p), p.stat().st_mtime_ns) for p in appdata.results_files()]


@st.cache_data(show_spinner=False, max_entries=512)
def chart(name: str, *args) -> dict:
    """The Vega-Lite spec of charts.<name>(*args), built once per input: Altair's schema validation costs
    more than the whole rest of a re-render."""
    from roofline_app import charts

    return getattr(charts, name)(*args).to_dict()


def draw(name: str, *args, key: str) -> None:
    st.vega_lite_chart(spec=chart(name, *args), key=key)
