"""The sidebar every page shares, drawn from roofline.dashboard.share.FIELDS (a new select box is one Field line there),
seeded from the URL's query string on a session's first run and written back to it on every run (a link reproduces
the page).

An upload is validated in its on_change callback: a valid spec joins the options (labelled with a digest of its
content, so two files never share a label) and becomes the selection; an invalid one leaves the selection as it was
and shows its one-line reason, escaped. Method and workload fields sit in a form whose Apply button comes first.
"""

from __future__ import annotations

import hashlib

import streamlit as st

from roofline import report as fmt
from roofline.dashboard import appdata, share
from roofline.errors import RooflineError, one_line
from roofline.planner.parallel import tp_degrees
from roofline_app import cache
from roofline_app.cache import Scenario

UPLOAD_HELP = {"hardware": "A Hardware spec (YAML or JSON) like the files in hardware/.",
               "model": "A Model spec (YAML or JSON) like the files in models/, or a Hugging Face config.json "
                        "(with its hf_quant_config.json when the checkpoint has one: a ModelOpt FP8 / NVFP4 export "
                        "keeps its quantization there)."}

COMMON = ("batch", "context", "tp", "weight_dtype", "methods")  # the form's fields shown outside "More settings"


def _seed_from_link() -> None:
    """On a session's first run: every field's default, then what the link's query string sets."""
    if st.session_state.get("_seeded"):
        return
    st.session_state["_seeded"] = True
    state, errors = share.from_query(st.query_params.to_dict())
    for key, value in {**share.defaults(), **state}.items():
        st.session_state[key] = value
    st.session_state["link_errors"] = errors


def _uploads(kind: str) -> dict[str, appdata.Source]:
    return st.session_state.setdefault(f"{kind}_uploads", {})


def _source(kind: str, blobs: list[tuple[str, bytes]]) -> tuple[appdata.Source, object]:
    source = appdata.upload_pair(blobs) if kind == "model" else appdata.upload_source(*blobs[0])
    return source, cache.load(kind, source)


def _on_upload(kind: str) -> None:
    got = st.session_state.get(f"{kind}_upload")
    files = [f for f in (got if isinstance(got, list) else [got]) if f is not None]
    if not files:  # the files were removed from the uploader: keep whatever is selected
        return
    blobs = [(f.name, f.getvalue()) for f in files]
    # the model uploader takes several files (a config.json with its hf_quant_config.json) and keeps every file
    # dropped on it, a refused one included: the files just dropped are tried alone when the whole set is refused,
    # so a good config.json dropped after a bad one (or after another model) is read, not refused as a third file
    seen = st.session_state.setdefault(f"{kind}_upload_seen", set())
    new = [b for b in blobs if (b[0], hashlib.sha256(b[1]).hexdigest()) not in seen]
    seen.update((n, hashlib.sha256(b).hexdigest()) for n, b in blobs)
    try:
        try:
            source, spec = _source(kind, blobs)
        except RooflineError:
            if not new or len(new) == len(blobs):
                raise
            source, spec = _source(kind, new)
            blobs = new
    except RooflineError as err:
        st.session_state[f"{kind}_error"] = one_line(str(err))
        return
    digest = hashlib.sha256(b"".join(b for _n, b in blobs)).hexdigest()[:8]
    label = f"uploaded: {spec.name} ({' + '.join(n for n, _b in blobs)}, {digest})"
    _uploads(kind)[label] = source
    st.session_state[kind] = label
    st.session_state[f"{kind}_error"] = None


def _spec_picker(kind: str) -> appdata.Source:
    f = share.BY_KEY[kind]
    options = list(f.options()) + list(_uploads(kind))
    if st.session_state.get(kind) not in options:
        st.session_state[kind] = f.default
    choice = st.sidebar.selectbox(f.label, options, key=kind)
    source = _uploads(kind).get(choice) or appdata.catalogue_source(choice)
    try:
        cache.load(kind, source)
    except RooflineError as err:  # a catalogue file that does not validate: keep the last spec that did
        source = st.session_state.get(f"{kind}_last", appdata.catalogue_source(f.default))
        st.sidebar.error(fmt.md_escape(f"{one_line(str(err))} (still using {appdata.source_label(source)})"))
    st.session_state[f"{kind}_last"] = source
    return source


def _upload_box() -> None:
    """Both uploaders in one expander that runs (and sends them) only when opened: most reruns draw neither file
    drop zone. An upload's callback still picks it (its result lives in st.session_state, not in the widget)."""
    box = st.sidebar.expander("Upload a hardware or model spec", key="upload_open", on_change="rerun")
    if box.open:
        with box:
            for kind in ("hardware", "model"):
                st.file_uploader(f"{kind} spec file", type=["yaml", "yml", "json"], key=f"{kind}_upload",
                                 on_change=_on_upload, args=(kind,), max_upload_size=appdata.UPLOAD_LIMIT_MB,
                                 help=UPLOAD_HELP[kind], accept_multiple_files=kind == "model")
    for kind in ("hardware", "model"):
        if st.session_state.get(f"{kind}_error"):
            st.sidebar.error(fmt.md_escape(st.session_state[f"{kind}_error"]))


