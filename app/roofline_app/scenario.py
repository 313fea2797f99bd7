"""The sidebar every page shares: hardware, model (catalogue or upload), methods and the workload.

An upload is validated in its on_change callback: a valid spec joins the options and becomes the selection;
an invalid one leaves the selection as it was and shows its one-line reason. Workload and method fields sit
in a form, so a sweep of edits re-plans once, on Apply.
"""

from __future__ import annotations

import streamlit as st

from roofline.catalogue import hardware_names, model_names
from roofline.catalogue.loading import MAX_SPEC_BYTES
from roofline.errors import RooflineError, one_line
from roofline.methods import presets
from roofline.planner.parallel import tp_degrees
from roofline.planner.plan import DEFAULT_SCENARIO
from roofline.report import dashboard as appdata
from roofline_app import cache
from roofline_app.cache import Scenario

KINDS = {"hardware": (hardware_names, DEFAULT_SCENARIO["hardware"]),
         "model": (model_names, DEFAULT_SCENARIO["model"])}
UPLOAD_HELP = {"hardware": "A Hardware spec (YAML or JSON) like the files in hardware/.",
               "model": "A Model spec (YAML or JSON) like the files in models/, or a Hugging Face config.json."}


def _uploads(kind: str) -> dict[str, appdata.Source]:
    return st.session_state.setdefault(f"{kind}_uploads", {})


def _on_upload(kind: str) -> None:
    file = st.session_state.get(f"{kind}_upload")
    if file is None:  # the file was removed from the uploader: keep whatever is selected
        return
    try:
        source = appdata.upload_source(file.name, file.getvalue())
        spec = cache.load(kind, source)
    except RooflineError as err:
        st.session_state[f"{kind}_error"] = one_line(str(err))
        return
    label = f"uploaded: {spec.name} ({file.name})"
    _uploads(kind)[label] = source
    st.session_state[f"{kind}_choice"] = label
    st.session_state[f"{kind}_error"] = None


def _spec_picker(kind: str) -> appdata.Source:
    names, default = KINDS[kind]
    options = names() + list(_uploads(kind))
    if st.session_state.get(f"{kind}_choice") not in options:
        st.session_state[f"{kind}_choice"] = default
    choice = st.sidebar.selectbox(kind.capitalize(), options, key=f"{kind}_choice")
    with st.sidebar.expander(f"Upload a {kind} spec"):
        st.file_uploader(f"{kind} spec file", type=["yaml", "yml", "json"], key=f"{kind}_upload",
                         on_change=_on_upload, args=(kind,), max_upload_size=max(1, MAX_SPEC_BYTES >> 20),
                         help=UPLOAD_HELP[kind])
    if st.session_state.get(f"{kind}_error"):
        st.sidebar.error(st.session_state[f"{kind}_error"])
    source = _uploads(kind).get(choice) or appdata.catalogue_source(choice)
    try:
        cache.load(kind, source)
    except RooflineError as err:  # a catalogue file that does not validate: keep the last spec that did
        source = st.session_state.get(f"{kind}_last", appdata.catalogue_source(default))
        st.sidebar.error(f"{one_line(str(err))} (still using {appdata.source_label(source)})")
    st.session_state[f"{kind}_last"] = source
    return source


def _method_fields() -> tuple[list[str], str]:
    names = sorted(presets())
    chosen = st.multiselect("Methods (presets)", names, default=list(appdata.DEFAULT_METHODS), key="methods",
                            help="Each preset is a configuration from a seed paper or a baseline; `roofline list "
                                 "methods` describes them.")
    custom = st.text_area("Custom method SPECs (one per line, or separated by ';')", key="custom_specs",
                          placeholder="kivi:bits=3\nzack-50+kvquant-4", height=80)
    return chosen, custom


def _workload_fields(model) -> dict:
    defaults = appdata.WORKLOAD_DEFAULTS
    c1, c2 = st.columns(2)
    batch = c1.number_input("Batch (sequences)", 1, 1 << 16, defaults["batch"], key="batch")
    context = c2.number_input("Context (tokens)", 2, 1 << 30, defaults["context_tokens"], step=1024, key="context")
    generated = c1.number_input("Generated tokens", 0, 1 << 30, defaults["generated_tokens"], step=256,
                                key="generated")
    utilization = c2.number_input("GPU memory utilization", 0.05, 1.0, defaults["gpu_memory_utilization"],
                                  step=0.05, key="utilization")
    tp = c1.selectbox("Tensor parallel", tp_degrees(model), key="tp", help="Degrees that divide the heads.")
    # the value lives in session state alone, so a smaller model than the last one can clamp it
    st.session_state["pp"] = min(st.session_state.get("pp", 1), model.num_layers)
    pp = c2.number_input("Pipeline stages", 1, model.num_layers, key="pp")
    return {"batch": int(batch), "context_tokens": int(context), "generated_tokens": int(generated), "tp": int(tp),
            "pp": int(pp), "gpu_memory_utilization": float(utilization)}


def _valid_specs(chosen: list[str], custom: str) -> list[str]:
    specs = list(chosen)
    for spec in appdata.split_specs(custom):
        try:
            specs.append(appdata.check_spec(spec))
        except RooflineError as err:
            st.sidebar.error(one_line(str(err)))
    return list(dict.fromkeys(specs))


def _valid_workload(fields: dict) -> dict:
    try:
        appdata.workload_from(fields)
    except RooflineError as err:
        st.sidebar.error(f"{one_line(str(err))} (still planning the last valid workload)")
        return st.session_state.get("last_workload", appdata.WORKLOAD_DEFAULTS)
    st.session_state["last_workload"] = fields
    return fields


def sidebar() -> Scenario:
    """Draw the scenario controls and return the scenario (also kept as st.session_state['scenario'])."""
    st.sidebar.header("Scenario")
    hardware = _spec_picker("hardware")
    model = _spec_picker("model")
    with st.sidebar.form("plan_form"):
        chosen, custom = _method_fields()
        fields = _workload_fields(cache.load("model", model))
        st.form_submit_button("Apply", type="primary", key="apply")
    specs = _valid_specs(chosen, custom)
    if not specs:
        st.sidebar.warning("No method selected: planning bf16.")
        specs = ["bf16"]
    workload = _valid_workload(fields)
    scenario = Scenario(hardware, model, tuple(specs), tuple(sorted(workload.items())))
    st.session_state["scenario"] = scenario
    return scenario
