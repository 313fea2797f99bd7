"""Cached calls into roofline.report, keyed on hashable inputs (sources, SPEC strings, numbers), never on pydantic
objects: a repeated interaction costs a dictionary lookup. The planners themselves are compiled once per content
(roofline.numbers.codegen), so a new batch or context costs microseconds per method; the warm-up process
(roofline.dashboard.warm) fills the disk cache for new GPUs and models before they are asked for.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import streamlit as st

from roofline.dashboard import appdata, explore, rooflinepage
from roofline.dashboard import pages as trust
from roofline.errors import RooflineError, one_line


class Scenario(NamedTuple):
    """What every page plans: hardware and model sources, method SPECs, workload fields (sorted items), and the
    TPOT target in seconds (None: no SLO)."""

    hardware: appdata.Source
    model: appdata.Source
    specs: tuple[str, ...]
    workload: tuple[tuple[str, Any], ...]
    tpot_target_s: float | None = None


@st.cache_resource(show_spinner=False)
def start_warmup() -> subprocess.Popen | None:
    """The cache warm-up process, once per server (niced; its writes are the entries the app would compute; it ends
    with the server: roofline_app/warmup.py); ROOFLINE_APP_WARMUP=off skips it. It runs only while no script runs
    (`hold_warmup`)."""
    if os.environ.get("ROOFLINE_APP_WARMUP", "").lower() in ("off", "0", "no"):
        return None
    try:
        proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "warmup.py"),
                                 str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None
    WARMUP.append(proc)
    atexit.register(_end_warmup, proc)  # a server that exits (SIGTERM, Ctrl-C) ends it, stopped or not
    return proc


def _end_warmup(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()


@st.cache_resource(show_spinner=False)
def preload_symbolic() -> threading.Thread:
    """Import sympy in the server process on a background thread, once, after the first page is drawn: the disk
    cache serves the pages the warm-up reached without it, so the first interaction that compiles (a model or tp
    nobody warmed) paid its import, 0.29 s of the 0.87 s run of Llama-3.1-70B on tp 2 in the browser test's profile
    (ROOFLINE_APP_PROFILE)."""
    from roofline.lazy import sp

    thread = threading.Thread(target=lambda: sp.Integer, name="roofline-preload-sympy", daemon=True)
    thread.start()
    return thread


WARMUP: list[subprocess.Popen] = []  # the warm-up process once started (start_warmup)
_HOLDS = {"runs": 0}  # script runs in progress, over every session's thread
_HOLDS_LOCK = threading.Lock()


def _signal_warmup(sig: int) -> None:
    for proc in WARMUP:
        if proc.poll() is None:
            try:
                os.kill(proc.pid, sig)
            except OSError:  # it ended meanwhile
                pass


def hold_warmup() -> None:
    """A script run starts: stop the warm-up process (SIGSTOP) while any run is in progress, so an interaction has
    the machine's cores to itself. Measured in the browser test (a new model, Llama-3.1-70B on tp 2, compiled while
    the warm-up worked): 686 ms server-side with the warm-up running, 467 ms with it off, on the 2-core box. A server
    that dies while it holds the warm-up leaves it in an orphaned process group, which the kernel sends SIGHUP and
    SIGCONT (POSIX), so it cannot stay stopped."""
    if not hasattr(signal, "SIGSTOP"):
        return
    with _HOLDS_LOCK:
        _HOLDS["runs"] += 1
        if _HOLDS["runs"] == 1:
            _signal_warmup(signal.SIGSTOP)


def release_warmup() -> None:
    """A script run ends (`hold_warmup`): the last one lets the warm-up go on (SIGCONT)."""
    if not hasattr(signal, "SIGCONT"):
        return
    with _HOLDS_LOCK:
        _HOLDS["runs"] = max(0, _HOLDS["runs"] - 1)
        if _HOLDS["runs"] == 0:
            _signal_warmup(signal.SIGCONT)


FULL_RUN = threading.local()  # .active: main.py is running the whole script on this thread


def fragment(label: str):
    """st.fragment whose own reruns (a widget inside it changed; the page and the sidebar do not run) are
    recorded like a script run (record_run); main.py marks the whole script's runs in FULL_RUN."""
    def wrap(fn):
        @st.fragment
        @functools.wraps(fn)
        def run(*args, **kwargs):
            alone, start = not getattr(FULL_RUN, "active", False), time.perf_counter()
            if alone:
                hold_warmup()
            try:
                return fn(*args, **kwargs)
            finally:
                if alone:
                    release_warmup()
                    record_run(label, time.perf_counter() - start)
        return run
    return wrap


