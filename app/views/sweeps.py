"""Sweeps: TPOT, tokens/s and the largest batch that fits against context or batch, one line per method, with
each method's fit boundary and the model's max positions marked (a static SVG image: charts.sweep_chart)."""

import streamlit as st
from roofline_app import cache, charts, loading
from roofline_app.charts import SWEEP_METRICS

from roofline import report as fmt
from roofline.dashboard import explore, trust

scenario = st.session_state["scenario"]
model, hardware, workload = cache.specs_of(scenario)
st.header("Sweeps")
c1, c2 = st.columns(2)
axis = c1.radio("Against", ["context", "batch"], horizontal=True, key="sweep_axis")
metric = c2.radio("Show", list(SWEEP_METRICS), horizontal=True, key="sweep_metric",
                  format_func=lambda m: SWEEP_METRICS[m][0])
rows = cache.sweep(scenario, axis)
plan, _ = cache.plan(scenario)
if not rows or plan is None:
    st.info("No method fits this scenario: the Plan page's fit solver says what would.")
    loading.stop()
marks = explore.sweep_marks(model, plan, axis)
st.image(charts.sweep_chart(rows, marks, axis, metric, scenario.tpot_target_s))
at = f"at batch {workload.batch:,}" if axis == "context" else f"at context {workload.context_tokens:,}"
st.caption(f"{SWEEP_METRICS[metric][0]} {at}, from the compiled planner (MethodPlanner.grid); contexts stop at "
           f"{model.max_position_embeddings:,}, the model's max positions. Every point's values: the CSV/JSON below "
           "(or open the chart image on its own and hover a point).")
st.caption(fmt.md_escape(trust.page_caption("sweeps", hardware, workload, model)))
cache.downloads(f"sweep-{axis}", rows, key="sweep")
