"""Roofline: the device's ceilings with every method's decode ops; a context slider moves the ops."""

import streamlit as st
from roofline_app import cache

from roofline.methods import presets
from roofline.report import dashboard as appdata
from roofline.report import tokens

scenario = st.session_state["scenario"]
workload = cache.workload(scenario)
st.title("Roofline")
specs_options = list(dict.fromkeys([*scenario.specs, *sorted(presets())]))
specs = st.multiselect("Methods on this chart", specs_options, key="roofline_methods",
                       default=list(dict.fromkeys([*scenario.specs, *appdata.ROOFLINE_EXTRA])),
                       help="The sidebar's methods, plus AQUA-KV so its predictor cost is in view.")
specs = tuple(specs) or scenario.specs
options = appdata.context_options(workload.context_tokens)
context = st.select_slider("Context (tokens cached per sequence)", options=options, value=workload.context_tokens,
                           format_func=tokens, key="roofline_context")
st.caption("Drag to watch the ops move: XQuant's fused rematerialization gains intensity with the context and "
           "crosses the ridge; AQUA-KV's predictor reconstruction grows with every cached token.")

data = cache.roofline_data(scenario, specs, context)
cache.draw("roofline_chart", data, key="roofline_chart")
st.caption("Each point is one decode op of one method (hover for its name, bound and time). Sloped line: memory "
           "bandwidth; flat lines: dense peaks per dtype; diamonds: ridge points (peak / bandwidth).")

st.subheader("Closed-form limits")
rows = cache.limits(scenario, specs, context)
if rows:
    st.dataframe(rows, hide_index=True, key="limits_table",
                 column_config={"value": st.column_config.NumberColumn(format="localized"),
                                "detail": st.column_config.TextColumn(width="large")})
else:
    st.info("Add an XQuant or AQUA-KV method above to see its limit (e.g. xquant-2, aquakv-2).")
st.caption("XQuant: the context l* up to which rematerializing K and V stays memory-bound at this batch, "
           "l* = R W / (B (F - R C)) (XQuant §3.4, Eq. 3-4; F, C, W from the op graph, R the ridge). AQUA-KV: "
           "base-model FLOPs per token over predictor FLOPs per token (§3.2 claims at least 500x).")

with st.expander("Op table"):
    st.dataframe(data["points"], hide_index=True, key="points_table",
                 column_order=["method", "op", "kind", "intensity", "flops_per_s", "bound", "time_s", "count"])