def record_run(page: str, seconds: float) -> None:
    """One line per script run (page, server-side seconds) appended to $ROOFLINE_APP_TIMINGS when set: what the
    browser test reports as the server-side time of an interaction."""
    path = os.environ.get("ROOFLINE_APP_TIMINGS")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({"page": page, "seconds": seconds}) + "\n")


@st.cache_resource(show_spinner=False, max_entries=64)
def load(kind: str, source: appdata.Source):
    """A Hardware or Model spec (frozen pydantic objects: shared, never copied)."""
    return appdata.load_source(kind, source)


def specs_of(s: Scenario):
    return load("model", s.model), load("hardware", s.hardware), workload(s)


def workload(s: Scenario):
    return appdata.model_workload(load("model", s.model), dict(s.workload))


@st.cache_data(show_spinner=False, max_entries=2048)
def method_result(hardware: appdata.Source, model: appdata.Source, workload_items: tuple, spec: str) -> dict:
    """{"result": plan row} or {"error": one line}: one method that cannot be planned leaves the others."""
    try:
        spec_model = load("model", model)
        return {"result": appdata.method_result(spec_model, load("hardware", hardware),
                                                appdata.model_workload(spec_model, dict(workload_items)), spec)}
    except (RooflineError, ValueError) as err:
        return {"error": f"{spec}: {one_line(str(err))}"}


def plan(s: Scenario, extra: tuple[str, ...] = ()) -> tuple[dict | None, list[str]]:
    """The plan dict of the scenario's methods (and `extra`) that could be planned, and one error line per other."""
    specs = tuple(dict.fromkeys([*s.specs, *extra]))
    outcomes = [method_result(s.hardware, s.model, s.workload, spec) for spec in specs]
    results = [o["result"] for o in outcomes if "result" in o]
    errors = [o["error"] for o in outcomes if "error" in o]
    if not results:
        return None, errors
    return appdata.plan_dict(*specs_of(s), results), errors


@st.cache_data(show_spinner=False, max_entries=256)
def fit(s: Scenario) -> list[dict]:
    return explore.fit_solver(*specs_of(s), s.specs, s.tpot_target_s)


@st.cache_data(show_spinner=False, max_entries=256)
def sweep(s: Scenario, axis: str) -> list[dict]:
    return explore.sweep_kept(*specs_of(s), s.specs, axis)


@st.cache_data(show_spinner=False, max_entries=256)
def roofline_data(s: Scenario, specs: tuple[str, ...], context: int) -> dict:
    return rooflinepage.kept("roofline_data", *specs_of(s), specs, context)


@st.cache_data(show_spinner=False, max_entries=64)
def roofline_axes(s: Scenario, specs: tuple[str, ...]) -> dict:
    return rooflinepage.kept("roofline_axes", *specs_of(s), specs)


@st.cache_data(show_spinner=False, max_entries=64)
def movement(s: Scenario, specs: tuple[str, ...]) -> str:
    return rooflinepage.movement_caption(rooflinepage.kept("own_op_movement", *specs_of(s), specs))


