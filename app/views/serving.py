"""Serving: latency against request rate per method, with the SLO, from the request-level simulation
(roofline.serving: continuous batching, chunked prefill, the paged pool, preemption by recompute)."""

import streamlit as st
from roofline_app import cache, charts

from roofline.errors import RooflineError, one_line
from roofline.report import display
from roofline.report.serving_curves import latency_vs_rate
from roofline.serving.simulate import Slo

scenario = st.session_state["scenario"]
model, hardware, workload = cache.specs_of(scenario)
st.header("Serving: latency against request rate")
with st.form("serving"):
    c1, c2, c3, c4, c5 = st.columns(5)
    prompt = c1.number_input("Prompt tokens", 16, model.max_position_embeddings, 4096, step=512, key="srv_prompt")
    output = c2.number_input("Output tokens", 1, model.max_position_embeddings, 512, step=128, key="srv_output")
    count = c3.number_input("Requests", 50, 5000, 300, step=50, key="srv_requests")
    ttft = c4.number_input("TTFT p99 SLO (ms)", 1.0, 1e6, 2000.0, key="srv_ttft")
    tpot = c5.number_input("TPOT p99 SLO (ms)", 0.1, 1e5, 50.0, key="srv_tpot")
    run = st.form_submit_button("Simulate", type="primary")
if not run:
    st.caption("Each method replays the same Poisson requests at 5-120 % of its saturated rate; a run of 300 "
               "requests takes about a second per method and rate on a small machine.")
    st.stop()
slo = Slo(ttft_s=ttft / 1e3, tpot_s=tpot / 1e3)
try:
    with st.spinner("simulating"):
        result = latency_vs_rate(model, hardware, workload, list(scenario.specs), int(prompt), int(output),
                                 int(count), slo)
except (RooflineError, ValueError) as err:
    st.error(one_line(str(err)))
    st.stop()
cache.images(*charts.serving_chart(result["rows"], slo.ttft_s, slo.tpot_s))
st.dataframe(cache.frame(display.serving_table(result)), hide_index=True, lazy=False, key="serving_best")
cache.downloads("serving", result["rows"], key="serving")
