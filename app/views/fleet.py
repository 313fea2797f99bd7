"""Fleet: the fewest replicas behind a router that serve a target request rate at an SLO, and the cost per million
output tokens there (roofline.dashboard.fleet: the fleet simulated at each size tried)."""

import streamlit as st
from roofline_app import cache, loading

from roofline import report as fmt
from roofline.dashboard.fleet import fleet_answer, fleet_table
from roofline.errors import RooflineError, one_line
from roofline.serving.fleet import ROUTERS
from roofline.serving.simulate import Slo

scenario = st.session_state["scenario"]
model, hardware, workload = cache.specs_of(scenario)
st.header("Fleet: replicas for a target rate at an SLO")
with st.form("fleet"):
    c1, c2, c3 = st.columns(3)
    spec = c1.selectbox("method", list(scenario.specs), key="fleet_method")
    router = c2.selectbox("router", list(ROUTERS), index=ROUTERS.index("least-outstanding"), key="fleet_router")
    rate = c3.number_input("target requests/s", 0.1, 100000.0, 40.0, step=1.0, key="fleet_rate")
    c1, c2, c3 = st.columns(3)
    prompt = c1.number_input("prompt tokens", 1, model.max_position_embeddings, 1024, step=128, key="fleet_prompt")
    output = c2.number_input("output tokens", 1, model.max_position_embeddings, 128, step=32, key="fleet_output")
    count = c3.number_input("requests simulated", 20, 20000, 300, step=100, key="fleet_requests")
    c1, c2, c3 = st.columns(3)
    ttft = c1.number_input("SLO: TTFT p99 (ms)", 1.0, 600000.0, 2000.0, step=100.0, key="fleet_ttft")
    tpot = c2.number_input("SLO: TPOT p99 (ms)", 0.1, 10000.0, 50.0, step=5.0, key="fleet_tpot")
    price = c3.number_input("$ per GPU-hour", 0.0, 1000.0, 3.0, step=0.5, key="fleet_price")
    run = st.form_submit_button("Size the fleet", type="primary")
if not run:
    st.caption("The same Poisson requests are served by fleets of growing size behind the router until one meets both "
               "p99 targets; a few hundred requests take seconds per size on a small machine.")
    loading.stop()
try:
    with st.spinner("simulating fleets"):
        answer = fleet_answer(model, hardware, workload, spec, int(prompt), int(output), int(count),
                              Slo(ttft_s=ttft / 1e3, tpot_s=tpot / 1e3), float(rate), router, price or None)
except (RooflineError, ValueError) as err:
    st.error(one_line(str(err)))
    loading.stop()
if answer["replicas"] is None:
    st.warning(fmt.md_escape(f"No fleet meets the SLO: {answer['reason']}"))
else:
    c1, c2, c3 = st.columns(3)
    c1.metric("replicas", fmt.count(answer["replicas"]), help=f"{router}; one replica alone meets the SLO up to "
              f"{fmt.rate(answer['per_replica_rate_per_s'], 'req/s')}")
    c2.metric("GPUs", fmt.count(answer["gpus"]))
    cost = answer["usd_per_million_output_tokens"]
    c3.metric("$ per million output tokens", "-" if cost is None else f"${cost:,.3f}")
    cache.text_table(fleet_table(answer))
st.caption(fmt.md_escape(f"trust: {answer['trust']}"))