@st.cache_data(show_spinner=False, max_entries=256)
def limits(s: Scenario, specs: tuple[str, ...], context: int) -> list[dict]:
    return rooflinepage.kept("limits_rows", *specs_of(s), specs, context)


@st.cache_data(show_spinner=False, max_entries=256)
def quality(benchmark: str, context: int) -> list[dict]:
    return appdata.quality_rows(benchmark, context)


@st.cache_data(show_spinner=False)
def benchmark_specs(benchmark: str) -> tuple[str, ...]:
    from roofline.analysis.quality import benchmark_specs as specs

    return specs(benchmark)


def claims() -> list[dict]:
    return trust.claims_rows()


def validation_reports() -> list[dict]:
    return trust.validation_reports()


def images(*svgs: str) -> None:
    """Static SVG charts (roofline_app.charts) as st.image: one, or several side by side in columns."""
    if len(svgs) == 1:
        st.image(svgs[0])
        return
    for col, svg in zip(st.columns(len(svgs)), svgs, strict=True):
        col.image(svg)


def frame(rows: Sequence[dict]) -> Any:
    """A table for st.dataframe as a pyarrow Table built from buffers (roofline_app.arrow), which Streamlit serializes
    as is: a list of rows goes through pandas (its import alone was ~0.6 s of the cold first load). Rows of other
    column types, or with different columns, go as they are, through Streamlit's own conversion."""
    from roofline_app import arrow

    rows = list(rows)
    table = arrow.table(rows)
    return rows if table is None else table


NUMERIC_START = set("0123456789-+.<>")


def markdown_table(rows: Sequence[dict]) -> str:
    """Rows of cells (the same keys in each) as one GFM table: columns of numbers right aligned, text left; every
    cell Markdown-escaped (report.md_escape, runs of whitespace and newlines as one space), so a user-supplied
    string (an uploaded model's name, a custom SPEC) is shown as literal text: no link, image, HTML or column."""
    from roofline import report as fmt

    def cell(value: Any) -> str:
        return fmt.md_escape(" ".join(str(value).split()))

    head = list(rows[0])
    numeric = [all(str(r[h])[:1] in NUMERIC_START for r in rows) for h in head]
    lines = ["| " + " | ".join(cell(h) for h in head) + " |",
             "|" + "|".join("--:" if right else ":--" for right in numeric) + "|"]
    return "\n".join(lines + ["| " + " | ".join(cell(r[h]) for h in head) + " |" for r in rows])


def text_table(rows: Sequence[dict]) -> None:
    """A small table of text cells as Markdown (markdown_table): the browser draws it with the Markdown code every
    page already loads, where st.dataframe loads and evaluates the data-grid bundle (1.2 MB of JS: the cold first
    load and a shared link's) and st.table imports pandas on the server. For a handful of rows that need no
    sorting or scrolling; the page's CSV/JSON downloads hold the raw numbers."""
    rows = list(rows)
    if rows:
        st.markdown(markdown_table(rows))


def downloads(stem: str, rows: Any, key: str, csv_text: Callable[[], str] | None = None,
              json_text: Callable[[], str] | None = None) -> None:
    """CSV and JSON download buttons for a table (the library's serializations), written when clicked: Streamlit
    calls a callable `data` on the click, so a re-render no longer serializes every table twice (0.1-0.4 s on
    the Validation page's 250 cases)."""
    def as_bytes(text: Callable[[], str]) -> Callable[[], bytes]:
        return lambda: text().encode()

    c1, c2, _ = st.columns([1, 1, 4])
    c1.download_button("Download CSV", as_bytes(csv_text or (lambda: appdata.rows_csv(rows))), file_name=f"{stem}.csv",
                       mime="text/csv", on_click="ignore", key=f"{key}_csv")
    c2.download_button("Download JSON", as_bytes(json_text or (lambda: appdata.rows_json(rows))),
                       file_name=f"{stem}.json", mime="application/json", on_click="ignore", key=f"{key}_json")
