"""Serving: latency against request rate per method, with the SLO, from the request-level simulation
(roofline.serving: continuous batching, chunked prefill, the paged pool, preemption by recompute)."""

import streamlit as st
from roofline_app import cache, charts, loading

from roofline import report as fmt
from roofline.dashboard import share, trust
from roofline.dashboard.serving_curves import api_loop_floor, latency_vs_rate
from roofline.errors import RooflineError, one_line
from roofline.report import display
from roofline.serving.simulate import Slo

scenario = st.session_state["scenario"]
model, hardware, workload = cache.specs_of(scenario)
st.header("Serving: latency against request rate")
kept = st.session_state.setdefault("serving_kept", {})
with st.form("serving"):
    values = {}
    for col, key in zip(st.columns(len(share.SERVING)), share.SERVING, strict=True):
        f = share.BY_KEY[key]
        hi = min(f.hi, model.max_position_embeddings) if key in ("srv_prompt", "srv_output") else f.hi
        cast = int if f.kind == "int" else float
        # seeded from the link (or what this session set before): the widget's own state is dropped off this page
        st.session_state[key] = cast(min(max(st.session_state.get(key, kept.get(key, f.default)), f.lo), hi))
        values[key] = col.number_input(f.label, cast(f.lo), cast(hi), step=cast(f.step), key=key)
    run = st.form_submit_button("Simulate", type="primary")
kept.update(values)
prompt, output, count = values["srv_prompt"], values["srv_output"], values["srv_requests"]
ttft, tpot = values["srv_ttft"], values["srv_tpot"]
if not run:
    st.caption("Each method replays the same Poisson requests at 5-120 % of the larger of its saturated rate and "
               "its max rate at the SLO; a run of 300 requests takes about a second per method and rate on a small "
               "machine.")
    loading.stop()
slo = Slo(ttft_s=ttft / 1e3, tpot_s=tpot / 1e3)
try:
    with st.spinner("simulating"):
        result = latency_vs_rate(model, hardware, workload, list(scenario.specs), int(prompt), int(output),
                                 int(count), slo)
except (RooflineError, ValueError) as err:
    st.error(one_line(str(err)))
    loading.stop()
cache.images(*charts.serving_chart(result["rows"], slo.ttft_s, slo.tpot_s))
cache.text_table(display.serving_table(result))  # Markdown: read on screen, no data-grid bundle
burst: dict[str, float] = {}  # each method's highest rate on the curve at the burst clock (serving.clock)
for r in result["rows"]:
    if r.get("tensor_clock") == "burst":
        burst[r["method"]] = max(burst.get(r["method"], 0.0), r["rate_per_s"])
if burst:
    st.caption("GEMMs at the burst clock up to " + ", ".join(f"{m} {v:.3g} req/s" for m, v in burst.items())
               + ": there the GEMMs run at most half the time, so the board stays under its power cap; above, at the "
               "sustained, power-capped rate (docs/serving.md, 'The tensor cores' clock').")
if floor := api_loop_floor(result["rows"]):
    st.warning("The API server's one loop is past 90 % busy from " + ", ".join(f"{m} {v:.3g} req/s" for m, v in
               floor.items()) + " (streamed tokens a second x its measured cost a token): from there a new request "
               "waits for the GIL that loop holds, which the simulation does not time, so TTFT is a floor "
               "(roofline.engines.timing 25., docs/serving.md).")
st.caption(fmt.md_escape(trust.page_caption("serving", hardware, workload, model)))
cache.downloads("serving", result["rows"], key="serving")
