"""Roofline: the device's ceilings with every method's decode ops; the slider moves the ops, the axes stay."""

import streamlit as st
from roofline_app import cache, charts

from roofline import report as fmt
from roofline.dashboard import appdata, rooflinepage, trust
from roofline.methods import presets
from roofline.report import display, tokens

scenario = st.session_state["scenario"]
workload = cache.workload(scenario)
st.header("Roofline")
specs_options = list(dict.fromkeys([*scenario.specs, *sorted(presets())]))
specs = st.multiselect("Methods on this chart", specs_options, key="roofline_methods",
                       default=list(dict.fromkeys([*scenario.specs, *appdata.ROOFLINE_EXTRA])),
                       help="The sidebar's methods, plus AQUA-KV so its predictor cost is in view.")
specs = tuple(specs) or scenario.specs


@cache.fragment("Roofline (slider)")
def chart_and_limits(scenario, workload, specs) -> None:
    """The slider and everything it moves: a slider step reruns this part only (not the sidebar and the page)."""
    options = rooflinepage.context_options(workload.context_tokens)
    context = st.select_slider("Context (tokens cached per sequence)", options=options, value=workload.context_tokens,
                               format_func=tokens, key="roofline_context")
    st.caption(cache.movement(scenario, specs))
    data = cache.roofline_data(scenario, specs, context)
    st.image(charts.roofline_chart(data, cache.roofline_axes(scenario, specs)))
    st.caption("Each point is one decode op of one method (its name, bound and time: the Op table below, or hover "
               "it in the chart image opened on its own). Sloped line: "
               "memory bandwidth; flat lines: dense peaks per dtype; diamonds: ridge points (peak / bandwidth). The "
               "axes cover every context of the slider.")
    model, hardware, _ = cache.specs_of(scenario)
    st.caption(fmt.md_escape(trust.page_caption("roofline", hardware, workload, model)))
    rows = cache.limits(scenario, specs, context)
    if rows:
        st.subheader("Closed-form limits")
        cache.text_table(display.limits_table(rows))
        st.caption("XQuant: the whole decode step (weight reads included) stays memory-bound up to "
                   "l* = R W / (B (F - R C)) (XQuant §3.4, Eq. 3-4); the fused remat op alone, as plotted, has no "
                   "weights to amortize. AQUA-KV: base-model FLOPs per token over predictor FLOPs per token (§3.2 "
                   "claims at least 500x).")
    ops = st.expander("Op table", key="op_table_open", on_change="rerun")
    if ops.open:  # computed and sent only when opened (a rerun)
        ops.dataframe(cache.frame(display.points_table(data["points"])), hide_index=True, lazy=False,
                      key="points_table")
    cache.downloads("roofline-ops", data["points"], key="roofline")


chart_and_limits(scenario, workload, specs)