def _widget(f: share.Field, where, model) -> None:
    """One field's widget, its value in st.session_state[f.key] (seeded before, so no `value=` here); a value the
    model cannot take is changed and said (share.adjustments)."""
    if f.key in ("tp", "pp"):
        state = {k: st.session_state.get(k, share.BY_KEY[k].default) for k in ("tp", "pp")}
        for line in share.adjustments(state, tp_degrees(model), model.num_layers):
            if line.startswith(f.key + ":"):
                st.session_state.setdefault("adjusted", []).append(line)
    if f.key == "tp":  # degrees that divide the heads
        degrees = tp_degrees(model)
        if st.session_state.get("tp") not in degrees:
            st.session_state["tp"] = 1
        where.selectbox(f.label, degrees, key=f.key, help=f.help)
    elif f.kind == "choice":
        where.selectbox(f.label, list(f.options()), key=f.key, help=f.help or None)
    elif f.kind == "multi":
        options = list(f.options())
        st.session_state[f.key] = [v for v in st.session_state.get(f.key, []) if v in options]
        where.multiselect(f.label, options, key=f.key, help=f.help or None)
    elif f.kind == "text":
        where.text_area(f.label, key=f.key, height=68, placeholder="kivi:bits=3\nzack-50+kvquant-4")
    else:
        hi = model.num_layers if f.key == "pp" else f.hi  # a smaller model than the last one clamps pp
        cast = int if f.kind == "int" else float
        st.session_state[f.key] = cast(min(max(st.session_state.get(f.key, f.default), f.lo), hi))
        where.number_input(f.label, cast(f.lo), cast(hi), step=cast(f.step or 1), key=f.key, help=f.help or None)


def _valid_specs(chosen: list[str], custom: str) -> list[str]:
    specs = list(chosen)
    for spec in appdata.split_specs(custom):
        try:
            specs.append(appdata.check_spec(spec))
        except RooflineError as err:
            st.sidebar.error(fmt.md_escape(one_line(str(err))))
    return list(dict.fromkeys(specs))


def _valid_workload(fields: dict) -> dict:
    try:
        appdata.workload_from(fields)
    except RooflineError as err:
        st.sidebar.error(fmt.md_escape(f"{one_line(str(err))} (still planning the last valid workload)"))
        return st.session_state.get("last_workload", share.workload_fields(share.defaults()))
    st.session_state["last_workload"] = fields
    return fields


def sidebar() -> Scenario:
    """Draw the scenario controls, write the scenario to the URL and return it (also st.session_state['scenario'])."""
    _seed_from_link()
    st.sidebar.header("Scenario")
    st.session_state["adjusted"] = []
    for line in st.session_state.get("link_errors", []):
        st.sidebar.warning(fmt.md_escape(line))
    hardware = _spec_picker("hardware")
    model = _spec_picker("model")
    _upload_box()
    spec_model = cache.load("model", model)
    with st.sidebar.form("plan_form", border=False):
        st.form_submit_button("Apply", type="primary", key="apply", use_container_width=True)
        fields = [f for f in share.FIELDS if f.group in ("workload", "target", "methods")]
        c1, c2 = st.columns(2)
        for i, f in enumerate(f for f in fields if f.key in COMMON and f.kind != "multi"):
            _widget(f, (c1, c2)[i % 2], spec_model)
        for f in (f for f in fields if f.key in COMMON and f.kind == "multi"):
            _widget(f, st, spec_model)
        # the rarely changed ones in an expander, closed (not laid out) unless one of them is set: values and link
        # work as before
        rare = [f for f in fields if f.key not in COMMON]
        with st.expander("More settings", expanded=any(st.session_state.get(f.key, f.default) != f.default
                                                       for f in rare)):
            c1, c2 = st.columns(2)
            for i, f in enumerate(f for f in rare if f.kind != "text"):
                _widget(f, (c1, c2)[i % 2], spec_model)
            for f in (f for f in rare if f.kind == "text"):
                _widget(f, st, spec_model)
    for line in st.session_state.get("adjusted", []):
        st.sidebar.warning(fmt.md_escape(line))
    kept = st.session_state.setdefault("serving_kept", {})  # the Serving page's inputs outlive its widgets
    state = {f.key: st.session_state.get(f.key, kept.get(f.key, f.default)) if f.group == "serving"
             else st.session_state.get(f.key, f.default) for f in share.FIELDS}
    specs = _valid_specs(state["methods"], state["custom"])
    if not specs:
        st.sidebar.warning("No method selected: planning bf16.")
        specs = ["bf16"]
    workload = _valid_workload({**share.workload_fields(state), "tp": int(state["tp"]), "pp": int(state["pp"])})
    target = state["tpot_target_ms"] / 1e3 if state["tpot_target_ms"] else None
    scenario = Scenario(hardware, model, tuple(specs), tuple(sorted(workload.items())), target)
    st.session_state["scenario"] = scenario
    for kind in ("hardware", "model"):
        note = share.upload_note(kind, state[kind])
        if note:
            st.sidebar.info(fmt.md_escape(note))
    shared = {k: v for k, v in state.items() if not (k in ("hardware", "model") and str(v).startswith("uploaded: "))}
    query = share.to_query(shared)
    if query != st.query_params.to_dict():  # each write is a message and a history entry in the browser: only changes
        st.query_params.from_dict(query)
    return scenario
